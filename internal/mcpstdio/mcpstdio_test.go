package mcpstdio_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paperclipai/paperclipai/internal/mcpstdio"
)

type echoArgs struct {
	Text string `json:"text"`
}

func echoServer(t *testing.T, jsonResponse bool, seen chan<- http.Header) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer pcr_test" {
			http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		select {
		case seen <- r.Header.Clone():
		default:
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// connect runs the proxy between an MCP client (over pipes, as a CLI would
// spawn it) and target.
func connect(t *testing.T, target mcpstdio.Target) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := mcpstdio.Run(context.Background(), inR, outW, target)
		outW.Close()
		done <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	return s, done
}

func TestProxyCallsTools(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		name := map[bool]string{true: "json", false: "event-stream"}[jsonResponse]
		t.Run(name, func(t *testing.T) {
			seen := make(chan http.Header, 64)
			ts := echoServer(t, jsonResponse, seen)
			s, done := connect(t, mcpstdio.Target{Endpoint: ts.URL, Header: http.Header{"Authorization": {"Bearer pcr_test"}}})
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo: hi" {
				t.Fatalf("tool result: %+v", res.Content)
			}
			var last http.Header
			for len(seen) > 0 {
				last = <-seen
			}
			if last.Get("Mcp-Protocol-Version") == "" {
				t.Fatal("requests after initialize must carry the negotiated protocol version")
			}
			_ = s.Close()
			if err := <-done; err != nil {
				t.Fatalf("proxy ended with %v", err)
			}
		})
	}
}

func TestProxyAnswersRefusals(t *testing.T) {
	ts := echoServer(t, true, make(chan http.Header, 1))
	inR, inW := io.Pipe()
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- mcpstdio.Run(context.Background(), inR, &out, mcpstdio.Target{Endpoint: ts.URL}) }()
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"+`not json`+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, `"id":7`) || !strings.Contains(got, "HTTP 401") || !strings.Contains(got, "parse error") || strings.Count(got, "\n") != 2 {
		t.Fatalf("refusals: %s", got)
	}
	inR2, inW2 := io.Pipe()
	out.Reset()
	go func() {
		done <- mcpstdio.Run(context.Background(), inR2, &out, mcpstdio.Target{Endpoint: "http://127.0.0.1:1/mcp"})
	}()
	_, _ = io.WriteString(inW2, `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}`+"\n")
	inW2.Close()
	<-done
	if !strings.Contains(out.String(), `"id":"a"`) || !strings.Contains(out.String(), "unreachable") {
		t.Fatalf("unreachable endpoint: %s", out.String())
	}
}

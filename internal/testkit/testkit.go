// Package testkit starts real control-plane servers for tests (in-process
// or as the built binary) on SQLite or PostgreSQL and talks to their API.
package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/server"
)

// SyncBuffer is a goroutine-safe bytes.Buffer for captured logs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Instance is an in-process server under test.
type Instance struct {
	*server.Server
	Logs *SyncBuffer
	Home string
}

// Config returns a test configuration: temporary home, loopback port 0,
// local_trusted, short run leases.
func Config(t testing.TB, databaseURL string) config.Config {
	t.Helper()
	home := t.TempDir()
	// Only the email timing overrides and the UI's poll interval come from
	// the environment (tests set them with t.Setenv, as the crash tests do
	// for the binary).
	cfg, err := config.Load(config.Flags{Listen: "127.0.0.1:0", Home: home, DatabaseURL: databaseURL}, func(k string) string {
		if strings.HasPrefix(k, "PAPERCLIP_EMAIL_") || k == "PAPERCLIP_UI_POLL_MS" {
			return os.Getenv(k)
		}
		return ""
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.RunLeaseTTL = 3 * time.Second
	cfg.ShutdownGrace = 10 * time.Second
	cfg.LogLevel = "debug"
	if databaseURL != "" {
		// Replicas on one database must share the master key (the server
		// refuses another): every home on one test database gets the same
		// key file, derived from the database's URL.
		sum := sha256.Sum256([]byte("paperclip test master key:" + databaseURL))
		if err := os.MkdirAll(filepath.Dir(cfg.MasterKeyFile), 0o700); err != nil {
			t.Fatalf("master key: %v", err)
		}
		if err := os.WriteFile(cfg.MasterKeyFile, []byte(base64.StdEncoding.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
			t.Fatalf("master key: %v", err)
		}
	}
	return cfg
}

// Start starts an in-process server with cfg and stops it when the test ends.
func Start(t testing.TB, cfg config.Config) *Instance {
	t.Helper()
	logs := &SyncBuffer{}
	// Runs find the real CLI as paperclipai (the test binary would run
	// the tests again).
	srv, err := server.Start(context.Background(), cfg, server.Options{LogOutput: logs, AgentBinary: Binary(t)})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &Instance{Server: srv, Logs: logs, Home: cfg.Home}
}

// Client calls a server's API.
type Client struct {
	T     testing.TB
	Base  string // e.g. http://127.0.0.1:1234
	Token string
	RunID string
	// Seen records every response body, for secret-leak checks.
	Seen *SyncBuffer
}

// NewClient returns a client for base with no credential (local board).
func NewClient(t testing.TB, base string) *Client {
	return &Client{T: t, Base: strings.TrimRight(base, "/"), Seen: &SyncBuffer{}}
}

// As returns a copy of c that authenticates with token (and run id).
func (c *Client) As(token, runID string) *Client {
	cp := *c
	cp.Token, cp.RunID = token, runID
	return &cp
}

// Do sends a request; body may be nil, a string/[]byte (sent raw) or a value
// (JSON-encoded). It returns the status and response body.
func (c *Client) Do(method, path string, body any) (int, []byte) {
	c.T.Helper()
	st, out, _ := c.DoHeader(method, path, body)
	return st, out
}

// DoHeader is Do that also returns the response headers.
func (c *Client) DoHeader(method, path string, body any) (int, []byte, http.Header) {
	c.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.T.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		c.T.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.RunID != "" {
		req.Header.Set("X-Paperclip-Run-Id", c.RunID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	c.Seen.Write(out)
	return resp.StatusCode, out, resp.Header
}

// JSON sends a request, requires the wanted status and decodes the answer
// into a map (or a []any for lists).
func (c *Client) JSON(method, path string, body any, want int) map[string]any {
	c.T.Helper()
	status, out := c.Do(method, path, body)
	if status != want {
		c.T.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, out)
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, &m); err != nil {
			c.T.Fatalf("%s %s: decode %s: %v", method, path, out, err)
		}
	}
	return m
}

// List sends a GET, requires 200 and decodes a JSON array.
func (c *Client) List(path string) []map[string]any {
	c.T.Helper()
	status, out := c.Do("GET", path, nil)
	if status != 200 {
		c.T.Fatalf("GET %s: status %d: %s", path, status, out)
	}
	var l []map[string]any
	if err := json.Unmarshal(out, &l); err != nil {
		c.T.Fatalf("GET %s: decode: %v", path, err)
	}
	return l
}

// Eventually polls cond until it is true or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", within, what)
}

var binary onceValue

// Binary builds ./cmd/paperclipai once per test process and returns its path.
// When PAPERCLIP_TEST_BINARY names a file (./scripts/test builds the binary
// once for every test process) that file is used instead.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := binary.get(func() (string, error) {
		if p := os.Getenv("PAPERCLIP_TEST_BINARY"); p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("PAPERCLIP_TEST_BINARY: %w", err)
			}
			return p, nil
		}
		dir, err := os.MkdirTemp("", "paperclipai-bin-")
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, "paperclipai")
		return path, goBuild(path, "./cmd/paperclipai")
	})
	if err != nil {
		t.Fatalf("build binary: %v", err)
	}
	return path
}

// ID returns m["id"] as a string.
func ID(m map[string]any) string {
	s, _ := m["id"].(string)
	return s
}

// NewUUID returns a random UUID string.
func NewUUID() string { return uuid.NewString() }

// MustEqual fails the test when got is not want; what names the value.
func MustEqual[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// ParseTime reads an API timestamp (RFC 3339) and fails the test when v
// is not one.
func ParseTime(t testing.TB, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("not a timestamp: %v", v)
	}
	return tm
}

// SetSpend records that agentID has spent cents this month, as charged
// runs would: the API never writes spend (only an owner's or admin's
// reset to 0), so tests of an exhausted budget set it here.
func (i *Instance) SetSpend(t testing.TB, agentID string, cents int64) {
	t.Helper()
	ctx := context.Background()
	a, err := i.Store.GetAgent(ctx, i.DB, agentID)
	if err != nil {
		t.Fatalf("set spend: %v", err)
	}
	a.SpentMonthlyCents, a.SpendPeriod = cents, i.Store.Now().Format("2006-01")
	if err := i.Store.UpdateAgent(ctx, i.DB, &a); err != nil {
		t.Fatalf("set spend: %v", err)
	}
}

package sandbox_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// recorder is a fake API that records what reached it.
type recorder struct {
	got []*http.Request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.got = append(r.got, req)
	w.WriteHeader(http.StatusTeapot)
}

// TestBridgeAllowlist checks the bridge's whole decision table over a real
// unix socket: allowlisted operations on the run's own task and company are
// forwarded with the run's credentials (whatever the client sent); setup,
// control and anything on another task or company — including another
// task's email thread and sends — is refused with 403.
func TestBridgeAllowlist(t *testing.T) {
	const company, task, other = "c0000000-0000-0000-0000-000000000001", "t0000000-0000-0000-0000-000000000001", "t0000000-0000-0000-0000-000000000002"
	api := &recorder{}
	pubs := func(_ context.Context, id string) (string, string, error) {
		switch id {
		case "p1":
			return company, task, nil
		case "p-other-task":
			return company, other, nil
		case "p-other-company":
			return "another-company", task, nil
		}
		return "", "", errors.New("not found")
	}
	dir := filepath.Join(t.TempDir(), "bridge")
	b, client := runBridge(t, api, company, task, pubs, dir)
	defer b.Close()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cases := []struct {
		method, path string
		forwarded    bool
	}{
		{"GET", "/api/issues/" + task, true},
		{"PATCH", "/api/issues/" + task, true},
		{"GET", "/api/issues/" + task + "/comments", true},
		{"POST", "/api/issues/" + task + "/comments", true},
		{"GET", "/api/companies/" + company + "/email/inboxes", true},
		{"GET", "/api/companies/" + company + "/email/tasks/" + task, true},
		{"POST", "/api/companies/" + company + "/email/send", true},
		{"GET", "/api/companies/" + company + "/email/deliveries/p1", true},
		{"GET", "/api/companies/" + company + "/email/sends/p1", true},
		// Another task or company, its email thread and its sends.
		{"GET", "/api/issues/" + other, false},
		{"GET", "/api/companies/" + company + "/email/tasks/" + other, false},
		{"GET", "/api/companies/" + company + "/email/deliveries/p-other-task", false},
		{"GET", "/api/companies/" + company + "/email/deliveries/p-other-company", false},
		{"GET", "/api/companies/" + company + "/email/deliveries/unknown", false},
		{"GET", "/api/companies/" + company + "/email/sends/p-other-task", false},
		{"GET", "/api/companies/" + company + "/email/sends/unknown", false},
		{"POST", "/api/issues/" + other + "/comments", false},
		{"GET", "/api/companies/other/email/inboxes", false},
		// Setup, inspect, check-address, reconnect, control, resolve.
		{"POST", "/api/companies/" + company + "/email/inboxes", false},
		{"POST", "/api/companies/" + company + "/email/inspect", false},
		{"POST", "/api/companies/" + company + "/email/connections/x/inspect", false},
		{"POST", "/api/companies/" + company + "/email/connections/x/check-address", false},
		{"POST", "/api/email/inboxes/x/reconnect", false},
		{"POST", "/api/email/inboxes/x/control", false},
		{"POST", "/api/companies/" + company + "/email/deliveries/p1/resolve", false},
		{"POST", "/api/companies/" + company + "/email/sends/p1/resolve", false},
		{"POST", "/api/companies/" + company + "/email/sends/p1/review", false},
		// Everything else of the API, including the task's attachments and
		// the agent wakeup.
		{"DELETE", "/api/issues/" + task, false},
		{"POST", "/api/issues/" + task + "/attachments", false},
		{"POST", "/api/agents/a/wakeup", false},
		{"GET", "/api/companies/" + company, false},
		{"GET", "/api/health", false},
		{"GET", "/metrics", false},
	}
	for _, c := range cases {
		before := len(api.got)
		req, _ := http.NewRequest(c.method, "http://sandbox"+c.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer pcb_stolen_board_key")
		req.Header.Set("X-Paperclip-Run-Id", "someone-else")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !c.forwarded {
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "not available inside the sandbox") || len(api.got) != before {
				t.Errorf("%s %s: want 403 not forwarded, got %d %s (forwarded %v)", c.method, c.path, resp.StatusCode, body, len(api.got) != before)
			}
			continue
		}
		if resp.StatusCode != http.StatusTeapot || len(api.got) != before+1 {
			t.Errorf("%s %s: want forwarded, got %d %s", c.method, c.path, resp.StatusCode, body)
			continue
		}
		got := api.got[len(api.got)-1]
		if got.Header.Get("Authorization") != "Bearer pcr_run" || got.Header.Get("X-Paperclip-Run-Id") != "run-1" || got.RemoteAddr != "sandbox" {
			t.Errorf("%s %s: forwarded with %q %q from %q", c.method, c.path, got.Header.Get("Authorization"),
				got.Header.Get("X-Paperclip-Run-Id"), got.RemoteAddr)
		}
	}
	sock := b.Socket()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("bridge still accepts connections after Close")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bridge directory left behind: %v", err)
	}
}

// TestBridgeSocketPlacement checks where a run's socket lives: in the
// private run directory it was given (created 0700, refused if it already
// exists), never in the shared temporary directory, given to the sandbox
// identity, and reachable even when the path exceeds a socket address's
// 108 bytes.
func TestBridgeSocketPlacement(t *testing.T) {
	runs := t.TempDir()
	long := filepath.Join(runs, strings.Repeat("r", 60), strings.Repeat("u", 60))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(long, "bridge")
	owner := sandbox.Identity{}
	if os.Geteuid() == 0 {
		owner = sandbox.Identity{UID: sandbox.NobodyID, GID: sandbox.NobodyID, Name: "nobody", Switch: true}
	}
	b, err := sandbox.StartBridge(&recorder{}, sandbox.Grant{Token: "pcr_x", RunID: "r"}, sandbox.Options{Dir: dir, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Socket()) <= 108 || filepath.Dir(b.Socket()) != dir {
		t.Fatalf("socket %q (%d bytes) is not the long path in the run directory", b.Socket(), len(b.Socket()))
	}
	if strings.HasPrefix(b.Socket(), os.TempDir()+"/paperclip-bridge-") {
		t.Fatal("socket in the shared temporary directory")
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("bridge directory %v %v, want mode 0700", fi, err)
	}
	si, err := os.Lstat(b.Socket())
	if err != nil || si.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", si, err)
	}
	if st := si.Sys().(*syscall.Stat_t); owner.Switch && (int(st.Uid) != owner.UID || int(st.Gid) != owner.GID) {
		t.Fatalf("socket owned by %d:%d, want the sandbox identity", st.Uid, st.Gid)
	}
	// The socket answers (through a short path to the same directory).
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn, err := net.Dial("unix", "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/api.sock")
	if err != nil {
		t.Fatalf("dial the bridge: %v", err)
	}
	conn.Close()
	if _, err := sandbox.StartBridge(&recorder{}, sandbox.Grant{}, sandbox.Options{Dir: dir}); err == nil {
		t.Fatal("a second bridge reused an existing run directory")
	}
}

// TestBridgeMCPIsRestricted: a /mcp request through a run's bridge reaches
// the API as the run with a Restriction attached, and what the MCP server
// dispatches under it (call_api, the delivery tool) gets only what the
// bridge itself allows: the run's own task and its own sends. A request
// reaching the API any other way carries no restriction, and a client
// cannot add one.
func TestBridgeMCPIsRestricted(t *testing.T) {
	const company, task, other = "c0000000-0000-0000-0000-000000000001", "t0000000-0000-0000-0000-000000000001", "t0000000-0000-0000-0000-000000000002"
	pubs := func(_ context.Context, id string) (string, string, error) {
		switch id {
		case "own":
			return company, task, nil
		case "other":
			return company, other, nil
		}
		return "", "", errors.New("not found")
	}
	inner := &recorder{}
	// The fake API: /mcp plays the MCP server, dispatching the issue read
	// it is asked for through the restriction's API, as call_api does.
	api := http.NewServeMux()
	api.Handle("/api/", inner)
	api.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		rs, ok := sandbox.RestrictionFrom(r.Context())
		if !ok {
			http.Error(w, "unrestricted", http.StatusTeapot)
			return
		}
		if rs.Grant.TaskID != task || r.Header.Get("Authorization") != "Bearer pcr_run" {
			http.Error(w, "wrong grant", http.StatusInternalServerError)
			return
		}
		rec := httptest.NewRecorder()
		rs.API.ServeHTTP(rec, httptest.NewRequest("GET", "/api/issues/"+r.URL.Query().Get("issue"), nil))
		pub := r.URL.Query().Get("publication")
		_, _ = io.WriteString(w, strconv.Itoa(rec.Code)+" "+strconv.FormatBool(pub != "" && rs.OwnPublication(r.Context(), pub)))
	})
	b, client := runBridge(t, api, company, task, pubs, filepath.Join(t.TempDir(), "bridge"))
	defer b.Close()
	mcpCall := func(issue, pub string) string {
		t.Helper()
		resp, err := client.Post("http://sandbox/mcp?issue="+issue+"&publication="+pub, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strconv.Itoa(resp.StatusCode) + ":" + string(body)
	}
	if got := mcpCall(task, "own"); got != "200:418 true" {
		t.Fatalf("own task and send through the bridge's /mcp: %s", got)
	}
	before := len(inner.got)
	for _, c := range []struct{ issue, pub, want string }{
		{other, "other", "200:403 false"},
		{other, "unknown", "200:403 false"},
	} {
		if got := mcpCall(c.issue, c.pub); got != c.want {
			t.Fatalf("another task (%s) or send (%s) through the bridge's /mcp: %s", c.issue, c.pub, got)
		}
	}
	if len(inner.got) != before {
		t.Fatal("a read of another task was forwarded to the API")
	}
	// The same API reached directly (the ordinary /mcp endpoint) carries
	// no restriction.
	srv := httptest.NewServer(api)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/mcp?issue="+other, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Fatalf("a direct /mcp request was restricted: %d", resp.StatusCode)
	}
}

// runBridge starts a bridge for run-1 of task in company, serving api
// with pubs in dir, and returns it with a client that talks to its
// socket.
func runBridge(t *testing.T, api http.Handler, company, task string, pubs sandbox.PublicationTask, dir string) (*sandbox.Bridge, *http.Client) {
	t.Helper()
	b, err := sandbox.StartBridge(api, sandbox.Grant{Token: "pcr_run", RunID: "run-1", CompanyID: company, TaskID: task},
		sandbox.Options{Dir: dir, Publications: pubs})
	if err != nil {
		t.Fatal(err)
	}
	return b, unixClient(b.Socket())
}

// unixClient is an HTTP client whose every connection goes to socket.
func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// TestBridgeTakesOwnIdentifier checks that the bridge takes the run's own
// task by its short identifier (any case) and forwards the task's UUID in
// its place, while another identifier, or an identifier without one in
// the grant, is refused.
func TestBridgeTakesOwnIdentifier(t *testing.T) {
	const company, task = "c0000000-0000-0000-0000-000000000001", "t0000000-0000-0000-0000-000000000001"
	api := &recorder{}
	h := sandbox.Handler(api, sandbox.Grant{Token: "pcr_run", RunID: "run-1", CompanyID: company, TaskID: task, TaskIdentifier: "ACME-7"}, nil)
	for _, c := range []struct {
		method, path, forwarded string
	}{
		{"GET", "/api/issues/ACME-7", "/api/issues/" + task},
		{"PATCH", "/api/issues/acme-7", "/api/issues/" + task},
		{"GET", "/api/issues/ACME-7/comments", "/api/issues/" + task + "/comments"},
		{"GET", "/api/companies/" + company + "/email/tasks/Acme-7", "/api/companies/" + company + "/email/tasks/" + task},
		{"GET", "/api/issues/ACME-8", ""},
		{"GET", "/api/issues/ACME2-7", ""},
		{"GET", "/api/companies/c0000000-0000-0000-0000-000000000002/email/tasks/ACME-7", ""},
	} {
		before := len(api.got)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if c.forwarded == "" {
			if w.Code != http.StatusForbidden || len(api.got) != before {
				t.Errorf("%s %s: %d, want 403 and nothing forwarded", c.method, c.path, w.Code)
			}
			continue
		}
		if w.Code != http.StatusTeapot || len(api.got) != before+1 {
			t.Errorf("%s %s: %d, want it forwarded", c.method, c.path, w.Code)
			continue
		}
		if got := api.got[len(api.got)-1].URL.Path; got != c.forwarded {
			t.Errorf("%s %s forwarded as %s, want %s", c.method, c.path, got, c.forwarded)
		}
	}
	bare := sandbox.Handler(api, sandbox.Grant{Token: "pcr_run", RunID: "run-1", CompanyID: company, TaskID: task}, nil)
	w := httptest.NewRecorder()
	bare.ServeHTTP(w, httptest.NewRequest("GET", "/api/issues/ACME-7", nil))
	if w.Code != http.StatusForbidden {
		t.Errorf("an identifier without one in the grant: %d, want 403", w.Code)
	}
}

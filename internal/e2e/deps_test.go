package e2e_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/paperclipai/paperclipai/"

// goList returns, for every package of the module (tests excluded), its
// transitive dependencies: ours with the module prefix cut ("internal/x"),
// every other one (the standard library's internal packages included)
// prefixed with "ext:".
func goList(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command(goCommand(t), "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, module); ok {
				deps[pkg] = append(deps[pkg], rel)
			} else {
				deps[pkg] = append(deps[pkg], "ext:"+d)
			}
		}
		if _, ok := deps[pkg]; !ok {
			deps[pkg] = nil
		}
	}
	return deps
}

// goImports returns, for every package of the module (tests excluded), the
// packages it imports directly, named as goList names them.
func goImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command(goCommand(t), "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		imports[pkg] = nil
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, module); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	return imports
}

// goCommand is the go command that built this test.
func goCommand(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal("the go command is needed to check the dependency policy")
		}
	}
	return goBin
}

func internalDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		if strings.HasPrefix(d, "internal/") {
			out = append(out, d)
		}
	}
	return out
}

// TestLayering is the dependency policy (docs/architecture.md, "Layering"),
// in the manner of tailscale's deptest: lower packages never import higher
// ones, and test-only modules never reach the binary.
func TestLayering(t *testing.T) {
	deps := goList(t)
	if len(deps) < 20 {
		t.Fatalf("go list found only %d packages", len(deps))
	}

	// Leaves: the internal packages each may depend on, at all.
	// internal/buildinfo (the version constants, itself without internal
	// dependencies) is reachable from the database layer up: schema_meta
	// records the binary version that migrated the database.
	only := map[string][]string{
		"internal/domain":     nil, // the vocabulary
		"internal/notify":     nil,
		"internal/db":         {"internal/buildinfo"},                                                                          // schema_meta records the binary that migrated
		"internal/attachment": {"internal/store", "internal/db", "internal/domain", "internal/safetext", "internal/buildinfo"}, // content lives in the database; names are cleaned like text
		"internal/agentmail":  {"internal/netguard"},                                                                           // the provider client stands alone
		"internal/emulator":   nil,                                                                                             // the fake must not share the client's mistakes
		"internal/store":      {"internal/db", "internal/domain", "internal/buildinfo"},
		"internal/httpx":      {"internal/authz", "internal/safetext", "internal/store", "internal/db", "internal/domain", "internal/buildinfo"},
		// The delivery queue is below both pipelines and the email core:
		// what a delivery row is and how it gets in, nothing more.
		"internal/inbound/queue": {"internal/store", "internal/db", "internal/domain", "internal/agentmail", "internal/safetext",
			"internal/netguard", "internal/buildinfo"},
	}
	for pkg, allowed := range only {
		d, ok := deps[pkg]
		if !ok {
			t.Errorf("%s: no such package", pkg)
			continue
		}
		for _, dep := range internalDeps(d) {
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s depends on %s; it may depend only on %v", pkg, dep, allowed)
			}
		}
	}

	// Forbidden edges: package prefix => dependency => why.
	forbid := []struct{ pkg, dep, why string }{
		{"internal/email", "internal/api", "services render no HTTP (the API edge renders them: internal/api/email_routes.go)"},
		{"internal/email", "internal/httpx", "the email service refuses with *domain.Refusal; only the API edge maps it to a status"},
		{"internal/outbound", "internal/httpx", "the send side refuses with *domain.Refusal; only the API edge maps it to a status (internal/api/outbound_routes.go)"},
		{"internal/mcpserver", "internal/httpx", "the tools show a *domain.Refusal's message themselves; status codes belong to the API edge"},
		{"internal/inbound", "internal/api", "pipelines render no HTTP"},
		{"internal/inbound", "internal/httpx", "the receiving pipeline refuses with *domain.Refusal; only the API edge maps it to a status"},
		{"internal/outbound", "internal/api", "pipelines render no HTTP"},
		{"internal/mcpserver", "internal/api", "tools call the services, and the API only through its handler"},
		{"internal/heartbeat", "internal/api", "the scheduler knows no HTTP"},
		{"internal/policy", "internal/api", "rules know no HTTP"},
		{"internal/authz", "internal/api", "rules know no HTTP"},
		{"internal/inbound", "internal/outbound", "receipts reach the send side through receive.Receipts"},
		{"internal/inbound/receive", "internal/inbound", "the queue's reader is below its supervisor"},
		{"internal/inbound/queue", "internal/inbound/receive", "the queue is below its reader"},
		{"internal/outbound", "internal/inbound", "the send side admits through internal/inbound/queue only"},
		{"internal/outbound", "internal/inbound/receive", "the send side admits through internal/inbound/queue only"},
		{"internal/email", "internal/inbound/receive", "the channel core is below both pipelines (it may broadcast through internal/inbound/queue)"},
		{"internal/email", "internal/inbound", "the channel core is below both pipelines"},
		{"internal/email", "internal/outbound", "the channel core is below both pipelines"},
		{"internal/heartbeat", "internal/email", "the scheduler is below the email channel (email prepares runs through heartbeat.Options.Prepare)"},
	}
	for _, f := range forbid {
		for pkg, d := range deps {
			if pkg != f.pkg && !strings.HasPrefix(pkg, f.pkg+"/") {
				continue
			}
			if slices.Contains(d, f.dep) {
				t.Errorf("%s depends on %s: %s", pkg, f.dep, f.why)
			}
		}
	}

	// The receiving pipeline speaks no HTTP either: its refusals are
	// domain.Refusal values and its routes live at the API edge
	// (internal/api/inbound.go). The forbidden edges above hold for the
	// whole dependency tree; this check names the package that imports
	// internal/httpx itself, for the email core, both pipelines and the
	// MCP tools (their routes: internal/api/email_routes.go,
	// internal/api/inbound.go, internal/api/outbound_routes.go).
	imports := goImports(t)
	for pkg, d := range imports {
		for _, owner := range []string{"internal/email", "internal/inbound", "internal/outbound", "internal/mcpserver"} {
			if (pkg == owner || strings.HasPrefix(pkg, owner+"/")) && slices.Contains(d, "internal/httpx") {
				t.Errorf("%s imports internal/httpx: it returns domain.Refusal and mounts no routes", pkg)
			}
		}
	}

	// Who may import the HTTP API, the wiring and the CLI at all.
	importers := map[string][]string{
		"internal/api":    {"internal/server", "internal/ui", "internal/apiclient", "internal/cli", "internal/demo", "internal/testkit", "internal/qualify", "cmd/paperclipai"},
		"internal/server": {"internal/cli", "internal/demo", "internal/testkit", "internal/qualify", "cmd/paperclipai"},
		"internal/cli":    {"cmd/paperclipai"},
	}
	for dep, allowed := range importers {
		for pkg, d := range deps {
			if pkg == dep || slices.Contains(allowed, pkg) {
				continue
			}
			if slices.Contains(d, dep) {
				t.Errorf("%s depends on %s; only %v may", pkg, dep, allowed)
			}
		}
	}

	// Our own API has one client: the UI (in-process), the CLI,
	// qualification and the test kit's helpers (over HTTP) call its typed
	// methods, so their links to the routes' types show here. The client
	// sits below all of them.
	for _, pkg := range []string{"internal/ui", "internal/cli", "internal/qualify", "internal/testkit"} {
		if !slices.Contains(deps[pkg], "internal/apiclient") {
			t.Errorf("%s does not depend on internal/apiclient: its API calls bypass the typed client", pkg)
		}
	}
	for _, above := range []string{"internal/server", "internal/ui", "internal/cli", "internal/qualify", "internal/testkit"} {
		if slices.Contains(deps["internal/apiclient"], above) {
			t.Errorf("internal/apiclient depends on %s; the client sits below its callers", above)
		}
	}

	// Test-only modules never reach a non-test package.
	testOnly := map[string]string{
		"github.com/riverqueue/":  "the inbound benchmark's baseline only",
		"github.com/chromedp/":    "browser tests only",
		"github.com/svix/":        "the webhook signature conformance test only",
		"github.com/lib/pq":       "pulled in by river's test drivers",
		"github.com/tidwall/":     "pulled in by river",
		"github.com/go-json-exp":  "pulled in by chromedp",
		"github.com/chromedp/cdp": "browser tests only",
	}
	for pkg, d := range deps {
		for _, dep := range d {
			for prefix, why := range testOnly {
				if strings.HasPrefix(dep, "ext:"+prefix) {
					t.Errorf("%s depends on %s, a test-only module (%s)", pkg, dep, why)
				}
			}
		}
	}
}

// TestModuleAllowlist keeps the direct dependencies to a reviewed list: a
// new one needs a reason here (and in its commit message).
func TestModuleAllowlist(t *testing.T) {
	allowed := map[string]string{
		"github.com/chromedp/cdproto":                              "browser tests",
		"github.com/chromedp/chromedp":                             "browser tests",
		"github.com/coder/websocket":                               "the AgentMail WebSocket stream and the emulator's",
		"github.com/emersion/go-message":                           "the emulator's SMTP intake (the demo's email path)",
		"github.com/emersion/go-smtp":                              "the emulator's SMTP intake",
		"github.com/google/uuid":                                   "ids",
		"github.com/jackc/pgx/v5":                                  "PostgreSQL, including LISTEN/NOTIFY",
		"github.com/modelcontextprotocol/go-sdk":                   "the /mcp endpoint and the MCP example agent",
		"github.com/pressly/goose/v3":                              "embedded migrations",
		"github.com/prometheus/client_golang":                      "/metrics",
		"github.com/riverqueue/river":                              "test only: the inbound benchmark's baseline",
		"github.com/riverqueue/river/riverdriver":                  "test only: the benchmark baseline",
		"github.com/riverqueue/river/riverdriver/riverdatabasesql": "test only: the benchmark baseline",
		"github.com/riverqueue/river/riverdriver/riversqlite":      "test only: the benchmark baseline",
		"github.com/spf13/cobra":                                   "the CLI",
		"github.com/svix/svix-webhooks":                            "test only: webhook signatures checked against the official library",
		"golang.org/x/sys":                                         "flock, sandbox identities and namespaces",
		"golang.org/x/term":                                        "the CLI's no-echo key prompt",
		"modernc.org/sqlite":                                       "the embedded database, without cgo",
	}
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	inRequire := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "require ("):
			inRequire = true
			continue
		case line == ")":
			inRequire = false
			continue
		}
		var path string
		if inRequire {
			path = line
		} else if rest, ok := strings.CutPrefix(line, "require "); ok {
			path = rest
		}
		if path == "" || strings.Contains(path, "// indirect") {
			continue
		}
		path = strings.Fields(path)[0]
		if _, ok := allowed[path]; !ok {
			t.Errorf("go.mod requires %s, which is not on the reviewed list of internal/e2e/deps_test.go", path)
		}
	}
}

// TestEnvironmentThroughConfig keeps configuration in one place: outside
// internal/config only the packages listed here read the process
// environment, each for a reason that is not configuration.
func TestEnvironmentThroughConfig(t *testing.T) {
	allowed := map[string]string{
		"internal/config/":           "the one reader of settings (Load, LoadClient)",
		"internal/heartbeat/":        "passes named host variables (PATH, an adapter's PassEnv) into runs, read at run time and never stored",
		"internal/cli/run.go":        "checks that the demo agent's provider credentials are set before passing them through (demo.CLIAgent)",
		"internal/dbtest/":           "test support: the test database URL and CI",
		"internal/testkit/":          "test support: CI and the overrides a test sets with t.Setenv",
		"internal/agentcli/fakecli/": "tests only: the stand-in CLI reports the environment it was given",
	}
	uses := regexp.MustCompile(`\bos\.(Getenv|LookupEnv)\b`)
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for prefix := range allowed {
			if strings.HasPrefix(rel, prefix) {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := uses.Find(b); m != nil {
			t.Errorf("%s reads the environment (%s): read it through internal/config", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

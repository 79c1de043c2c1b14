package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The operator guides are executable: every ```sh block of the files
// below runs with bash, in order, against real servers and the AgentMail
// emulator, on both databases. A block is marked by an HTML comment on the
// line before its fence:
//
//	<!-- docs-test: skip (why) -->   not run (counted, with its reason)
//	<!-- docs-test: background -->   started and left running until the guide ends
//	<!-- docs-test: once (why) -->   run in the first (SQLite) pass only
//	<!-- docs-test: sqlite -->       run only on SQLite
//	<!-- docs-test: postgres -->     run only on PostgreSQL
//
// and a guide may declare the shell variables the test provides with
// <!-- docs-test: inputs NAME … -->. A ```text block right after a sh block
// is the output the guide promises: each of its lines must appear in the
// block's output, in order. Blocks share shell variables (each
// block's new variables are kept for the next ones). The default addresses
// the guides show (127.0.0.1:3100 for the server, :3199 and :2525 for the
// emulator) are replaced with free ports, and HOME is a fresh directory,
// so ~/.paperclip is a fresh home.

// guide is one executable document and the world it runs in.
type guide struct {
	file string
	// world is "demo" (the test runs `paperclipai run --demo`), "email"
	// (the test runs an emulator and a server with a company and an
	// agent, given to the guide as CO, AGENT and AGENTMAIL_KEY) or "own"
	// (the guide starts what it needs in background blocks).
	world string
	// inRepo runs the blocks in the repository root (the README's
	// install step); other guides run in an empty directory.
	inRepo bool
	// skipped is how many blocks the guide marks skip: a new skip must be
	// a deliberate change here too.
	skipped int
	// after checks, once the guide's blocks ran, what they should have
	// achieved.
	after func(t *testing.T, w *world)
}

var guides = []guide{
	{file: "README.md", world: "demo", inRepo: true, skipped: 2, after: func(t *testing.T, w *world) {
		// The first email of the Quickstart gets the agent's reply.
		testkit.Eventually(t, 60*time.Second, "the demo agent's reply to the Quickstart email", func() bool {
			return len(w.em.outbox(t, "you@example.com")) == 1
		})
	}},
	{file: "docs/deployment.md", world: "demo", skipped: 10},
	{file: "docs/email-setup.md", world: "email"},
	{file: "docs/email-api-walkthrough.md", world: "own", after: func(t *testing.T, w *world) {
		// Two emails answered, the second through a webhook.
		if n := len(w.em.outbox(t, "alice@example.com")) + len(w.em.outbox(t, "bob@example.com")); n != 2 {
			t.Fatalf("the walkthrough's agent sent %d replies, want 2", n)
		}
	}},
}

// docBlock is one fenced shell block of a guide.
type docBlock struct {
	line   int // the opening fence
	code   string
	mode   string // "" (run), skip, background, once, sqlite, postgres
	reason string
	// expect is a ```text block right after this one: the output the
	// guide shows, whose every line the block's output must contain, in
	// order.
	expect []string
	end    int // the index of the closing fence's line
}

// blankBefore returns the index of the last non-blank line before line i.
func blankBefore(lines []string, i int) int {
	for i--; i >= 0 && strings.TrimSpace(lines[i]) == ""; i-- {
	}
	return i
}

var markerRE = regexp.MustCompile(`^<!-- docs-test: ([a-z]+)(?: (.*?))? -->$`)

// parseGuide returns a guide's sh blocks and declared inputs. A marker
// must be followed by a sh block, and a skip must say why.
func parseGuide(t *testing.T, path string) ([]docBlock, []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var inputs []string
	var pending *docBlock
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if m := markerRE.FindStringSubmatch(trimmed); m != nil {
			if m[1] == "inputs" {
				inputs = strings.Fields(m[2])
				continue
			}
			if !slices.Contains([]string{"skip", "background", "once", "sqlite", "postgres"}, m[1]) {
				t.Fatalf("%s:%d: unknown docs-test marker %q", path, i+1, m[1])
			}
			reason := strings.TrimSuffix(strings.TrimPrefix(m[2], "("), ")")
			if (m[1] == "skip" || m[1] == "once") && strings.TrimSpace(reason) == "" {
				t.Fatalf("%s:%d: a %s marker must say why: <!-- docs-test: %s (reason) -->", path, i+1, m[1], m[1])
			}
			pending = &docBlock{mode: m[1], reason: reason}
			continue
		}
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" && pending != nil {
				t.Fatalf("%s:%d: a docs-test marker must come right before a ```sh block", path, i)
			}
			continue
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
		lang := strings.TrimPrefix(trimmed, "```")
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if lang != "sh" {
			if pending != nil {
				t.Fatalf("%s:%d: a docs-test marker must come right before a ```sh block", path, start+1)
			}
			if lang == "text" && len(blocks) > 0 && blocks[len(blocks)-1].end == blankBefore(lines, start) {
				for _, l := range body {
					if strings.TrimSpace(l) != "" {
						blocks[len(blocks)-1].expect = append(blocks[len(blocks)-1].expect, l)
					}
				}
			}
			continue
		}
		b := docBlock{line: start + 1, end: i, code: strings.Join(body, "\n") + "\n"}
		if pending != nil {
			b.mode, b.reason = pending.mode, pending.reason
			pending = nil
		}
		blocks = append(blocks, b)
	}
	return blocks, inputs
}

// world is what a guide's blocks run against.
type world struct {
	home  string // HOME of the blocks
	work  string // their working directory
	env   []string
	addrs map[string]string // default address in the guides → free port
	em    emulatorURL
	bg    []bgProc
}

// bgProc is a long-running process of a world.
type bgProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *testkit.SyncBuffer
}

type emulatorURL string

func (u emulatorURL) outbox(t *testing.T, to string) []map[string]any {
	t.Helper()
	p := &demoProc{em: string(u)}
	return p.outbox(t, to)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// newWorld makes the directories, free ports and environment of a world;
// its processes stop when t ends.
func newWorld(t *testing.T, dbURL string) *world {
	t.Helper()
	w := &world{home: t.TempDir(), work: t.TempDir(),
		addrs: map[string]string{"127.0.0.1:3100": freePort(t), "127.0.0.1:3199": freePort(t), "127.0.0.1:2525": freePort(t)}}
	w.em = emulatorURL("http://" + w.addrs["127.0.0.1:3199"])
	for _, kv := range os.Environ() {
		// Nothing of the test's own Paperclip settings leaks in.
		if strings.HasPrefix(kv, "PAPERCLIP_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		w.env = append(w.env, kv)
	}
	w.env = append(w.env, "HOME="+w.home, "PATH="+filepath.Dir(testkit.Binary(t))+":"+os.Getenv("PATH"),
		"PAPERCLIP_LISTEN="+w.addrs["127.0.0.1:3100"])
	if dbURL != "" {
		w.env = append(w.env, "PAPERCLIP_DATABASE_URL="+dbURL)
	}
	t.Cleanup(w.stop)
	return w
}

// prependPath puts dir first on the world's PATH.
func (w *world) prependPath(dir string) {
	for i, kv := range w.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			w.env[i] = "PATH=" + dir + ":" + v
		}
	}
}

// substitute replaces the guides' default addresses with the world's.
func (w *world) substitute(code string) string {
	for from, to := range w.addrs {
		code = strings.ReplaceAll(code, from, to)
	}
	return code
}

// background starts a long-running command in its own process group and
// waits until every address in waitFor accepts connections.
func (w *world) background(t *testing.T, what string, cmd *exec.Cmd, waitFor []string) *bgProc {
	t.Helper()
	p := bgProc{cmd: cmd, exited: make(chan struct{}), logs: &testkit.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	w.bg = append(w.bg, p)
	for _, addr := range waitFor {
		testkit.Eventually(t, 60*time.Second, what+" to listen on "+addr, func() bool {
			select {
			case <-p.exited:
				t.Fatalf("%s exited:\n%s", what, p.logs.String())
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	return &w.bg[len(w.bg)-1]
}

// logs returns the tails of the background processes' output.
func (w *world) logs() string {
	var b strings.Builder
	for _, p := range w.bg {
		b.WriteString(tail(p.logs.String(), 40))
	}
	return b.String()
}

// stop ends the background processes, newest first (a server before the
// emulator it talks to): SIGTERM, then SIGKILL after 30 s.
func (w *world) stop() {
	for i := len(w.bg) - 1; i >= 0; i-- {
		p := w.bg[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	}
	w.bg = nil
}

// startDemoWorld runs the demo as the README's Quickstart does, on the
// world's ports.
func (w *world) startDemoWorld(t *testing.T) {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), "run", "--demo", "--listen", w.addrs["127.0.0.1:3100"],
		"--demo-emulator-listen", w.addrs["127.0.0.1:3199"], "--demo-smtp", w.addrs["127.0.0.1:2525"])
	cmd.Env, cmd.Dir = w.env, w.work
	p := w.background(t, "the demo", cmd, []string{w.addrs["127.0.0.1:3199"], w.addrs["127.0.0.1:3100"]})
	testkit.Eventually(t, 60*time.Second, "the demo to be seeded", func() bool {
		return strings.Contains(p.logs.String(), "Send a first email")
	})
}

// startEmailWorld runs an emulator and a server pointed at it, with email
// on, a company and an agent, and gives the guide CO, AGENT and
// AGENTMAIL_KEY.
func (w *world) startEmailWorld(t *testing.T) {
	t.Helper()
	em, err := emulator.Start(context.Background(), emulator.Options{Listen: w.addrs["127.0.0.1:3199"], DeliveryDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	_, key := em.CreateOrganization("Guide")
	cmd := exec.Command(testkit.Binary(t), "run")
	cmd.Env = append(append([]string{}, w.env...), "PAPERCLIP_AGENTMAIL_API_URL="+em.APIURL(), "PAPERCLIP_AGENTMAIL_WS_URL="+em.WebSocketURL())
	cmd.Dir = w.work
	w.background(t, "the server", cmd, []string{w.addrs["127.0.0.1:3100"]})
	c := testkit.NewClient(t, "http://"+w.addrs["127.0.0.1:3100"])
	testkit.Eventually(t, 30*time.Second, "server health", func() bool {
		st, _ := c.Do("GET", "/api/health", nil)
		return st == 200
	})
	co := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Guide Co"}, 201))
	agent := testkit.ID(c.JSON("POST", "/api/companies/"+co+"/agents", map[string]any{"name": "Clerk", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	w.env = append(w.env, "CO="+co, "AGENT="+agent, "AGENTMAIL_KEY="+key)
}

// Prologue and epilogue around every block: strict mode, and the shell
// variables of earlier blocks in, this block's new ones out.
const (
	blockPrologue = `set -euo pipefail
__before=$(compgen -v)
if [ -f "$DOCS_TEST_STATE" ]; then source "$DOCS_TEST_STATE"; fi
`
	blockEpilogue = `
for __v in $(compgen -v); do
  case "$__v" in __*|BASH*|FUNCNAME|PIPESTATUS|_) continue ;; esac
  case $'\n'"$__before"$'\n' in *$'\n'"$__v"$'\n'*) continue ;; esac
  declare -p "$__v"
done > "$DOCS_TEST_STATE.new"
mv "$DOCS_TEST_STATE.new" "$DOCS_TEST_STATE"
`
)

// runGuide runs one guide's blocks in w and returns how many ran.
func runGuide(t *testing.T, g guide, w *world, pass db.Dialect) (ran, skipped, background, other int) {
	t.Helper()
	path := filepath.Join(repoRoot(), g.file)
	blocks, inputs := parseGuide(t, path)
	if g.world == "email" && !slices.Equal(inputs, []string{"CO", "AGENT", "AGENTMAIL_KEY"}) {
		t.Fatalf("%s: must declare <!-- docs-test: inputs CO AGENT AGENTMAIL_KEY --> (got %v)", g.file, inputs)
	} else if g.world != "email" && len(inputs) > 0 {
		t.Fatalf("%s: declares inputs %v, but its world provides none", g.file, inputs)
	}
	state := filepath.Join(t.TempDir(), "state.sh")
	dir := w.work
	if g.inRepo {
		dir = repoRoot()
	}
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", g.file, b.line)
		code := w.substitute(b.code)
		switch {
		case b.mode == "skip":
			skipped++
			t.Logf("%s: skipped (%s)", where, b.reason)
			continue
		case b.mode == "once" && pass != db.SQLite,
			b.mode == "sqlite" && pass != db.SQLite,
			b.mode == "postgres" && pass != db.Postgres:
			other++
			continue
		case b.mode == "background":
			background++
			cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+code)
			cmd.Env, cmd.Dir = w.env, dir
			var waitFor []string
			for _, addr := range w.addrs {
				if strings.Contains(code, addr) {
					waitFor = append(waitFor, addr)
				}
			}
			slices.Sort(waitFor)
			w.background(t, where, cmd, waitFor)
			continue
		}
		ran++
		if b.mode == "once" && g.inRepo {
			// The install step installs into a fresh GOBIN that comes
			// first on PATH (so later blocks use the installed binary),
			// from the module cache, without the network.
			gobin := filepath.Join(w.home, "gobin")
			w.prependPath(gobin)
			w.env = append(w.env, "GOBIN="+gobin, "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local",
				"GOPATH="+goEnv(t, "GOPATH"), "GOCACHE="+goEnv(t, "GOCACHE"), "GOMODCACHE="+goEnv(t, "GOMODCACHE"))
		}
		env := append(append([]string{}, w.env...), "DOCS_TEST_STATE="+state)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-c", blockPrologue+code+blockEpilogue)
		cmd.Env, cmd.Dir = env, dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n--- block ---\n%s--- output ---\n%s--- background processes ---\n%s", where, err, code, out, w.logs())
		}
		rest := string(out)
		for _, want := range b.expect {
			i := strings.Index(rest, w.substitute(want))
			if i < 0 {
				t.Fatalf("%s: the output lacks the line the guide shows: %q\n--- output ---\n%s", where, want, out)
			}
			rest = rest[i+len(want):]
		}
		t.Logf("%s ran; its output ends:\n%s", where, tail(string(out), 12))
	}
	if skipped != g.skipped {
		t.Fatalf("%s: %d blocks are marked skip, the test expects %d", g.file, skipped, g.skipped)
	}
	if ran == 0 {
		t.Fatalf("%s: no block ran", g.file)
	}
	return ran, skipped, background, other
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(s)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestGuidesRunAsWritten runs the operator guides' shell blocks (see the
// comment at the top of this file).
func TestGuidesRunAsWritten(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the guides are bash: bash is not on PATH")
	}
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, _ string) {
		dbURL := func() string {
			if dialect == db.Postgres {
				return dbtest.PostgresURL(t)
			}
			return ""
		}
		// The shared worlds belong to this pass, not to one guide.
		demo := newWorld(t, dbURL())
		demo.startDemoWorld(t)
		email := newWorld(t, dbURL())
		email.startEmailWorld(t)
		for _, g := range guides {
			t.Run(strings.TrimSuffix(filepath.Base(g.file), ".md"), func(t *testing.T) {
				var w *world
				switch g.world {
				case "demo":
					w = demo
				case "email":
					w = email
				default:
					w = newWorld(t, dbURL())
				}
				ran, skipped, bg, other := runGuide(t, g, w, dialect)
				if g.after != nil {
					g.after(t, w)
				}
				t.Logf("%s on %s: %d blocks ran, %d in the background, %d skipped, %d for the other database or pass", g.file, dialect, ran, bg, skipped, other)
			})
		}
	})
}

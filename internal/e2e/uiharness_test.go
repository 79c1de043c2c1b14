package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/paperclipai/paperclipai/internal/testkit"
)

// browser drives Debian's chromium against a server under test. Every
// console error, uncaught exception, browser log error (CSP violations are
// reported there) and JavaScript dialog is recorded and fails the test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	// axe is axe-core's source, injected into every checked page ("" when
	// it could not be installed outside CI; testkit.AxeCore).
	axe string

	mu       sync.Mutex
	problems []string
	tolerate bool
}

// chromiumPath finds the browser: a missing browser fails under CI and is
// reported loudly (and the test skipped) elsewhere, like PostgreSQL.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: the browser tests need Debian's chromium under CI (apt-get install chromium)")
	}
	t.Skip("SKIPPING BROWSER TEST: chromium is not installed (apt-get install chromium)")
	return ""
}

// newBrowser starts a fresh headless browser (own profile) of the given
// window size; it closes when the test ends.
func newBrowser(t *testing.T, base string, width, height int) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("lang", "en-US"),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
	)
	// chromedp adds --no-sandbox by itself when running as root.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// A bound for a hung browser only: every action has its own 30 s
	// limit. Why this long: a browser lives for its whole test, and a
	// test that checks many pages in two schemes with axe-core on a
	// loaded machine ran past an earlier 150 s bound mid-check.
	ctx, cancelTimeout := context.WithTimeout(ctx, 10*time.Minute)
	b := &browser{t: t, ctx: ctx, base: strings.TrimRight(base, "/"), axe: testkit.AxeCore(t)}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if width < 500 {
		// Headless windows are at least 500 px wide; a phone is emulated.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height), chromedp.EmulateMobile)); err != nil {
			t.Fatalf("emulate viewport: %v", err)
		}
	}
	if err := chromedp.Listen(ctx, b.observe); err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.artifacts()
		}
		b.mu.Lock()
		problems := b.problems
		b.mu.Unlock()
		for _, p := range problems {
			t.Errorf("browser: %s", p)
		}
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return b
}

// observe runs in the tab's event loop: record, never block.
func (b *browser) observe(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			parts := []string{}
			for _, a := range ev.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			msg = "console." + string(ev.Type) + ": " + strings.Join(parts, " ")
		}
	case *runtime.EventExceptionThrown:
		msg = "uncaught exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		// A page answered with an error status (a re-rendered form: 400,
		// 401, 422…) is part of the design; a failed subresource (an asset,
		// a live-region fetch, anything remote) is a problem.
		if ev.Entry.Source == cdplog.EntrySourceNetwork && strings.HasPrefix(ev.Entry.URL, b.base) &&
			!strings.Contains(ev.Entry.URL, "/static/") && !strings.Contains(ev.Entry.URL, "fragment=") {
			return
		}
		if ev.Entry.Level == cdplog.EntryLevelError || strings.Contains(ev.Entry.Text, "Content Security Policy") ||
			strings.Contains(ev.Entry.Text, "Refused to") {
			msg = "log " + string(ev.Entry.Source) + ": " + ev.Entry.Text + " " + ev.Entry.URL
		}
	case *page.EventJavascriptDialogOpening:
		msg = "dialog opened: " + string(ev.Type) + " " + ev.Message
		go func() {
			_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}()
	}
	if msg == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.tolerate || strings.HasPrefix(msg, "dialog") {
		b.problems = append(b.problems, msg)
	}
}

// tolerating runs fn while errors that a hostile page provokes (a refused
// cross-site request logs a failed load) are expected and not recorded.
func (b *browser) tolerating(fn func()) {
	b.mu.Lock()
	b.tolerate = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.tolerate = false
		b.mu.Unlock()
	}()
	fn()
}

func (b *browser) artifacts() {
	dir := os.Getenv("PAPERCLIP_UI_ARTIFACTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	_ = os.MkdirAll(dir, 0o755)
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(b.t.Name(), "_")
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".html"), []byte(html), 0o644)
	}
	b.t.Logf("browser artifacts in %s (%s.png, %s.html)", dir, name, name)
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element sel matches. Why the retry: a live region's
// poll or a fragment refresh may replace the element between the query
// and the click; the browser then answers that the node is gone, before
// any mouse event was sent, so trying again cannot click twice.
func (b *browser) click(sel string) {
	b.t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
		if attempt == 5 || !nodeWentAway(err) {
			b.t.Fatalf("click %s: %v", sel, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeWentAway reports whether err is the browser saying that the node
// an action resolved was removed from the document before it acted.
func nodeWentAway(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") || strings.Contains(msg, "Node is detached") ||
		strings.Contains(msg, "No node with given id")
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// visit loads a path of the server and runs the page checks.
func (b *browser) visit(path string) {
	b.t.Helper()
	b.do("visit "+path, chromedp.Navigate(b.base+path))
	b.checkPage()
}

// submit clicks a submit button and waits for the next document.
func (b *browser) submit(sel string) {
	b.t.Helper()
	eval[bool](b, `window.__pcOld = true`)
	b.click(sel)
	b.eventually("navigation after "+sel, 20*time.Second, func() bool {
		// Evaluations fail while the old document goes away; try again.
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__pcOld !== true && document.readyState === "complete"`))
		return err == nil && ok
	})
	b.checkPage()
}

// fill sets a field's value (and fires change).
func (b *browser) fill(sel, value string) {
	b.t.Helper()
	b.do("fill "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
	eval[bool](b, fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event("change", {bubbles: true}))`, sel))
	// Why: a select with data-refresh replaces a fragment of the page after
	// a change, controls inside it included; acting before the new fragment
	// is in place clicks a node that is about to go away.
	b.eventually("fragment refresh after "+sel, 10*time.Second, func() bool {
		return eval[bool](b, `!document.documentElement.hasAttribute("data-refreshing")`)
	})
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel))
}

func (b *browser) exists(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
}

func (b *browser) path() string {
	b.t.Helper()
	return eval[string](b, `location.pathname + location.search`)
}

// eventually polls cond every 100 ms until it holds.
func (b *browser) eventually(what string, within time.Duration, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("timed out after %s waiting for %s", within, what)
}

func (b *browser) waitText(sel, want string, within time.Duration) {
	b.t.Helper()
	b.eventually(fmt.Sprintf("%s to show %q", sel, want), within, func() bool { return strings.Contains(b.text(sel), want) })
}

// checkPage is the accessibility check of every visited page: one h1, no
// duplicate ids, every control with an accessible name, then in the light
// and the dark scheme the layout and legibility checks and axe-core's
// serious and critical rules (checkSchemes).
func (b *browser) checkPage() {
	b.t.Helper()
	if n := eval[int](b, `document.querySelectorAll("h1").length`); n != 1 {
		b.t.Errorf("%s: %d h1 elements", b.path(), n)
	}
	if dup := eval[string](b, `(() => { const seen = new Set(); for (const el of document.querySelectorAll("[id]")) {
		if (seen.has(el.id)) return el.id; seen.add(el.id); } return ""; })()`); dup != "" {
		b.t.Errorf("%s: duplicate id %q", b.path(), dup)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		b.t.Fatalf("accessibility tree: %v", err)
	}
	named := map[string]bool{"button": true, "link": true, "textbox": true, "combobox": true, "checkbox": true, "radio": true}
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.Trim(string(n.Role.Value), `"`)
		name := ""
		if n.Name != nil {
			name = strings.Trim(string(n.Name.Value), `"`)
		}
		if named[role] && strings.TrimSpace(name) == "" {
			b.t.Errorf("%s: a %s has no accessible name", b.path(), role)
		}
	}
	b.checkSchemes()
}

// screenshot writes a PNG of the page to dir/name.png when dir is set.
func (b *browser) screenshot(dir, name string) {
	b.t.Helper()
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// startUIServer starts an in-process server with fast UI polling.
func startUIServer(t *testing.T, dbURL, mode string) *testkit.Instance {
	t.Helper()
	t.Setenv("PAPERCLIP_UI_POLL_MS", "400")
	cfg := testkit.Config(t, dbURL)
	cfg.DeploymentMode = mode
	return testkit.Start(t, cfg)
}

func navigateAction(url string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(url) }

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
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/paperclipai/paperclipai/internal/db"
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
	// longChoices are select choices too long for any screen that the
	// layout check lets a select cut off (allowLongChoice).
	longChoices []string

	// loaded gets a token at every load event of the tab (submit waits on
	// it); stats counts the work (logged at the end of the test).
	loaded chan struct{}
	stats  browserStats
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

// chromium is the test process's one headless chromium: every browser
// of every test is a tab of it in an isolated browser context (its own
// cookies, storage and cache), so the browser tests start chromium once
// rather than once per browser, and parallel tests share it (chromedp
// tabs of one browser are safe to use concurrently). TestMain stops it.
var chromium struct {
	mu       sync.Mutex
	ctx      context.Context // the browser's first tab; the process lives as long as it
	stop     func()
	launches int
}

// sharedChromium returns the context of the running shared chromium,
// starting it (again, if it went away) when needed.
func sharedChromium(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	chromium.mu.Lock()
	defer chromium.mu.Unlock()
	if chromium.ctx != nil && chromium.ctx.Err() == nil {
		return chromium.ctx
	}
	if chromium.stop != nil {
		chromium.stop()
	}
	dir, err := os.MkdirTemp("", "paperclip-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(dir),
		chromedp.Flag("lang", "en-US"),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
	)
	// chromedp adds --no-sandbox by itself when running as root.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	stop := func() {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(dir)
	}
	// Why no timeout here: the first action on a chromedp context binds
	// the browser's life to the context it runs with.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		stop()
		t.Fatalf("start chromium: %v", err)
	}
	chromium.ctx, chromium.stop = ctx, stop
	chromium.launches++
	return ctx
}

// stopChromium ends the shared chromium (TestMain, after every test).
func stopChromium() {
	chromium.mu.Lock()
	defer chromium.mu.Unlock()
	if chromium.stop != nil {
		chromium.stop()
		chromium.ctx, chromium.stop = nil, nil
	}
}

// TestMain stops the shared chromium once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	stopChromium()
	os.Exit(code)
}

// browserStats counts what a browser did, logged when its test ends: the
// figures to look at when the browser suite gets slow.
type browserStats struct {
	loads, checks, axeRuns, axeSkipped int
	checkTime, axeTime, waitTime       time.Duration
}

// newBrowser opens a fresh tab of the shared chromium in its own browser
// context, with a viewport of the given size (a phone below 500 px); it
// closes when the test ends.
func newBrowser(t *testing.T, base string, width, height int) *browser {
	t.Helper()
	parent := sharedChromium(t)
	tab, cancelTab := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	// A bound for a hung browser only: every action has its own 30 s
	// limit. Why this long: a browser lives for its whole test, and a
	// test that checks many pages in two schemes with axe-core on a
	// loaded machine ran past an earlier 150 s bound mid-check.
	ctx, cancelTimeout := context.WithTimeout(tab, 10*time.Minute)
	b := &browser{t: t, ctx: ctx, base: strings.TrimRight(base, "/"), axe: testkit.AxeCore(t), loaded: make(chan struct{}, 1)}
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
		s := b.stats
		t.Logf("browser %dx%d (a tab; chromium started %d time(s) in this process): %d page loads, %d page checks (%s), "+
			"axe-core %d runs and %d skipped as already checked (%s), %s in waits",
			width, height, chromiumLaunches(), s.loads, s.checks, s.checkTime.Round(time.Millisecond), s.axeRuns, s.axeSkipped,
			s.axeTime.Round(time.Millisecond), s.waitTime.Round(time.Millisecond))
		cancelTimeout()
		cancelTab()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("open a chromium tab: %v", err)
	}
	viewport := chromedp.EmulateViewport(int64(width), int64(height))
	if width < 500 {
		viewport = chromedp.EmulateViewport(int64(width), int64(height), chromedp.EmulateMobile)
	}
	if err := chromedp.Do(ctx, viewport); err != nil {
		t.Fatalf("emulate the viewport: %v", err)
	}
	// Why focus emulation: the tabs of one browser sit in separate
	// windows and only one window has the focus; without it :focus,
	// :focus-visible, the clipboard and the keyboard journeys would
	// depend on which test opened a window last.
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatalf("emulate focus: %v", err)
	}
	if err := chromedp.Listen(ctx, b.observe); err != nil {
		t.Fatalf("listen: %v", err)
	}
	return b
}

// chromiumLaunches is how many times this process started chromium.
func chromiumLaunches() int {
	chromium.mu.Lock()
	defer chromium.mu.Unlock()
	return chromium.launches
}

// observe runs in the tab's event loop: record, never block.
func (b *browser) observe(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *page.EventLoadEventFired:
		select {
		case b.loaded <- struct{}{}:
		default:
		}
		return
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
	b.stats.loads++
	b.do("visit "+path, chromedp.Navigate(b.base+path))
	b.checkPage()
}

// submit clicks a submit button, waits for the next document and runs the
// page checks.
func (b *browser) submit(sel string) {
	b.t.Helper()
	b.stats.loads++
	b.clickAndWaitForDocument("navigation after "+sel, func() { b.click(sel) })
	b.checkPage()
}

// clickAndWaitForDocument runs act (a click, a key) and waits until the
// document it leads to has loaded. Why a marker and the load event: the
// old document is "complete" too until it goes away, so only a document
// without the old one's marker counts; the load event wakes the wait at
// once, and a short poll covers a load whose event came before the wait.
func (b *browser) clickAndWaitForDocument(what string, act func()) {
	b.t.Helper()
	eval[bool](b, `window.__pcOld = true`)
	select {
	case <-b.loaded:
	default:
	}
	act()
	start := time.Now()
	defer func() { b.stats.waitTime += time.Since(start) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// Evaluations fail while the old document goes away; try again.
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__pcOld !== true && document.readyState === "complete"`))
		cancel()
		if err == nil && ok {
			return
		}
		select {
		case <-b.loaded:
		case <-time.After(100 * time.Millisecond):
		}
	}
	b.t.Fatalf("timed out after 20s waiting for %s", what)
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

// eventually polls cond until it holds: at once, then at growing
// intervals up to 100 ms (most conditions hold at the first or second
// look; a long wait polls gently).
func (b *browser) eventually(what string, within time.Duration, cond func() bool) {
	b.t.Helper()
	start := time.Now()
	defer func() { b.stats.waitTime += time.Since(start) }()
	deadline := start.Add(within)
	pause := 10 * time.Millisecond
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
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
	start := time.Now()
	defer func() { b.stats.checks++; b.stats.checkTime += time.Since(start) }()
	// One evaluation for the document-wide facts.
	doc := eval[[]string](b, `(() => { const seen = new Set(); let dup = "";
		for (const el of document.querySelectorAll("[id]")) { if (seen.has(el.id) && !dup) dup = el.id; seen.add(el.id); }
		return [location.pathname + location.search, String(document.querySelectorAll("h1").length), dup]; })()`)
	path := doc[0]
	if doc[1] != "1" {
		b.t.Errorf("%s: %s h1 elements", path, doc[1])
	}
	if doc[2] != "" {
		b.t.Errorf("%s: duplicate id %q", path, doc[2])
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
			b.t.Errorf("%s: a %s has no accessible name", path, role)
		}
	}
	b.checkSchemes()
}

// screenshotDir is the screenshot directory of a browser test running on
// dialect: PAPERCLIP_UI_SCREENSHOTS on SQLite, "" (none) on PostgreSQL, so
// that a test run on both databases writes each file once.
func screenshotDir(dialect db.Dialect) string {
	if dialect != db.SQLite {
		return ""
	}
	return os.Getenv("PAPERCLIP_UI_SCREENSHOTS")
}

// screenshot writes a PNG of the page to dir/name.png when dir is set;
// with PAPERCLIP_UI_SCREENSHOTS_DARK set also the dark scheme's, as
// dir/name-dark.png (for looking at, not for the docs).
func (b *browser) screenshot(dir, name string) {
	b.t.Helper()
	if dir == "" {
		return
	}
	b.capture(filepath.Join(dir, name+".png"))
	if os.Getenv("PAPERCLIP_UI_SCREENSHOTS_DARK") != "" {
		b.dark(true)
		b.capture(filepath.Join(dir, name+"-dark.png"))
		b.dark(false)
	}
}

func (b *browser) capture(file string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// startUIServer starts an in-process server with fast UI polling. The
// browser tests set such overrides in the configuration, never in the
// environment, so that they can run in parallel.
func startUIServer(t *testing.T, dbURL, mode string) *testkit.Instance {
	t.Helper()
	cfg := testkit.Config(t, dbURL)
	cfg.UIPollMS = 400
	cfg.DeploymentMode = mode
	return testkit.Start(t, cfg)
}

func navigateAction(url string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(url) }

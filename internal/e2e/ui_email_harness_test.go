package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// emailUI is a UI server wired to an in-process AgentMail emulator.
type emailUI struct {
	t      *testing.T
	inst   *testkit.Instance
	em     *emulator.Server
	api    *testkit.Client
	orgKey string
}

// startEmailUI starts an emulator (receipts after deliveryDelay; negative
// means none) and a local_trusted server on it with fast UI polling and
// catch-up.
func startEmailUI(t *testing.T, dbURL string, deliveryDelay time.Duration) *emailUI {
	t.Helper()
	em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: deliveryDelay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
	cfg.DeploymentMode = config.ModeLocalTrusted
	cfg.UIPollMS = 400
	cfg.EmailCatchupInterval = 2 * time.Second
	// A bound for a hung provider only (no journey stalls one): long
	// enough that a loaded machine running browser tests in parallel does
	// not turn a slow local answer into a provider error.
	cfg.AgentMailTimeout = 10 * time.Second
	inst := testkit.Start(t, cfg)
	_, key := em.CreateOrganization("Acme Mail")
	return &emailUI{t: t, inst: inst, em: em, api: testkit.NewClient(t, inst.URL()), orgKey: key}
}

// provider is an AgentMail client of the emulator with key.
func (e *emailUI) provider(key string) *agentmail.Client {
	c, err := agentmail.New(agentmail.Options{BaseURL: e.em.APIURL(), APIKey: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// allowClipboard lets the page write to the clipboard (copy buttons), in
// the tab's own browser context.
func (b *browser) allowClipboard() {
	b.t.Helper()
	for _, name := range []string{"clipboard-write", "clipboard-read"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name, AllowWithoutSanitization: name == "clipboard-read"},
			Setting:    cdpbrowser.PermissionSettingGranted, Origin: b.base,
			BrowserContextID: chromedp.FromContext(b.ctx).BrowserContextID}); err != nil {
			b.t.Fatalf("grant %s: %v", name, err)
		}
	}
}

// value is a form field's current value.
func (b *browser) value(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).value || ""`, sel))
}

// attr is an element's attribute ("" when absent).
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {getAttribute: () => ""}).getAttribute(%q) || ""`, sel, name))
}

// checked reports whether a checkbox or radio is checked.
func (b *browser) checked(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`!!(document.querySelector(%q) || {}).checked`, sel))
}

// disabled reports whether a control is disabled.
func (b *browser) disabled(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`!!(document.querySelector(%q) || {}).disabled`, sel))
}

// html is the document's markup.
func (b *browser) html() string {
	b.t.Helper()
	return eval[string](b, `document.documentElement.outerHTML`)
}

// openDetails opens a <details> by clicking its summary, as a person
// would: a click that a live refresh swallowed (the page replaced the
// card between the mouse's press and release) is clicked again.
func (b *browser) openDetails(sel string) {
	b.t.Helper()
	isOpen := fmt.Sprintf(`!!(document.querySelector(%q) || {}).open`, sel)
	for attempt := 1; attempt <= 3; attempt++ {
		if eval[bool](b, isOpen) {
			return
		}
		b.click(sel + " > summary")
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !eval[bool](b, isOpen) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !eval[bool](b, isOpen) {
		b.t.Fatalf("%s did not open after three clicks", sel)
	}
}

// key presses one key (chromedp/kb names: "\t", "\r", kb.ArrowDown …).
func (b *browser) key(k string, opts ...chromedp.KeyOption) {
	b.t.Helper()
	b.do("key", chromedp.KeyEvent(k, opts...))
}

// focused describes the focused element: its id (or tag and text).
func (b *browser) focused() string {
	b.t.Helper()
	return eval[string](b, `(() => { const a = document.activeElement; if (!a) return ""; return a.id ? "#" + a.id : a.tagName.toLowerCase() + ":" + (a.textContent || "").trim().slice(0, 40); })()`)
}

// waitPath waits until the location's path starts with prefix.
func (b *browser) waitPath(prefix string, within time.Duration) {
	b.t.Helper()
	b.eventually("location "+prefix, within, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		p, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
		ok, err2 := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete"`))
		return err == nil && err2 == nil && ok && strings.HasPrefix(p, prefix)
	})
}

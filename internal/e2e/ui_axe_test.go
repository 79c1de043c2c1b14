package e2e_test

import (
	"context"
	"time"

	"github.com/chromedp/chromedp"
)

// axeRunJS runs axe-core on the page in view and returns its serious and
// critical violations, one line each with up to three offending nodes.
// Moderate and minor findings are not failures (the bar).
const axeRunJS = `axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations
  .filter((v) => v.impact === "serious" || v.impact === "critical")
  .map((v) => v.impact + " " + v.id + ": " + v.help + " — " + v.nodes.slice(0, 3)
    .map((n) => n.target.join(" ") + (n.failureSummary ? " (" + n.failureSummary.replace(/\s+/g, " ").trim() + ")" : ""))
    .join("; ")))`

// axeProblems injects axe-core (testkit.AxeCore; once per document) and
// returns its serious and critical violations; none when axe-core could
// not be installed outside CI (testkit.AxeCore said so loudly).
func (b *browser) axeProblems() []string {
	b.t.Helper()
	if b.axe == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	// Why through the DevTools protocol rather than a <script> tag: the
	// pages' CSP allows no script but their own, which is the point.
	loaded := eval[bool](b, `typeof axe !== "undefined"`)
	if !loaded {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](b.axe+";true")); err != nil {
			b.t.Fatalf("inject axe-core: %v", err)
		}
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](axeRunJS, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("run axe-core on %s: %v", b.path(), err)
	}
	return out
}

// checkAxe fails the test with the page's serious and critical axe-core
// violations in the current colour scheme.
func (b *browser) checkAxe() {
	b.t.Helper()
	for _, p := range b.axeProblems() {
		b.t.Errorf("%s (%s): axe %s", b.path(), b.scheme(), p)
	}
}

// checkSchemes runs the layout, legibility and axe-core checks in the
// light and then the dark colour scheme, and leaves the tab light.
func (b *browser) checkSchemes() {
	b.t.Helper()
	b.checkLayout()
	b.checkAxe()
	b.dark(true)
	b.checkLayout()
	b.checkAxe()
	b.dark(false)
}

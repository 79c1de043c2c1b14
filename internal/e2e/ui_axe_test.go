package e2e_test

import (
	"context"
	"sync"
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

// axeSignatureJS fingerprints what axe-core's verdict depends on: every
// element's tag, classes, role, ARIA and form attributes and its place in
// the tree, and the colour scheme; not the text (same classes, same
// colours; an aria-label counts as there or not, numbers and ids in a
// value as placeholders), and not how often a shape repeats among its siblings: a list
// of nine rows shaped like the rows of a list of two gets the verdict of
// the two (each element's children count once per distinct shape, in the
// order each shape first appears). Why: lists and timelines grow between
// the visits of a test, and each new length used to run axe-core again.
const axeSignatureJS = `(() => {
  const hash = (s) => { let h = 5381; for (let i = 0; i < s.length; i++) h = ((h * 33) ^ s.charCodeAt(i)) >>> 0; return h; };
  // A label's words are text (whether there is one is what counts), and
  // ids and numbers inside a value (aria-labelledby="row-42") name data.
  const norm = (a) => a.name === "aria-label" ? String(a.value.trim() !== "") :
    a.value.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, ":id").replace(/[0-9]+/g, "0");
  const shape = (el) => {
    let s = el.tagName;
    for (const a of el.attributes) {
      if (a.name === "class" || a.name === "role" || a.name === "type" || a.name === "for" || a.name === "open" ||
          a.name === "disabled" || a.name === "tabindex" || a.name.startsWith("aria-")) s += " " + a.name + "=" + norm(a);
    }
    const seen = new Set();
    s += "(";
    for (const c of el.children) {
      const h = shape(c);
      if (!seen.has(h)) { seen.add(h); s += h + ","; }
    }
    return hash(s + ")");
  };
  const scheme = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  return location.pathname.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, ":id") + "#" + scheme + "#" + shape(document.documentElement);
})()`

// axeChecked holds the signatures axe-core already passed (or failed) in
// this test process: a page of the same structure in the same scheme
// gets the same verdict, so it is checked once. Why: every test revisits
// its pages after each action, and running axe-core twice on each visit
// took the browser suite past its budget.
var axeChecked sync.Map

// axeProblems injects axe-core (testkit.AxeCore; once per document) and
// returns its serious and critical violations; none when axe-core could
// not be installed outside CI (testkit.AxeCore said so loudly).
func (b *browser) axeProblems() []string {
	b.t.Helper()
	if b.axe == "" {
		return nil
	}
	if _, seen := axeChecked.LoadOrStore(eval[string](b, axeSignatureJS), true); seen {
		b.stats.axeSkipped++
		return nil
	}
	start := time.Now()
	defer func() { b.stats.axeRuns++; b.stats.axeTime += time.Since(start) }()
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

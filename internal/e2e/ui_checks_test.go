package e2e_test

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// layoutChecksJS returns the layout and legibility problems of the page
// in view: anything that makes the page wider than the viewport (a long
// subject must wrap, never widen a page), a table cut off behind a
// horizontal scroller on a phone, a select too narrow for its chosen
// option, and a button without visible text or
// with text below WCAG AA contrast (4.5:1) on its effective background.
const layoutChecksJS = `(() => {
  const out = [];
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "");
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) {
    const leaves = [];
    for (const el of document.body.querySelectorAll("*")) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= vw + 1) continue;
      let child = false;
      for (const c of el.children) { if (c.getBoundingClientRect().right > vw + 1) { child = true; break; } }
      if (!child) leaves.push(describe(el) + " (right edge " + Math.round(r.right) + " px)");
      if (leaves.length === 3) break;
    }
    out.push("the page is " + document.documentElement.scrollWidth + " px wide in a " + vw + " px viewport: " + leaves.join(", "));
  }
  if (vw < 600) {
    for (const w of document.querySelectorAll(".table-wrap")) {
      if (w.scrollWidth > w.clientWidth + 1) out.push("a table is cut off on a phone: " + (w.getAttribute("aria-label") || describe(w)));
    }
  }
  // A select cannot wrap its chosen option: text wider than the box, less
  // the arrow's room (Chromium cuts text off about 21 px before the
  // padding; 20 keeps the check on the safe side), is cut off.
  const measure = document.createElement("canvas").getContext("2d");
  for (const el of document.querySelectorAll("select:not([multiple])")) {
    const opt = el.options[el.selectedIndex];
    if (!opt || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const cs = getComputedStyle(el);
    measure.font = cs.font;
    const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
    const need = measure.measureText(opt.text.trim()).width;
    if (need > room + 1) out.push("a select cuts off its choice \"" + opt.text.trim() + "\" (" + Math.round(need) + " px in " + Math.round(room) + " px): " + describe(el));
  }
  const parse = (c) => { const m = c.match(/[\d.]+/g) || [0, 0, 0, 0]; return [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1]; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = matchMedia("(prefers-color-scheme: dark)").matches ? [0, 0, 0, 1] : [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  };
  for (const el of document.querySelectorAll("button, .btn, input[type=submit]")) {
    if (el.disabled) continue;
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    // checkVisibility: a control inside a closed <details> has a box but
    // is not rendered.
    if (r.width === 0 || r.height === 0 || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const text = (el.innerText || el.value || "").trim();
    if (!text) { out.push("a button has no visible text: " + describe(el)); continue; }
    const bg = background(el);
    const fg = over(parse(cs.color), bg);
    const a = lum(fg), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push("button \"" + text + "\" has contrast " + ratio.toFixed(2) + ":1 (" + cs.color + " on rgb(" + bg.slice(0, 3).map(Math.round).join(", ") + "))");
  }
  return out;
})()`

// layoutProblems runs layoutChecksJS on the page in view.
func (b *browser) layoutProblems() []string {
	b.t.Helper()
	return eval[[]string](b, layoutChecksJS)
}

// checkLayout fails the test with the page's layout and legibility
// problems (part of checkPage, in both schemes, so of every visited page).
func (b *browser) checkLayout() {
	b.t.Helper()
	for _, p := range b.layoutProblems() {
		if b.longChoiceCut(p) {
			continue
		}
		b.t.Errorf("%s (%s): %s", b.path(), b.scheme(), p)
	}
}

// allowLongChoice excuses a select that cuts off label, a chosen option
// that is the user's data and wider than any phone (a 120-character agent
// name): a select cannot wrap its choice, so the cut-off is no fault of
// the page. Everything else is still checked: the select must not widen
// the page.
func (b *browser) allowLongChoice(label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.longChoices = append(b.longChoices, label)
}

// longChoiceCut reports whether problem is a select cutting off a choice
// that allowLongChoice excused.
func (b *browser) longChoiceCut(problem string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.longChoices {
		if strings.HasPrefix(problem, "a select cuts off its choice "+strconv.Quote(l)+" ") {
			return true
		}
	}
	return false
}

// scheme names the colour scheme the page is shown in.
func (b *browser) scheme() string {
	if eval[bool](b, `matchMedia("(prefers-color-scheme: dark)").matches`) {
		return "dark"
	}
	return "light"
}

// dark switches the tab to the dark colour scheme (false: light).
func (b *browser) dark(on bool) {
	b.t.Helper()
	v := "light"
	if on {
		v = "dark"
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
		b.t.Fatalf("emulate %s scheme: %v", v, err)
	}
}

// problemsContain reports whether one of problems mentions want.
func problemsContain(problems []string, want string) bool {
	for _, p := range problems {
		if strings.Contains(p, want) {
			return true
		}
	}
	return false
}

package ui

import (
	"regexp"
	"strings"
	"testing"
)

func TestRenderComment(t *testing.T) {
	cases := map[string]string{
		`plain`:                          `plain`,
		`**bold** text`:                  `<strong>bold</strong> text`,
		`\!\[tracker\](http://x/p.png)`:  `![tracker](http://x/p.png)`,
		`<script>alert(1)</script>`:      `&lt;script&gt;alert(1)&lt;/script&gt;`,
		`"><img src=x onerror=alert(1)>`: `&#34;&gt;&lt;img src=x onerror=alert(1)&gt;`,
		`a \*b\* c`:                      `a *b* c`,
		`**unclosed`:                     `**unclosed`,
		`[link](javascript:alert(1))`:    `[link](javascript:alert(1))`,
		"line1\nline2":                   "line1\nline2",
		`**<b>x</b>**`:                   `<strong>&lt;b&gt;x&lt;/b&gt;</strong>`,
	}
	for in, want := range cases {
		if got := string(RenderComment(in)); got != want {
			t.Errorf("RenderComment(%q) = %q, want %q", in, got, want)
		}
	}
	if got := string(RenderPlainText(`<a href="x">`)); got != `&lt;a href=&#34;x&#34;&gt;` {
		t.Errorf("RenderPlainText: %q", got)
	}
}

var dangerous = regexp.MustCompile(`(?i)<(img|a|script|iframe|svg)|\son[a-z]+=|javascript:`)

func FuzzRenderComment(f *testing.F) {
	for _, s := range []string{"**x**", `\!\[t\](http://x)`, "<img src=x onerror=y>", `**<script>**`, "\\*\\*a**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := string(RenderComment(s))
		// Only <strong> and </strong> may appear as markup.
		stripped := strings.NewReplacer("<strong>", "", "</strong>", "").Replace(out)
		if strings.ContainsAny(stripped, "<>") {
			t.Fatalf("RenderComment(%q) produced markup: %q", s, out)
		}
		if dangerous.MatchString(stripped) && strings.Contains(stripped, "<") {
			t.Fatalf("dangerous output for %q: %q", s, out)
		}
		if strings.Count(out, "<strong>") != strings.Count(out, "</strong>") {
			t.Fatalf("unbalanced bold for %q: %q", s, out)
		}
	})
}

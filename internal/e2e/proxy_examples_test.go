package e2e_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
)

// TestProxyExamplesFitServerLimits checks the reverse-proxy examples of
// docs/deployment.md ("Behind a reverse proxy") and the compose file's
// Caddyfile against the server's default limits (config.Load with no
// settings): the upload size they allow is at least an attachment of
// PAPERCLIP_ATTACHMENT_MAX_BYTES plus the web UI form's 256 KiB of
// framing; they close idle upstream connections before the server's
// idle timeout does; nginx does not buffer responses (the web UI's event
// stream) and Caddy flushes at once.
func TestProxyExamplesFitServerLimits(t *testing.T) {
	cfg, err := config.Load(config.Flags{Home: t.TempDir()}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	minBody := cfg.AttachmentMaxBytes + 256<<10
	doc, err := os.ReadFile("../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(lang string) string {
		t.Helper()
		_, rest, ok := strings.Cut(string(doc), "```"+lang+"\n")
		if !ok {
			t.Fatalf("docs/deployment.md has no ```%s block", lang)
		}
		body, _, _ := strings.Cut(rest, "```")
		return body
	}
	caddyfile, err := os.ReadFile("../../packaging/compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 1000 * 1000}
	setting := func(where, text, re string) []string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no setting matching %s", where, re)
		}
		return m
	}
	checkBody := func(where string, m []string) {
		t.Helper()
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if got := n * sizes[strings.ToLower(m[2])]; got < minBody {
			t.Errorf("%s allows uploads of %d bytes, less than the server's %d (attachment limit plus form framing)", where, got, minBody)
		}
	}
	checkIdle := func(where string, m []string) {
		t.Helper()
		d, err := time.ParseDuration(m[1])
		if err != nil || d >= cfg.IdleTimeout {
			t.Errorf("%s keeps idle upstream connections %s, want less than the server's idle timeout %s", where, m[1], cfg.IdleTimeout)
		}
	}
	nginx := block("nginx")
	checkBody("the nginx example", setting("nginx", nginx, `client_max_body_size (\d+)([kmg]);`))
	checkIdle("the nginx example", setting("nginx", nginx, `upstream paperclip \{[^}]*keepalive_timeout (\d+s);`))
	if !strings.Contains(nginx, "proxy_buffering off;") {
		t.Error("the nginx example buffers responses: the web UI's event stream would stall")
	}
	for where, c := range map[string]string{"the Caddy example": block("caddyfile"), "packaging/compose/Caddyfile": string(caddyfile)} {
		checkBody(where, setting(where, c, `max_size (\d+)([KMG]i?B)`))
		checkIdle(where, setting(where, c, `\bkeepalive (\d+s)`))
		if !strings.Contains(c, "flush_interval -1") || !strings.Contains(c, "health_uri /readyz") {
			t.Errorf("%s: want flush_interval -1 and health_uri /readyz", where)
		}
	}
}

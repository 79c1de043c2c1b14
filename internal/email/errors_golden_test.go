package email_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/golden"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The shapes of the API's error bodies ({error}, {error, code},
// {error, code, details} with a Retry-After) are a contract with every
// client: each representative answer, status and body, is a golden file,
// identical on both databases.
func TestErrorBodiesGolden(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		company := "/api/companies/" + e.CompanyID
		cases := []struct {
			name, method, path string
			body               any
			before             func()
		}{
			{name: "unknown route", method: "GET", path: "/api/nope"},
			{name: "malformed JSON", method: "POST", path: "/api/companies", body: `{"name": "x"`},
			{name: "unknown field", method: "POST", path: "/api/companies", body: `{"name":"x","extra":1}`},
			{name: "invalid id", method: "GET", path: "/api/issues/123"},
			{name: "not found", method: "GET", path: "/api/companies/00000000-0000-4000-8000-000000000000"},
			{name: "provider refused the key", method: "POST", path: company + "/email/inspect",
				before: func() { providerFault(e, "inspect_key", 401, "unauthorized", nil) }, body: map[string]any{"apiKey": "am_bad_key"}},
			{name: "provider rate limit", method: "POST", path: company + "/email/inspect",
				before: func() { providerFault(e, "inspect_key", 429, "rate_limited", map[string]string{"Retry-After": "7"}) },
				body:   map[string]any{"apiKey": "am_other_key"}},
			{name: "email connections turned off", method: "GET", path: company + "/email/inboxes", before: func() {
				e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": false}}, 200)
			}},
		}
		var out bytes.Buffer
		for _, c := range cases {
			if c.before != nil {
				c.before()
			}
			st, body, h := e.Board.DoHeader(c.method, c.path, c.body)
			fmt.Fprintf(&out, "## %s: %s %s\n%d", c.name, c.method, strings.Replace(c.path, e.CompanyID, "{companyId}", 1), st)
			if ra := h.Get("Retry-After"); ra != "" {
				fmt.Fprintf(&out, " Retry-After: %s", ra)
			}
			fmt.Fprintf(&out, "\n%s\n", bytes.TrimSpace(body))
		}
		golden.Check(t, filepath.Join("testdata", "error_bodies.golden"), out.Bytes())
	})
}

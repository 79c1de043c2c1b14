package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// The access edits of a saved credential's permissions page: each one
// changes the connection through the API and goes back to the page with
// its flash; a refused change shows the refusal.
func TestEmailConnectionAccessEdits(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		e.enable()
		conn := e.connect(sentinel)
		perms := e.am() + "/connections/" + conn
		read := func() (grants, installs []map[string]any) {
			c := e.api.JSON("GET", "/api/companies/"+e.company+"/email/connections/"+conn, nil, 200)
			for _, g := range c["grants"].([]any) {
				if gm := g.(map[string]any); gm["status"] == "active" {
					grants = append(grants, gm)
				}
			}
			for _, in := range c["installs"].([]any) {
				installs = append(installs, in.(map[string]any))
			}
			return grants, installs
		}
		grants0, installs0 := read()

		back := func(p page, flash string) {
			t.Helper()
			if loc := location(t, p); loc != perms {
				t.Fatalf("redirected to %s, want %s", loc, perms)
			}
			if got := e.get(perms); got.status != http.StatusOK || !strings.Contains(got.body, flash) {
				t.Fatalf("permissions page after the edit (%d) lacks %q", got.status, flash)
			}
		}
		back(e.post(perms, perms+"/installs", url.Values{"targetType": {"company"}}), "Connection access saved.")
		grants, installs := read()
		if len(installs) != len(installs0)+1 {
			t.Fatalf("installs %d, want %d", len(installs), len(installs0)+1)
		}
		var added string
		for _, in := range installs {
			if in["targetType"] == "company" {
				added = in["id"].(string)
			}
		}
		back(e.post(perms, perms+"/installs/"+added+"/remove", url.Values{"confirm": {"1"}}), "Agent access removed.")
		if _, installs = read(); len(installs) != len(installs0) {
			t.Fatalf("installs after remove %d, want %d", len(installs), len(installs0))
		}

		back(e.post(perms, perms+"/grants", url.Values{"kind": {"user"}}), "Connection access saved.")
		if grants, _ = read(); len(grants) != len(grants0)+1 {
			t.Fatalf("grants %d, want %d", len(grants), len(grants0)+1)
		}
		var user string
		for _, g := range grants {
			if g["kind"] == "user" {
				user = g["id"].(string)
			}
		}
		back(e.post(perms, perms+"/grants/"+user+"/revoke", url.Values{"confirm": {"1"}}), "Access revoked.")
		if grants, _ = read(); len(grants) != len(grants0) {
			t.Fatalf("grants after revoke %d, want %d", len(grants), len(grants0))
		}

		// A refused change shows the refusal, not the page.
		p := e.post(perms, perms+"/installs", url.Values{"targetType": {"agent"}, "targetId": {"not-a-uuid"}})
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Access not changed") {
			t.Fatalf("refused install: %d %s", p.status, p.body)
		}
		if p := e.get(e.am() + "/connections/not-a-uuid"); p.status != http.StatusNotFound {
			t.Fatalf("bad connection id: %d", p.status)
		}
	})
}

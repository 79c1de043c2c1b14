package email_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestRoutesCheckInOrder: the API edge calls the service in the routes'
// order (path ids, then authority, then the body), so a member who may
// not manage connections learns nothing from a malformed id or body, and
// a manager gets the precise refusal.
func TestRoutesCheckInOrder(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		outsider, _ := memberClient(t, e, "outsider@example.com", []string{}...)
		manager, _ := memberClient(t, e, "manager@example.com")
		cases := []struct {
			name   string
			c      *testkit.Client
			method string
			path   string
			body   any
			status int
			text   string
		}{
			{"bad company id", manager, "GET", "/api/companies/nope/email/connections", nil, 400, "invalid companyId: must be a UUID"},
			{"non-manager, bad connection id", outsider, "GET", connectionsPath(e) + "/nope", nil, 403, "Missing permission"},
			{"non-manager, bad body", outsider, "POST", connectionsPath(e), "{", 403, "Missing permission"},
			{"manager, bad connection id", manager, "GET", connectionsPath(e) + "/nope", nil, 400, "invalid connectionId: must be a UUID"},
			{"manager, unknown connection", manager, "GET", connectionsPath(e) + "/" + testkit.NewUUID(), nil, 404, "Active AgentMail connection not found"},
			{"manager, bad body", manager, "POST", connectionsPath(e), "{", 400, "invalid JSON body"},
			{"bad inbox id before the body", e.Board, "POST", "/api/email/inboxes/nope/reconnect", "{", 400, "invalid endpointId: must be a UUID"},
			{"unknown inbox", e.Board, "GET", "/api/email/inboxes/" + testkit.NewUUID(), nil, 404, "Email inbox not found"},
			{"non-writer lifts a suppression", outsider, "DELETE", "/api/companies/" + e.CompanyID + "/email/suppressions/a@example.com", nil, 403,
				"Only company owners and admins"},
		}
		for _, c := range cases {
			st, raw := c.c.Do(c.method, c.path, c.body)
			if st != c.status || !strings.Contains(string(raw), c.text) {
				t.Errorf("%s: %d %s, want %d with %q", c.name, st, raw, c.status, c.text)
			}
		}
	})
}

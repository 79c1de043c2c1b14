package email_test

import (
	"context"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Issue 28 item 12: the replica holding an inbox's live connection (host
// name and process id) is infrastructure; only instance administrators
// see socketOwner. A company owner reading the same inbox, alone or in
// the list, gets null.
func TestSocketOwnerIsForInstanceAdminsOnly(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		ep := e.Setup("owned", nil)
		id := ep["id"].(string)
		var sum map[string]any
		testkit.Eventually(t, 30*time.Second, "the admin sees the socket owner", func() bool {
			sum = e.Board.JSON("GET", "/api/email/inboxes/"+id, nil, 200)
			o, _ := sum["socketOwner"].(string)
			return o != ""
		})
		ctx := context.Background()
		st := e.Store
		u, err := st.EnsureUser(ctx, st.DB, "owner@example.com", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutMembership(ctx, st.DB, e.CompanyID, u.ID, "owner", nil); err != nil {
			t.Fatal(err)
		}
		_, key, err := st.CreateBoardKey(ctx, st.DB, u.ID, "", "test")
		if err != nil {
			t.Fatal(err)
		}
		owner := e.Board.As(key, "")
		got := owner.JSON("GET", "/api/email/inboxes/"+id, nil, 200)
		if got["socketOwner"] != nil {
			t.Fatalf("a company owner sees the socket owner: %v", got["socketOwner"])
		}
		if got["health"] != sum["health"] {
			t.Fatalf("owner's health %v, admin's %v", got["health"], sum["health"])
		}
		for _, s := range owner.List("/api/companies/" + e.CompanyID + "/email/inboxes") {
			if s["socketOwner"] != nil {
				t.Fatalf("inbox list shows the socket owner to a company owner: %v", s["socketOwner"])
			}
		}
	})
}

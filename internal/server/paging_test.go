package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/notifications"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// pagingRows is how many rows each listing holds before it is paged.
const pagingRows = 1010

// pagedListing is one list route under the paging test: seed inserts n
// rows (in one transaction) and returns their ids; insert adds one more
// row while the listing is being paged.
type pagedListing struct {
	name   string
	path   string
	object bool // {items, nextCursor} body rather than an array
	seed   func(t *testing.T, tx *sql.Tx, n int) []string
	insert func(t *testing.T) string
}

// TestEveryListPagesExactlyOnce pages through every list route of
// docs/api.md ("Paging") while rows are being added, on both databases:
// every row that existed when paging started is served exactly once, no
// row twice, and no page exceeds the limit.
func TestEveryListPagesExactlyOnce(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		e.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		f := newPagingFixture(t, e)
		for _, l := range f.listings(t) {
			t.Run(l.name, func(t *testing.T) { checkPagesExactlyOnce(t, e, f.st, l) })
		}
		t.Run("cli-all", func(t *testing.T) {
			// `paperclipai api --all` follows the pages of both shapes.
			for _, c := range []struct {
				path   string
				object bool
			}{{"/companies/" + f.company + "/issues?limit=200", false}, {"/companies/" + f.company + "/email/publications?limit=200", true}} {
				cmd := exec.Command(e.bin, "api", "--all", "GET", c.path)
				cmd.Env = append(os.Environ(), "PAPERCLIP_API_URL="+e.inst.URL()+"/api", "PAPERCLIP_API_KEY=")
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("api --all GET %s: %v", c.path, err)
				}
				var rows []map[string]any
				if c.object {
					var obj struct {
						Items      []map[string]any `json:"items"`
						NextCursor *string          `json:"nextCursor"`
					}
					if err := json.Unmarshal(out, &obj); err != nil || obj.NextCursor != nil {
						t.Fatalf("api --all GET %s: %v %.300s", c.path, err, out)
					}
					rows = obj.Items
				} else if err := json.Unmarshal(out, &rows); err != nil {
					t.Fatalf("api --all GET %s: %v %.300s", c.path, err, out)
				}
				ids := map[string]bool{}
				for _, r := range rows {
					ids[r["id"].(string)] = true
				}
				if len(rows) < pagingRows || len(ids) != len(rows) {
					t.Fatalf("api --all GET %s: %d rows, %d distinct, want at least %d", c.path, len(rows), len(ids), pagingRows)
				}
			}
		})
		t.Run("bad-requests", func(t *testing.T) {
			_, _, h := e.board.DoHeader("GET", "/api/companies/"+f.company+"/issues?limit=1", nil)
			created := h.Get("X-Next-Cursor")
			for _, c := range []struct{ path, want string }{
				{"/api/companies/" + f.company + "/issues?cursor=not-a-cursor", "invalid cursor"},
				{"/api/issues/" + f.issue + "/comments?cursor=" + url.QueryEscape(created[:len(created)-2]), "invalid cursor"},
				{"/api/companies/" + f.company + "/issues?sort=priority&cursor=" + url.QueryEscape(created), "invalid cursor"},
				{"/api/companies/" + f.company + "/email/publications?cursor=%25", "invalid cursor"},
				{"/api/companies/" + f.company + "/agents?limit=201", "limit must be an integer between 1 and 200"},
				{"/api/companies/" + f.company + "/activity?limit=0", "limit must be an integer between 1 and 200"},
				{"/api/companies?cursor=not-a-cursor", "invalid cursor"},
				{"/api/companies/" + f.company + "/email/tasks/" + f.mailIssue + "/deliveries?cursor=%25", "invalid cursor"},
				{"/api/companies/" + f.company + "/secrets?limit=201", "limit must be an integer between 1 and 200"},
			} {
				st, body := e.board.Do("GET", c.path, nil)
				if st != 400 || !strings.Contains(string(body), c.want) {
					t.Errorf("GET %s: %d %s, want 400 %q", c.path, st, body, c.want)
				}
			}
			if created == "" {
				t.Fatal("a page of one task of many has no X-Next-Cursor")
			}
		})
	})
}

// checkPagesExactlyOnce is the shared check of one listing.
func checkPagesExactlyOnce(t *testing.T, e *env, st *store.Store, l pagedListing) {
	var seeded []string
	if err := st.Tx(context.Background(), func(tx *sql.Tx) error {
		seeded = l.seed(t, tx, pagingRows)
		return nil
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	// Inserts run in another goroutine while the pages are read, and at
	// least one lands between every two pages (the channel hands over).
	between := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var added []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-between:
				id := l.insert(t)
				mu.Lock()
				added = append(added, id)
				mu.Unlock()
				between <- struct{}{}
			}
		}
	}()
	seen := map[string]int{}
	const limit = 137
	path := l.path + sep(l.path) + fmt.Sprintf("limit=%d", limit)
	pages := 0
	for path != "" {
		between <- struct{}{}
		<-between
		status, body, h := e.board.DoHeader("GET", path, nil)
		if status != 200 {
			t.Fatalf("GET %s: status %d: %s", path, status, body)
		}
		ids, next := pageIDs(t, l, body, h)
		if len(ids) > limit {
			t.Fatalf("page of %d rows, limit %d", len(ids), limit)
		}
		for _, id := range ids {
			seen[id]++
		}
		pages++
		if pages > pagingRows {
			t.Fatal("paging does not end")
		}
		path = ""
		if next != "" {
			path = l.path + sep(l.path) + fmt.Sprintf("limit=%d&cursor=%s", limit, url.QueryEscape(next))
			if !l.object {
				// The Link header names the same next page.
				link := h.Get("Link")
				if !strings.Contains(link, "cursor="+url.QueryEscape(next)) || !strings.HasSuffix(link, `; rel="next"`) {
					t.Fatalf("Link %q does not name cursor %q", link, next)
				}
			}
		}
	}
	close(done)
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %s served %d times", id, n)
		}
	}
	for _, id := range seeded {
		if seen[id] != 1 {
			t.Fatalf("row %s existing before paging served %d times (of %d rows, %d pages)", id, seen[id], len(seeded), pages)
		}
	}
	if len(added) == 0 {
		t.Fatal("no row was inserted while paging")
	}
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// pageIDs reads a page's row ids and next cursor.
func pageIDs(t *testing.T, l pagedListing, body []byte, h map[string][]string) ([]string, string) {
	var rows []map[string]any
	next := ""
	if l.object {
		var obj struct {
			Items      []map[string]any `json:"items"`
			NextCursor *string          `json:"nextCursor"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		rows = obj.Items
		if obj.NextCursor != nil {
			next = *obj.NextCursor
		}
	} else {
		if err := json.Unmarshal(body, &rows); err != nil {
			t.Fatalf("decode %.200s: %v", body, err)
		}
		if v := h["X-Next-Cursor"]; len(v) > 0 {
			next = v[0]
		}
	}
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		id, _ := r["id"].(string)
		if id == "" {
			id, _ = r["userId"].(string) // members
		}
		if ep, _ := r["endpointId"].(string); id == "" && ep != "" {
			addr, _ := r["address"].(string) // suppressions: (inbox, address)
			id = ep + "/" + addr
		}
		if id == "" {
			t.Fatalf("row without id: %v", r)
		}
		ids = append(ids, id)
	}
	return ids, next
}

// pagingFixture is one company with the parents the listings need.
type pagingFixture struct {
	st                                   *store.Store
	company, agent, issue, endpoint, sha string
	conversation                         string
	// mailIssue and mailConversation hold one task's inbound deliveries;
	// keyUser owns the board keys; secret is the control key every
	// listed email credential is bound to.
	mailIssue, mailConversation, keyUser, secret string
	n                                            int
	mu                                           sync.Mutex
}

func newPagingFixture(t *testing.T, e *env) *pagingFixture {
	ctx := context.Background()
	f := &pagingFixture{st: e.inst.Store}
	f.company = e.company("Paging Co")
	f.agent = testkit.ID(e.board.JSON("POST", "/api/companies/"+f.company+"/agents", map[string]any{"name": "Pager",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	f.issue = testkit.ID(e.board.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": "Parent"}, 201))
	f.mailIssue = testkit.ID(e.board.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": "Mail"}, 201))
	f.secret = testkit.ID(e.board.JSON("POST", "/api/companies/"+f.company+"/secrets", map[string]any{"name": "paging-key", "value": "am_paging"}, 201))
	content := []byte("paging")
	sum := sha256.Sum256(content)
	f.sha = hex.EncodeToString(sum[:])
	err := f.st.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := f.st.PutBlob(ctx, tx, f.sha, int64(len(content)), bytes.NewReader(content)); err != nil {
			return err
		}
		ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: f.company, AssignedAgentID: f.agent, Status: domain.EndpointDraft,
			DisplayName: "Paging", ReceiveMode: "websocket"}
		if _, err := f.st.InsertEndpoint(ctx, tx, &ep); err != nil {
			return err
		}
		f.endpoint = ep.ID
		// An address, which the suppression listing shows.
		if _, err := tx.ExecContext(ctx, `UPDATE email_endpoints SET address = $1 WHERE id = $2`, "paging-"+ep.ID+"@agentmail.test", ep.ID); err != nil {
			return err
		}
		c := domain.EmailConversation{CompanyID: f.company, EndpointID: f.endpoint, IssueID: f.issue, ExternalConversationID: "conv",
			ExternalThreadID: "thread-parent", Subject: "Parent"}
		if _, err := f.st.InsertConversation(ctx, tx, &c); err != nil {
			return err
		}
		f.conversation = c.ID
		mc := domain.EmailConversation{CompanyID: f.company, EndpointID: f.endpoint, IssueID: f.mailIssue, ExternalConversationID: "mail",
			ExternalThreadID: "thread-mail", Subject: "Mail"}
		if _, err := f.st.InsertConversation(ctx, tx, &mc); err != nil {
			return err
		}
		f.mailConversation = mc.ID
		u, err := f.st.EnsureUser(ctx, tx, "keys@example.com", "Keys", false)
		f.keyUser = u.ID
		return err
	})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return f
}

// next returns a number unique within the fixture.
func (f *pagingFixture) next() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}

// listings are every paged list route, each with its rows.
func (f *pagingFixture) listings(t *testing.T) []pagedListing {
	ctx := context.Background()
	// one wraps a single-row insert as both seed and concurrent insert.
	one := func(name, path string, object bool, insert func(q db.Querier) (string, error)) pagedListing {
		return pagedListing{name: name, path: path, object: object,
			seed: func(t *testing.T, tx *sql.Tx, n int) []string {
				ids := make([]string, 0, n)
				for range n {
					id, err := insert(tx)
					if err != nil {
						t.Fatalf("seed %s: %v", name, err)
					}
					ids = append(ids, id)
				}
				return ids
			},
			insert: func(t *testing.T) string {
				id, err := insert(f.st.DB)
				if err != nil {
					t.Errorf("insert %s: %v", name, err)
				}
				return id
			}}
	}
	c, st := f.company, f.st
	hook, err := f.webhook(ctx, st.DB)
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	return []pagedListing{
		one("issues", "/api/companies/"+c+"/issues", false, func(q db.Querier) (string, error) {
			i := domain.Issue{CompanyID: c, Title: fmt.Sprintf("Task %d", f.next())}
			_, err := st.CreateIssue(ctx, q, &i)
			return i.ID, err
		}),
		one("issues-by-priority", "/api/companies/"+c+"/issues?sort=priority", false, func(q db.Querier) (string, error) {
			n := f.next()
			i := domain.Issue{CompanyID: c, Title: fmt.Sprintf("Task %d", n), Priority: []string{"critical", "high", "medium", "low"}[n%4]}
			_, err := st.CreateIssue(ctx, q, &i)
			return i.ID, err
		}),
		one("comments", "/api/issues/"+f.issue+"/comments", false, func(q db.Querier) (string, error) {
			cm := domain.Comment{CompanyID: c, IssueID: f.issue, Body: fmt.Sprintf("comment %d", f.next()), AuthorKind: "system"}
			err := st.CreateComment(ctx, q, &cm)
			return cm.ID, err
		}),
		one("attachments", "/api/issues/"+f.issue+"/attachments", false, func(q db.Querier) (string, error) {
			a := domain.Attachment{CompanyID: c, IssueID: f.issue, Filename: fmt.Sprintf("f%d.txt", f.next()), ContentType: "text/plain",
				SizeBytes: 6, SHA256: f.sha}
			err := st.CreateAttachment(ctx, q, &a)
			return a.ID, err
		}),
		one("runs", "/api/companies/"+c+"/heartbeat-runs", false, func(q db.Querier) (string, error) {
			r := domain.Run{CompanyID: c, AgentID: f.agent, Status: domain.RunSucceeded, WakeSource: "on_demand", WakeReason: "paging",
				IdempotencyKey: fmt.Sprintf("paging-%d", f.next())}
			_, err := st.InsertRun(ctx, q, &r)
			return r.ID, err
		}),
		one("activity", "/api/companies/"+c+"/activity", false, func(q db.Querier) (string, error) {
			a, err := store.AuditEntry(domain.ActivityActor{Kind: "system", ID: "paging"}, c, "issue.updated", "issue", f.issue, nil)
			if err != nil {
				return "", err
			}
			return a.ID, st.InsertActivity(ctx, q, a)
		}),
		one("agents", "/api/companies/"+c+"/agents", false, func(q db.Querier) (string, error) {
			a := domain.Agent{CompanyID: c, Name: fmt.Sprintf("Agent %d", f.next()), AdapterType: "process"}
			err := st.CreateAgent(ctx, q, &a)
			return a.ID, err
		}),
		one("projects", "/api/companies/"+c+"/projects", false, func(q db.Querier) (string, error) {
			p := domain.Project{CompanyID: c, Name: fmt.Sprintf("Project %d", f.next())}
			err := st.CreateProject(ctx, q, &p)
			return p.ID, err
		}),
		one("members", "/api/companies/"+c+"/members", false, func(q db.Querier) (string, error) {
			u, err := st.EnsureUser(ctx, q, fmt.Sprintf("member%d@example.com", f.next()), "Member", false)
			if err != nil {
				return "", err
			}
			_, err = st.PutMembership(ctx, q, c, u.ID, domain.RoleViewer, nil)
			return u.ID, err
		}),
		one("inboxes", "/api/companies/"+c+"/email/inboxes", false, func(q db.Querier) (string, error) {
			ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: c, AssignedAgentID: f.agent, Status: domain.EndpointDraft,
				DisplayName: "Inbox", ReceiveMode: "websocket"}
			_, err := st.InsertEndpoint(ctx, q, &ep)
			return ep.ID, err
		}),
		one("conversations", "/api/email/inboxes/"+f.endpoint+"/conversations", false, func(q db.Querier) (string, error) {
			n := f.next()
			cv := domain.EmailConversation{CompanyID: c, EndpointID: f.endpoint, IssueID: f.issue,
				ExternalConversationID: fmt.Sprintf("c%d", n), ExternalThreadID: fmt.Sprintf("t%d", n), Subject: "Hello"}
			_, err := st.InsertConversation(ctx, q, &cv)
			return cv.ID, err
		}),
		one("inbox-activity", "/api/email/inboxes/"+f.endpoint+"/activity", true, func(q db.Querier) (string, error) {
			n := f.next()
			if n%2 == 0 {
				d := store.EmailDelivery{CompanyID: c, EndpointID: f.endpoint, ProviderEventID: fmt.Sprintf("ev%d", n),
					DeduplicationKey: fmt.Sprintf("message.received:m%d", n), EventKind: "message", Source: "websocket",
					NormalizedEvent: json.RawMessage(`{}`), State: domain.DeliveryFiltered}
				_, err := st.InsertDelivery(ctx, q, &d)
				return d.ID, err
			}
			return f.publication(ctx, q)
		}),
		one("sends", "/api/companies/"+c+"/email/publications", true, func(q db.Querier) (string, error) {
			return f.publication(ctx, q)
		}),
		one("company-conversations", "/api/companies/"+c+"/email/conversations", false, func(q db.Querier) (string, error) {
			n := f.next()
			cv := domain.EmailConversation{CompanyID: c, EndpointID: f.endpoint, IssueID: f.issue,
				ExternalConversationID: fmt.Sprintf("cc%d", n), ExternalThreadID: fmt.Sprintf("ct%d", n), Subject: "Across inboxes"}
			_, err := st.InsertConversation(ctx, q, &cv)
			return cv.ID, err
		}),
		one("inbox-quarantine", "/api/email/inboxes/"+f.endpoint+"/quarantine", true, func(q db.Querier) (string, error) {
			return f.quarantined(ctx, q)
		}),
		one("company-quarantine", "/api/companies/"+c+"/email/quarantine", true, func(q db.Querier) (string, error) {
			return f.quarantined(ctx, q)
		}),
		one("suppressions", "/api/companies/"+c+"/email/suppressions", true, func(q db.Querier) (string, error) {
			addr := fmt.Sprintf("bounced%d@example.com", f.next())
			return f.endpoint + "/" + addr, st.SuppressFrom(ctx, q, c, f.endpoint, addr, "message.bounced", "")
		}),
		one("notification-webhooks", "/api/companies/"+c+"/notification-webhooks", true, func(q db.Querier) (string, error) {
			return f.webhook(ctx, q)
		}),
		// The configuration listings (and one task's mail).
		one("companies", "/api/companies", false, func(q db.Querier) (string, error) {
			id := store.NewID()
			_, err := q.ExecContext(ctx, `INSERT INTO companies (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
				id, fmt.Sprintf("Company %d", f.next()), st.Now())
			return id, err
		}),
		one("company-board-keys", "/api/companies/"+c+"/board-keys", false, func(q db.Querier) (string, error) {
			k, _, err := st.CreateBoardKey(ctx, q, f.keyUser, c, fmt.Sprintf("key %d", f.next()))
			return k.ID, err
		}),
		one("board-keys", "/api/board-keys", false, func(q db.Querier) (string, error) {
			k, _, err := st.CreateBoardKey(ctx, q, f.keyUser, "", fmt.Sprintf("key %d", f.next()))
			return k.ID, err
		}),
		one("environments", "/api/companies/"+c+"/environments", false, func(q db.Querier) (string, error) {
			v := domain.Environment{CompanyID: c, Name: fmt.Sprintf("Env %d", f.next()), Driver: "local"}
			err := st.CreateEnvironment(ctx, q, &v)
			return v.ID, err
		}),
		one("secrets", "/api/companies/"+c+"/secrets", false, func(q db.Querier) (string, error) {
			v := domain.Secret{CompanyID: c, Name: fmt.Sprintf("secret-%d", f.next())}
			id := store.NewID()
			return id, st.InsertSecretWithID(ctx, q, id, &v, "sealed")
		}),
		one("action-policies", "/api/companies/"+c+"/action-policies", false, func(q db.Querier) (string, error) {
			p := domain.ActionPolicy{CompanyID: c, Action: fmt.Sprintf("paging.noop%d", f.next()), Effect: "allow"}
			err := st.CreatePolicy(ctx, q, &p)
			return p.ID, err
		}),
		// Listed only when usable: each is bound to the control key and
		// granted to the organization; its scope is known (no provider call).
		one("email-connections", "/api/companies/"+c+"/email/connections", false, func(q db.Querier) (string, error) {
			conn := domain.EmailConnection{CompanyID: c, IdempotencyKey: store.NewID(), Name: fmt.Sprintf("Key %d", f.next()), Scope: "organization"}
			if _, err := st.CreateEmailConnection(ctx, q, &conn); err != nil {
				return "", err
			}
			b := domain.SecretBinding{CompanyID: c, SecretID: f.secret, TargetType: "email_connection", TargetID: conn.ID,
				ConfigPath: "credentials.controlKey", Required: true}
			if err := st.PutBinding(ctx, q, &b); err != nil {
				return "", err
			}
			g := domain.EmailGrant{ConnectionID: conn.ID, Kind: "organization"}
			return conn.ID, st.AddEmailGrant(ctx, q, c, &g)
		}),
		one("task-deliveries", "/api/companies/"+c+"/email/tasks/"+f.mailIssue+"/deliveries", false, func(q db.Querier) (string, error) {
			n := f.next()
			d := store.EmailDelivery{CompanyID: c, EndpointID: f.endpoint, ProviderEventID: fmt.Sprintf("tev%d", n),
				DeduplicationKey: fmt.Sprintf("message.received:tm%d", n), EventKind: "message", Source: "websocket",
				NormalizedEvent: json.RawMessage(`{}`), State: domain.DeliveryFiltered}
			if _, err := st.InsertDelivery(ctx, q, &d); err != nil {
				return "", err
			}
			_, err := q.ExecContext(ctx, `UPDATE email_deliveries SET conversation_id = $1 WHERE id = $2`, f.mailConversation, d.ID)
			return d.ID, err
		}),
		// Delivery ids are msg_… (the webhook-id header), not UUIDs: the
		// listing's cursor carries them.
		one("notification-deliveries", "/api/companies/"+c+"/notification-webhooks/"+hook+"/deliveries", true, func(q db.Querier) (string, error) {
			d := store.NotificationDelivery{ID: notifications.NewDeliveryID(), CompanyID: c, WebhookID: hook, Event: notifications.EventSendFailed,
				Payload: "{}", State: store.NotificationDelivered, CreatedAt: st.Now()}
			return d.ID, st.InsertNotificationDelivery(ctx, q, d)
		}),
	}
}

// quarantined inserts a held-back inbound message (and the delivery it
// came in).
func (f *pagingFixture) quarantined(ctx context.Context, q db.Querier) (string, error) {
	n := f.next()
	d := store.EmailDelivery{CompanyID: f.company, EndpointID: f.endpoint, ProviderEventID: fmt.Sprintf("qev%d", n),
		DeduplicationKey: fmt.Sprintf("message.received:q%d", n), EventKind: "message", Source: "websocket",
		NormalizedEvent: json.RawMessage(`{}`), State: domain.DeliveryFiltered}
	if _, err := f.st.InsertDelivery(ctx, q, &d); err != nil {
		return "", err
	}
	m := store.QuarantinedMessage{ID: store.NewID(), CompanyID: f.company, EndpointID: f.endpoint, DeliveryID: d.ID, ProviderMessageID: fmt.Sprintf("qm%d", n),
		ProviderThreadID: fmt.Sprintf("qt%d", n), From: "spam@example.com", Subject: "Held", ReceivedAt: time.Now(),
		Reason: store.QuarantineSpam, Detail: "paging", BodyText: "held"}
	return m.ID, f.st.InsertQuarantined(ctx, q, &m)
}

// webhook inserts a notification webhook (past the API's cap of 20: the
// listing must page whatever is stored).
func (f *pagingFixture) webhook(ctx context.Context, q db.Querier) (string, error) {
	h := store.NotificationWebhook{ID: store.NewID(), CompanyID: f.company, URL: fmt.Sprintf("https://hooks.example.com/%d", f.next()),
		Events: []string{"email.review_requested"}, Format: "standard", SecretSealed: "sealed", CreatedAt: f.st.Now()}
	return h.ID, f.st.InsertNotificationWebhook(ctx, q, h)
}

// publication inserts a finished (failed) send, which no worker picks up.
func (f *pagingFixture) publication(ctx context.Context, q db.Querier) (string, error) {
	p := store.EmailPublication{ID: store.NewID(), CompanyID: f.company, EndpointID: f.endpoint, ConversationID: f.conversation,
		IssueID: f.issue, State: domain.SendFailed, Outcome: domain.OutcomeFailed, Request: json.RawMessage(`{}`),
		Actor: json.RawMessage(`{}`), Digest: "d"}
	return p.ID, f.st.InsertPublication(ctx, q, &p)
}

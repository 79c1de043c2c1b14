package inbound_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Attachments are imported once, into the database,
// within the size and type bounds, with sanitized names; omitted ones are
// named in a comment; mail retained later as thread context is not
// downloaded again.
func TestAttachmentsImportedOnce(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "files", nil, func(c *config.Config) { c.AttachmentMaxBytes = 1024 })
		e.waitSocket()
		b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
		first := e.deliver(emulator.DeliverRequest{Subject: "Files", Text: "See attached", Attachments: []emulator.DeliverAttachment{
			{Filename: "../context.txt", ContentType: "text/plain", ContentBase64: b64("hello world!")},
			{Filename: "big.pdf", ContentType: "application/pdf", ContentBase64: b64(strings.Repeat("x", 2000))},
			{Filename: "tool.exe", ContentType: "application/x-msdownload", ContentBase64: b64("MZ")},
		}})
		e.settled(1)
		task := e.tasks()[0]
		atts, err := e.Store.ListAttachments(context.Background(), e.Store.DB, task.ID)
		if err != nil || len(atts) != 1 {
			t.Fatalf("attachments: %v %v", atts, err)
		}
		a := atts[0]
		if a.Filename != "context.txt" || a.SizeBytes != 12 || a.CompanyID != e.CompanyID || a.ContentType != "text/plain" {
			t.Fatalf("attachment: %+v", a)
		}
		// The bytes are in the database, where every replica reads them.
		var content []byte
		if err := e.Store.DB.QueryRowContext(context.Background(), `SELECT data FROM attachment_blob_chunks WHERE sha256 = $1 AND seq = 0`,
			a.SHA256).Scan(&content); err != nil || string(content) != "hello world!" {
			t.Fatalf("stored content: %q %v", content, err)
		}
		cs := e.comments(task.ID)
		if len(cs) != 2 || cs[1].Body != "Email attachments unavailable: big.pdf, tool.exe." {
			t.Fatalf("comments: %+v", cs)
		}
		msgs := e.messages(task.ID)
		if len(msgs[0].AttachmentIDs) != 1 || msgs[0].AttachmentIDs[0] != a.ID {
			t.Fatalf("message attachment ids: %v", msgs[0].AttachmentIDs)
		}
		e.deliver(emulator.DeliverRequest{Subject: "Re: Files", Text: "Thanks", InReplyTo: first.MessageID})
		e.settled(2)
		locators := 0
		for _, r := range e.Em.Requests("/v0/inboxes/") {
			if strings.Contains(r.Path, "/attachments/") {
				locators++
			}
		}
		testkit.MustEqual(t, "attachment fetches", locators, 1)
	})
}

// The catch-up scan admits mail received after
// activation even when its Date header is years old (listing order is by
// Date, so every page is read), and never imports pre-activation history.
func TestCatchupAdmitsMissedMailOnly(t *testing.T) {
	t.Setenv("PAPERCLIP_EMAIL_CATCHUP_INTERVAL", "300ms")
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil, publicURL)
		_, connect := attachExisting(t, e, "catchup")
		history := e.deliver(emulator.DeliverRequest{Subject: "History", Text: "Old mail", Date: "2020-01-02T10:00:00Z"})
		// Webhook mode with no webhook ever arriving: only catch-up sees mail.
		sum := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", map[string]any{
			"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "inboxId": e.Address, "receiveMode": "webhook",
			"idempotencyKey": testkit.NewUUID()}, 201)
		e.EpID = sum["id"].(string)
		_ = connect
		late := e.deliver(emulator.DeliverRequest{Subject: "Backdated", Text: "Sent long ago, received now", Date: "2020-01-03T10:00:00Z"})
		ds := e.settled(1)
		testkit.MustEqual(t, "source", ds[0].Source, queue.SourceCatchup)
		testkit.MustEqual(t, "message", ds[0].DeduplicationKey, "message.received:"+late.MessageID)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
		// Further scans find nothing new.
		before := e.endpoint().LastSyncAt
		testkit.Eventually(t, wait, "another catch-up", func() bool {
			ep := e.endpoint()
			return ep.LastSyncAt != nil && ep.LastSyncAt.After(*before)
		})
		testkit.MustEqual(t, "deliveries", len(e.deliveries()), 1)
		for _, d := range e.deliveries() {
			if strings.Contains(d.DeduplicationKey, history.MessageID) {
				t.Fatal("pre-activation mail was imported")
			}
		}
	})
}

// A failed wake leaves the delivery in retry with
// the task and comment recorded and the wake pending; the retry repeats only
// the wake, with identical arguments, and never re-imports mail.
func TestFailedWakeIsRetriedAlone(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "wakes", nil)
		var mu sync.Mutex
		var calls []heartbeat.WakeRequest
		allow := false
		real := e.Heartbeat.WakeupTx
		e.Inbound.SetWake(func(ctx context.Context, tx *sql.Tx, agentID string, req heartbeat.WakeRequest) (domain.Run, bool, error) {
			mu.Lock()
			calls = append(calls, req)
			ok := allow
			mu.Unlock()
			if !ok {
				return domain.Run{}, false, errors.New("injected wake failure")
			}
			return real(ctx, tx, agentID, req)
		})
		e.waitSocket()
		res := e.deliver(emulator.DeliverRequest{Subject: "Wake me", Text: "Please"})
		var d store.EmailDelivery
		testkit.Eventually(t, wait, "delivery in retry", func() bool {
			ds := e.deliveries()
			if len(ds) != 1 {
				return false
			}
			d = ds[0]
			return d.State == domain.DeliveryRetry
		})
		var ev map[string]any
		_ = json.Unmarshal(d.NormalizedEvent, &ev)
		if ev["issueId"] == nil || ev["issueId"] == "" || ev["wakePending"] != true || d.RedactedError == "" {
			t.Fatalf("retry state: %s %q", d.NormalizedEvent, d.RedactedError)
		}
		if strings.Contains(d.RedactedError, "injected") {
			t.Fatalf("raw error text stored: %q", d.RedactedError)
		}
		mu.Lock()
		allow = true
		mu.Unlock()
		ds := e.settled(1)
		_ = json.Unmarshal(ds[0].NormalizedEvent, &ev)
		if ev["wakePending"] != false {
			t.Fatalf("wake still pending: %s", ds[0].NormalizedEvent)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(calls) < 2 {
			t.Fatalf("wake calls: %d", len(calls))
		}
		// The request's audit builder is a closure (funcs never compare
		// equal); everything else must be identical.
		first := calls[0]
		first.AlsoAudit = nil
		for _, c := range calls[1:] {
			if c.AlsoAudit == nil {
				t.Fatal("a retried wake lost its email audit entry")
			}
			c.AlsoAudit = nil
			if !reflect.DeepEqual(c, first) {
				t.Fatalf("wake arguments changed:\n%+v\n%+v", first, c)
			}
		}
		task := e.tasks()[0]
		testkit.MustEqual(t, "messages", len(e.messages(task.ID)), 1)
		testkit.MustEqual(t, "comments", len(e.comments(task.ID)), 1)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
		_ = res
	})
}

// Field lessons 12 and 13: the same message ingested concurrently by the
// socket, a webhook-shaped payload and catch-up-style admissions, and every
// event replayed after processing, still gives one delivery, one complete
// retained message, one task and one wake.
func TestConcurrentAndReplayedIngestIsIdempotent(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "racy", nil)
		e.waitSocket()
		ep := e.endpoint()
		var results []emulator.DeliverResult
		for i := range 5 {
			results = append(results, e.deliver(emulator.DeliverRequest{Subject: "Race " + string(rune('A'+i)), Text: "Body " + string(rune('A'+i))}))
		}
		var wg sync.WaitGroup
		for _, r := range results {
			for range 3 {
				wg.Add(2)
				go func() {
					defer wg.Done()
					_, _ = e.Inbound.AdmitRaw(context.Background(), ep, receivedFrame(e.Address, r.MessageID, r.ThreadID), queue.SourceWebhook)
				}()
				go func() {
					defer wg.Done()
					_, _ = e.Inbound.AdmitEvent(context.Background(), ep, agentmail.Event{Kind: agentmail.EventMessageReceived,
						InboxID: e.Address, MessageID: r.MessageID, ThreadID: r.ThreadID}, queue.SourceCatchup)
				}()
			}
		}
		wg.Wait()
		e.settled(5)
		// Replay everything once more after processing (a crash before a
		// checkpoint or acknowledgement looks like this).
		for _, r := range results {
			if ok, err := e.Inbound.AdmitRaw(context.Background(), ep, receivedFrame(e.Address, r.MessageID, r.ThreadID), queue.SourceWebSocket); ok || err != nil {
				t.Fatalf("replay admitted=%v err=%v", ok, err)
			}
		}
		if err := e.Store.ForceCatchup(context.Background(), e.Store.DB, e.EpID); err != nil {
			t.Fatal(err)
		}
		e.Inbound.Notify()
		testkit.Eventually(t, wait, "catch-up after replay", func() bool { return e.endpoint().LastSyncAt != nil })
		e.settled(5)
		tasks := e.tasks()
		testkit.MustEqual(t, "tasks", len(tasks), 5)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 5)
		for _, task := range tasks {
			ms := e.messages(task.ID)
			if len(ms) != 1 || !strings.HasPrefix(ms[0].Text, "Body ") {
				t.Fatalf("retained: %+v", ms)
			}
		}
	})
}

// An idle worker issues no database queries between its deadlines (here
// for 2 s, with a 90 s lease so its batch renewal, every 22.5 s, and the
// 60 s safety rescan and catch-up fall outside the window).
func TestIdleWorkerIsSilent(t *testing.T) {
	t.Setenv("PAPERCLIP_EMAIL_LEASE_TTL", "90s")
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "quiet", nil)
		e.waitSocket()
		e.deliver(emulator.DeliverRequest{Subject: "One", Text: "then silence"})
		e.settled(1)
		testkit.Eventually(t, wait, "first catch-up", func() bool { return e.endpoint().LastSyncAt != nil })
		// Let the post-commit signals of the last work drain.
		testkit.Eventually(t, wait, "a quiet worker", func() bool {
			q := e.Inbound.Queries()
			time.Sleep(100 * time.Millisecond)
			return e.Inbound.Queries() == q
		})
		q0 := e.Inbound.Queries()
		time.Sleep(2 * time.Second)
		testkit.MustEqual(t, "queries while idle", e.Inbound.Queries()-q0, int64(0))
		// And it still wakes at once for new work.
		e.deliver(emulator.DeliverRequest{Subject: "Two", Text: "work again"})
		e.settled(2)
	})
}

// A receiving transaction that fails (not a wake: something that aborts
// it) costs only its own delivery a retry. On SQLite several deliveries
// may share the transaction; they are then received again one by one, and
// every message is still retained and woken for exactly once.
func TestFailedReceivingTransactionRetriesOnlyItsDelivery(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "shared", nil)
		e.waitSocket()
		// The third delivery to be received fails in its first two
		// receiving transactions.
		var mu sync.Mutex
		var victim string
		calls := map[string]int{}
		byTx := map[*sql.Tx]map[string]bool{}
		var failedIn []*sql.Tx
		inbound.SetReceiveFault(func(tx *sql.Tx, id string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[id]++
			if byTx[tx] == nil {
				byTx[tx] = map[string]bool{}
			}
			byTx[tx][id] = true
			if victim == "" && len(calls) == 3 {
				victim = id
			}
			if id == victim && calls[id] <= 2 {
				failedIn = append(failedIn, tx)
				return errors.New("injected receiving failure")
			}
			return nil
		})
		t.Cleanup(func() { inbound.SetReceiveFault(nil) })
		const n = 6
		for i := range n {
			e.deliver(emulator.DeliverRequest{From: fmt.Sprintf("sender%d@example.com", i), Subject: fmt.Sprintf("Thread %d", i)})
		}
		ds := e.settled(n)
		testkit.MustEqual(t, "tasks", len(e.tasks()), n)
		wakes := e.wakes()
		testkit.MustEqual(t, "wakes", len(wakes), n)
		keys := map[string]bool{}
		for _, r := range wakes {
			keys[r.IdempotencyKey] = true
		}
		testkit.MustEqual(t, "distinct wake keys", len(keys), n)
		mu.Lock()
		defer mu.Unlock()
		// A failure in a transaction shared with other deliveries is not
		// the delivery's own yet: it is received again alone at once, so
		// the delivery has at most as many attempts as injected failures,
		// and at least one (the failure alone).
		for _, d := range ds {
			if d.ID == victim {
				if d.Attempts < 1 || d.Attempts > len(failedIn) {
					t.Fatalf("the failed delivery: %d attempts after %d failures", d.Attempts, len(failedIn))
				}
			} else if d.Attempts != 0 {
				t.Fatalf("delivery %s: %d attempts, want 0 (only the failed one retries)", d.ID, d.Attempts)
			}
		}
		shared := 0
		for _, ids := range byTx {
			if len(ids) > 1 {
				shared++
			}
		}
		t.Logf("%d transactions received more than one delivery", shared)
	})
}

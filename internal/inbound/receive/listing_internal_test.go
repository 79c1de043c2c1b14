package receive

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
)

// A thread's later deliveries in the same batch use the listing an earlier
// one fetched when it already holds their message (one provider read per
// thread, not per delivery), a message the listing lacks makes a fresh
// read that includes it, and each delivery's own message object is the
// one in its context.
func TestThreadListingIsReadOncePerThreadInABatch(t *testing.T) {
	ctx := context.Background()
	em, err := emulator.Start(ctx, emulator.Options{APIKeys: []string{"am_listing_key"}, DeliveryDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = em.Close() })
	client, err := agentmail.New(agentmail.Options{BaseURL: em.APIURL(), APIKey: "am_listing_key"})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := client.CreateInbox(ctx, agentmail.CreateInboxRequest{Username: "listing"})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(replyTo string) *agentmail.Message {
		t.Helper()
		res, err := em.Deliver(inbox.InboxID, emulator.DeliverRequest{From: "a@example.com", Subject: "Listing", Text: "hi", InReplyTo: replyTo})
		if err != nil {
			t.Fatal(err)
		}
		m, err := client.GetMessage(ctx, inbox.InboxID, res.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		return queue.CleanMessage(m)
	}
	// reads counts the provider requests of the inbox whose path holds part.
	reads := func(part string) int {
		n := 0
		for _, r := range em.Requests("/v0/inboxes/") {
			if strings.Contains(r.Path, part) {
				n++
			}
		}
		return n
	}
	threadReads := func() int { return reads("/threads/") }
	ids := func(ms []*agentmail.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.MessageID)
		}
		return out
	}
	first := deliver("")
	second := deliver(first.MessageID)
	if first.ThreadID != second.ThreadID {
		t.Fatalf("threads %s and %s", first.ThreadID, second.ThreadID)
	}
	rv := &Receiver{}
	l := &threadListing{}
	a, err := rv.fetchThread(ctx, client, inbox.InboxID, first, l)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rv.fetchThread(ctx, client, inbox.InboxID, second, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := threadReads(); got != 1 {
		t.Fatalf("thread reads for two deliveries of one thread: %d, want 1", got)
	}
	if strings.Join(ids(a), ",") != first.MessageID+","+second.MessageID || strings.Join(ids(b), ",") != strings.Join(ids(a), ",") {
		t.Fatalf("contexts %v and %v", ids(a), ids(b))
	}
	if a[0] != first || b[1] != second {
		t.Fatal("a delivery's context does not hold its own message")
	}

	// A message newer than the kept listing is read afresh.
	third := deliver(second.MessageID)
	c, err := rv.fetchThread(ctx, client, inbox.InboxID, third, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := threadReads(); got != 2 {
		t.Fatalf("thread reads after a newer message: %d, want 2", got)
	}
	if len(c) != 3 || c[2] != third {
		t.Fatalf("context of the newer message: %v", ids(c))
	}

	// Without a kept listing every delivery reads the thread.
	if _, err := rv.fetchThread(ctx, client, inbox.InboxID, first, nil); err != nil {
		t.Fatal(err)
	}
	if got := threadReads(); got != 3 {
		t.Fatalf("thread reads without a kept listing: %d, want 3", got)
	}

	// A later delivery of the thread that was not prefetched takes its
	// message from the kept listing (no message read); one the listing
	// lacks, or of another thread, reads its message.
	messageReads := func() int { return reads("/messages/") }
	activated := time.Now().Add(-time.Hour)
	ep := domain.EmailEndpoint{Address: inbox.InboxID, ActivationAt: &activated}
	later := func(thread, msgID string) *item {
		it := &item{listing: l}
		it.d.ProviderThreadID = thread
		it.ev.Kind, it.ev.InboxID, it.ev.MessageID = agentmail.EventMessageReceived, inbox.InboxID, msgID
		return it
	}
	before := messageReads()
	in, done, err := rv.prepareReceive(ctx, ep, client, nil, later(third.ThreadID, second.MessageID))
	if err != nil || done || in.msg.MessageID != second.MessageID || in.msg.Text != second.Text {
		t.Fatalf("listed message: %+v done=%v err=%v", in.msg, done, err)
	}
	if got := messageReads() - before; got != 0 {
		t.Fatalf("message reads for a listed message: %d, want 0", got)
	}
	fourth := deliver(third.MessageID)
	before = messageReads()
	if in, _, err := rv.prepareReceive(ctx, ep, client, nil, later(third.ThreadID, fourth.MessageID)); err != nil || in.msg.MessageID != fourth.MessageID {
		t.Fatalf("unlisted message: %+v %v", in.msg, err)
	}
	if _, _, err := rv.prepareReceive(ctx, ep, client, nil, later("other-thread", second.MessageID)); err != nil {
		t.Fatal(err)
	}
	if got := messageReads() - before; got != 2 {
		t.Fatalf("message reads for an unlisted message and another thread's: %d, want 2", got)
	}
}

// Prefetch reads the message of the first delivery of each named thread
// not received yet, and of every delivery that names no thread.
func TestPrefetchReadsTheFirstMessageOfEachThread(t *testing.T) {
	mk := func(name, thread string, recorded bool) *item {
		it := &item{}
		it.d.ID, it.d.ProviderThreadID = name, thread
		if recorded {
			it.ev.IssueID = "task"
		}
		return it
	}
	failed := mk("f", "t3", false)
	failed.fetchErr = queue.ErrInboxMismatch
	items := []*item{mk("e", "t1", true), mk("a", "t1", false), mk("b", "t1", false), mk("c", "", false), mk("d", "t2", false),
		mk("c2", "", false), failed, mk("g", "t2", false)}
	var got []string
	for _, it := range toPrefetch(items) {
		got = append(got, it.d.ID)
	}
	if strings.Join(got, ",") != "a,c,d,c2" {
		t.Fatalf("prefetched %v, want a,c,d,c2", got)
	}
}

// Prefetch reads the listing of a named thread for its first delivery
// (one provider read, no message read), takes that delivery's message and
// the later ones' from it, and reads the message of a delivery whose
// event names no thread, or whose message the listing lacks.
func TestPrefetchReadsANamedThreadOnce(t *testing.T) {
	ctx := context.Background()
	em, err := emulator.Start(ctx, emulator.Options{APIKeys: []string{"am_prefetch_key"}, DeliveryDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = em.Close() })
	client, err := agentmail.New(agentmail.Options{BaseURL: em.APIURL(), APIKey: "am_prefetch_key"})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := client.CreateInbox(ctx, agentmail.CreateInboxRequest{Username: "prefetch"})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(replyTo string) (msgID, threadID string) {
		t.Helper()
		res, err := em.Deliver(inbox.InboxID, emulator.DeliverRequest{From: "a@example.com", Subject: "Prefetch", Text: "hi " + replyTo, InReplyTo: replyTo})
		if err != nil {
			t.Fatal(err)
		}
		return res.MessageID, res.ThreadID
	}
	reads := func(part string) int {
		n := 0
		for _, r := range em.Requests("/v0/inboxes/") {
			if strings.Contains(r.Path, part) {
				n++
			}
		}
		return n
	}
	first, th := deliver("")
	second, _ := deliver(first)
	lone, _ := deliver("")
	shared := &threadListing{}
	mk := func(msgID, thread string, l *threadListing) *item {
		it := &item{listing: l}
		it.d.ID, it.d.ProviderThreadID = msgID, thread
		it.ev.Kind, it.ev.InboxID, it.ev.MessageID = agentmail.EventMessageReceived, inbox.InboxID, msgID
		return it
	}
	items := []*item{mk(first, th, shared), mk(second, th, shared), mk(lone, "", nil)}
	threads0, messages0 := reads("/threads/"), reads("/messages/")
	rv := &Receiver{t: Timing{Concurrency: 4}}
	rv.prefetch(ctx, domain.EmailEndpoint{Address: inbox.InboxID}, client, items)
	if got := reads("/threads/") - threads0; got != 1 {
		t.Fatalf("thread reads: %d, want 1", got)
	}
	if got := reads("/messages/") - messages0; got != 1 {
		t.Fatalf("message reads: %d, want 1 (the delivery naming no thread)", got)
	}
	for _, it := range items {
		if it.fetchErr != nil {
			t.Fatal(it.fetchErr)
		}
	}
	if items[0].msg == nil || items[0].msg.MessageID != first || items[0].msg.Text == "" || items[2].msg == nil || items[2].msg.MessageID != lone {
		t.Fatalf("prefetched messages: %+v %+v", items[0].msg, items[2].msg)
	}
	// The later delivery of the thread finds its message in the listing.
	if m := shared.message(th, second); m == nil || m.Text != "hi "+first {
		t.Fatalf("listed later message: %+v", m)
	}
	// A thread that cannot be read is the delivery's fetch failure (its
	// receiving would need the listing anyway), retried as a failed
	// message read is.
	gone := mk(lone, "thd_missing", &threadListing{})
	rv.prefetch(ctx, domain.EmailEndpoint{Address: inbox.InboxID}, client, []*item{gone})
	if gone.fetchErr == nil || gone.msg != nil {
		t.Fatalf("unreadable thread: msg %+v err %v", gone.msg, gone.fetchErr)
	}
}

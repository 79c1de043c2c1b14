package receive

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// threadLockKey is the advisory lock that serializes one provider thread's
// transactions across replicas, even if two workers ever disagreed about
// the thread lease (belt and braces to the fence).
func threadLockKey(endpointID, threadID string) string { return "email:" + endpointID + ":" + threadID }

// processOne processes one delivery: receive (retain and decide, waking in
// the same transaction) unless that already happened, then a retry of the
// wake alone when one is still pending.
func (rv *Receiver) processOne(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, l *store.Lease, it *item) error {
	if it.fetchErr != nil {
		return it.fetchErr
	}
	if !strings.EqualFold(it.ev.InboxID, ep.Address) {
		return queue.ErrInboxMismatch
	}
	if !it.ev.TaskRecorded() {
		done, err := rv.receive(ctx, ep, client, l, it)
		if err != nil || done {
			return err
		}
	}
	if it.ev.IsWakePending() {
		return rv.retryWake(ctx, l, it)
	}
	return nil
}

// receive fetches what the transaction needs without holding locks (the
// thread's messages, their attachments) and runs receiveTx. done reports
// that the delivery is finished (filtered, a receipt, woken, kept as
// context, or already handled).
func (rv *Receiver) receive(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, l *store.Lease, it *item) (done bool, err error) {
	in, done, err := rv.prepareReceive(ctx, ep, client, l, it)
	if err != nil || done {
		return done, err
	}
	res, err := rv.receiveTx(ctx, in)
	if err != nil {
		return false, err
	}
	return rv.received(it, res)
}

// prepareReceive is receive's provider I/O: the message, the thread and
// the attachments to retain. A filtered message (or one from before the
// activation) is finished here, with done.
func (rv *Receiver) prepareReceive(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, l *store.Lease, it *item) (in receiveInput, done bool, err error) {
	// The message, cleaned: prefetched, else from the thread listing an
	// earlier delivery of this batch read, else read now.
	msg := it.msg
	if msg == nil {
		msg = it.listing.message(it.d.ProviderThreadID, it.ev.MessageID)
	}
	if msg == nil {
		if msg, err = client.GetMessage(ctx, ep.Address, it.ev.MessageID); err != nil {
			return in, false, err
		}
		msg = queue.CleanMessage(msg)
	}
	if !strings.EqualFold(msg.InboxID, ep.Address) {
		return in, false, queue.ErrInboxMismatch
	}
	received := it.ev.Kind == agentmail.EventMessageReceived
	if ep.ActivationAt == nil || (received && queue.BeforeCutoff(queue.ReceiptTime(msg), *ep.ActivationAt)) {
		return in, true, rv.finishFiltered(ctx, l, it.d.ID)
	}
	if queue.ProviderFiltered(msg) && !it.ev.Released {
		return in, true, rv.finishProviderFiltered(ctx, l, ep, it, msg, received)
	}
	if it.ev.Released {
		msg = releasedMessage(msg)
	}
	threadMsgs, err := rv.fetchThread(ctx, client, ep.Address, msg, it.listing)
	if err != nil {
		return in, false, err
	}
	prep, err := rv.prepareThread(ctx, client, ep, msg, threadMsgs, received)
	if err != nil {
		return in, false, err
	}
	return receiveInput{ep: ep, l: l, it: it, msg: msg, threadMsgs: threadMsgs, prep: prep, received: received}, false, nil
}

// received applies a committed receiving transaction's outcome to it (its
// event, the metrics, the scheduler's signal) and reports whether the
// delivery is finished. A failed wake is returned as the error: the mail
// is retained with the wake pending and the delivery goes to retry, which
// runs only the wake (retryWake), with identical arguments and no
// re-import.
func (rv *Receiver) received(it *item, res receiveResult) (done bool, err error) {
	it.ev = res.ev
	if res.handled {
		return !it.ev.IsWakePending(), nil
	}
	rv.m.Processing.Observe(time.Since(it.d.ReceivedAt).Seconds())
	if res.wakeErr != nil {
		return false, res.wakeErr
	}
	rv.m.Deliveries.WithLabelValues(string(res.state)).Inc()
	if res.quarantined != "" {
		rv.m.Quarantined.WithLabelValues(res.quarantined).Inc()
	}
	if res.woke != nil {
		rv.observeWake(*res.woke)
	}
	return true, nil
}

// finishFiltered ends a delivery the provider filtered, or one from before
// the inbox's activation, with no task and no wake.
func (rv *Receiver) finishFiltered(ctx context.Context, l *store.Lease, id string) error {
	err := rv.tx(ctx, func(tx *sql.Tx) error {
		if err := rv.fence(ctx, tx, l, ""); err != nil {
			return err
		}
		d, _, err := queue.Lock(ctx, tx, rv.st, id)
		if err != nil || queue.Finished(d) {
			return err
		}
		return rv.finishTx(ctx, tx, &d, domain.DeliveryFiltered)
	})
	if err == nil {
		rv.m.Deliveries.WithLabelValues(string(domain.DeliveryFiltered)).Inc()
	}
	return err
}

// prepareThread downloads, before any transaction (no provider I/O while
// holding locks), the attachments of the thread's messages that the
// transaction may retain: those not retained yet, and for a receipt only
// its own message.
func (rv *Receiver) prepareThread(ctx context.Context, client *agentmail.Client, ep domain.EmailEndpoint, msg *agentmail.Message,
	threadMsgs []*agentmail.Message, received bool) (map[string]*prepared, error) {
	prep := map[string]*prepared{}
	var ids []string
	for _, m := range threadMsgs {
		if len(m.Attachments) > 0 {
			ids = append(ids, m.MessageID)
		}
	}
	// The lookup only spares downloading attachments of mail already
	// retained, so a thread without attachments (the common case) skips
	// it.
	if len(ids) == 0 {
		return prep, nil
	}
	known, err := rv.st.RetainedMessageIDs(ctx, rv.q, ep.ID, ids)
	if err != nil {
		return nil, err
	}
	for _, m := range threadMsgs {
		if len(m.Attachments) == 0 || known[m.MessageID] || queue.ProviderFiltered(m) {
			continue
		}
		if !received && m.MessageID != msg.MessageID {
			continue
		}
		p, err := rv.prepareAttachments(ctx, client, ep, m)
		if err != nil {
			return nil, err
		}
		prep[m.MessageID] = p
	}
	return prep, nil
}

// receiveInput is what the receiving transaction works on.
type receiveInput struct {
	ep         domain.EmailEndpoint
	l          *store.Lease
	it         *item
	msg        *agentmail.Message
	threadMsgs []*agentmail.Message
	prep       map[string]*prepared
	received   bool
}

// receiveResult is the committed outcome of the receiving transaction.
type receiveResult struct {
	ev queue.Event
	// handled: an earlier attempt already received this delivery.
	handled bool
	// state is the delivery's state after the transaction.
	state domain.DeliveryState
	// woke is the wake recorded in the same transaction, if any.
	woke *wakeResult
	// wakeErr is the failure of that wake: the mail was committed with the
	// wake pending.
	wakeErr error
	// quarantined is the quarantine reason of a message that did not
	// become work ("" otherwise).
	quarantined string
}

// receiveTx is the receiving transaction of one delivery: the thread's
// fence with the inbox and delivery rows (fenceEndpointDelivery), then receiveBody.
func (rv *Receiver) receiveTx(ctx context.Context, in receiveInput) (receiveResult, error) {
	var r receiveResult
	err := in.it.gate.tx(ctx, rv, func(tx *sql.Tx) error {
		queue.Trace(queue.StageTxBegin, in.it.d.ID)
		cur, d, err := rv.fenceEndpointDelivery(ctx, tx, in.l, threadLockKey(in.ep.ID, in.msg.ThreadID), in.it.d.ID)
		if err != nil {
			return err
		}
		ti := &txInbox{EmailEndpoint: cur}
		if r, err = rv.receiveBody(ctx, tx, ti, d, in); err != nil {
			return err
		}
		return ti.numberTasks(ctx, rv, tx)
	})
	if err == nil {
		queue.Trace(queue.StageCommitted, in.it.d.ID)
	}
	return r, err
}

// fenceEndpointDelivery is fenceEndpointDeliveries for one delivery.
func (rv *Receiver) fenceEndpointDelivery(ctx context.Context, tx *sql.Tx, l *store.Lease, lockKey, deliveryID string) (domain.EmailEndpoint, store.EmailDelivery, error) {
	cur, ds, err := rv.fenceEndpointDeliveries(ctx, tx, l, lockKey, []string{deliveryID})
	if err != nil {
		return cur, store.EmailDelivery{}, err
	}
	return cur, ds[0], nil
}

// fenceEndpointDeliveries is fence with lockKey, the inbox row under a
// share lock and the row locks of the deliveries ids, in one round trip on
// PostgreSQL (store.Lease.FenceLockedEndpointDeliveries). A lost lease (or
// a stopping worker) is queue.ErrLeaseLost, an inbox that is not active
// queue.ErrInboxStopped.
func (rv *Receiver) fenceEndpointDeliveries(ctx context.Context, tx *sql.Tx, l *store.Lease, lockKey string, ids []string) (domain.EmailEndpoint, []store.EmailDelivery, error) {
	if rv.stopping() {
		return domain.EmailEndpoint{}, nil, queue.ErrLeaseLost
	}
	cur, ds, err := l.FenceLockedEndpointDeliveries(ctx, tx, lockKey, ids)
	if errors.Is(err, store.ErrLeaseLost) {
		return cur, nil, queue.ErrLeaseLost
	}
	if err != nil {
		return cur, nil, err
	}
	if cur.Status != domain.EndpointActive {
		return cur, nil, queue.ErrInboxStopped
	}
	return cur, ds, nil
}

// receiveBody receives one delivery inside a transaction that holds its
// thread's fence and the delivery's row lock (d being that row), cur
// being the inbox's row as of that transaction: it
// binds our own sent messages to their sends, then follows decide until
// the message is filtered, handed over as a receipt, kept as context or
// woken for. A message that wakes the agent is woken right here, before
// commit, so retention, the wake (idempotency key email:<deliveryId>) and
// the delivery's final state commit together or not at all. If the wake
// fails, only the wake is rolled back (to a savepoint) and the mail
// commits with the wake pending, for retryWake.
func (rv *Receiver) receiveBody(ctx context.Context, tx *sql.Tx, cur *txInbox, d store.EmailDelivery, in receiveInput) (r receiveResult, err error) {
	ep, it, msg := in.ep, in.it, in.msg
	receipts := rv.o.Receipts
	if f := receiveFault.Load(); f != nil {
		if err := (*f)(tx, it.d.ID); err != nil {
			return r, err
		}
	}
	ev, err := queue.Decode(d)
	if err != nil {
		return r, err
	}
	if queue.Finished(d) || ev.TaskRecorded() {
		r.ev, r.handled = ev, true
		return r, nil
	}
	if receipts != nil {
		for _, m := range in.threadMsgs {
			if queue.HasLabel(m.Labels, "sent") {
				if err := receipts.BindSent(ctx, tx, ep, m); err != nil {
					return r, err
				}
			}
		}
	}
	// The conversation, the task's status, whether one of our sends
	// produced this message and which thread messages are retained come
	// in one read (one round trip on PostgreSQL), after the sent messages
	// are bound and before anything is retained. The status is read
	// without a lock, as the reopen rule needs (see Store.IssueStatus);
	// the wake's own state guard re-reads it.
	mine := own(msg, ep.Address, false)
	if !mine {
		if mine, err = rv.claimedPublication(ctx, tx, msg); err != nil {
			return r, err
		}
	}
	if in.received && !ev.Released && !mine {
		// Paperclip's own sender check (quarantine.go), inside the
		// transaction so a release or a rules change is seen consistently.
		q := rv.senderVerdict(ctx, tx, cur, ep, msg, in.threadMsgs)
		if q.err != nil {
			return r, q.err
		}
		if q.reason != "" {
			if err := rv.quarantineTx(ctx, tx, ep, d, msg, q.reason, q.detail); err != nil {
				return r, err
			}
			r.ev, r.state, r.quarantined = ev, domain.DeliveryFiltered, q.reason
			return r, rv.finishTx(ctx, tx, &d, domain.DeliveryFiltered)
		}
	}
	tf, err := rv.st.ReadThreadFacts(ctx, tx, ep.ID, ep.CompanyID, msg.ThreadID, msg.MessageID, !mine, messageIDs(in.threadMsgs, msg))
	if err != nil {
		return r, err
	}
	conv, retained := tf.Conversation, tf.Retained
	mine = mine || tf.Published
	f := facts{receipt: !in.received, known: tf.Known, automatic: automatic(msg) && !ev.Released, own: mine, status: tf.Status}
	commentID := ""
	for {
		a := decide(f)
		switch a {
		case actReceipt:
			// A receipt of our own send: the send side applies it, and
			// the message is kept as context when its thread is known.
			if receipts != nil {
				if err := receipts.HandleReceipt(ctx, tx, ep, ev.Event, msg); err != nil {
					return r, err
				}
			}
			if f.known {
				if _, err := rv.retainAll(ctx, tx, ep, conv, []*agentmail.Message{msg}, retained, in.prep, "", ""); err != nil {
					return r, err
				}
				d.ConversationID = conv.ID
			}
			r.ev, r.state = ev, domain.DeliveryProcessed
			return r, rv.finishTx(ctx, tx, &d, domain.DeliveryProcessed)
		case actDrop:
			r.ev, r.state = ev, domain.DeliveryFiltered
			if in.received && f.automatic && !f.own {
				// Automatic mail starting a thread: kept in the quarantine.
				if err := rv.quarantineTx(ctx, tx, ep, d, msg, store.QuarantineAutomatic, automaticDetail); err != nil {
					return r, err
				}
				r.quarantined = store.QuarantineAutomatic
			}
			return r, rv.finishTx(ctx, tx, &d, domain.DeliveryFiltered)
		case actCreate:
			if conv, f.status, err = rv.createTask(ctx, tx, cur, ep, msg); err != nil {
				return r, err
			}
			if f.status == "" {
				if f.status, err = rv.st.IssueStatus(ctx, tx, conv.IssueID); err != nil {
					return r, err
				}
			}
			f.known = true
		case actRetain:
			if commentID, f.claimed, err = rv.retainAndClaim(ctx, tx, ep, conv, in, retained, d.ID); err != nil {
				return r, err
			}
			f.retained = true
		case actReopen:
			if f.status, err = rv.reopen(ctx, tx, ep, conv.IssueID); err != nil {
				return r, err
			}
			f.reopened = true
		case actKeep, actWake:
			err := rv.recordTx(ctx, tx, cur, conv, msg, &d, ev, commentID, a == actWake, &r)
			return r, err
		}
	}
}

// retainAndClaim imports every retainable message of the thread, oldest
// first, as context, linking only the trigger message to this delivery,
// and claims that message's one wake. claimed is false when another
// delivery of the same message holds the claim; commentID is the
// message's task comment either way.
func (rv *Receiver) retainAndClaim(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, conv domain.EmailConversation,
	in receiveInput, retained map[string]bool, deliveryID string) (commentID string, claimed bool, err error) {
	msg := in.msg
	commentID, err = rv.retainAll(ctx, tx, ep, conv, in.threadMsgs, retained, in.prep, msg.MessageID, deliveryID)
	if err != nil {
		return "", false, err
	}
	// A link retainAll just created is already claimed by this delivery.
	// Otherwise the message was retained before, as context of another
	// message's delivery, and this delivery claims its link now, so it
	// still wakes once.
	if commentID != "" {
		return commentID, true, nil
	}
	if commentID, claimed, err = rv.st.ClaimMessageLinkFor(ctx, tx, ep.ID, conv.ID, msg.MessageID, deliveryID); err != nil || claimed {
		return commentID, claimed, err
	}
	link, err := rv.st.MessageLink(ctx, tx, ep.ID, conv.ID, msg.MessageID)
	if err != nil {
		return "", false, err
	}
	return link.CommentID, false, nil
}

// recordTx finishes a retained message: the task and comment ids on the
// delivery, the conversation's activity (written with the delivery) and,
// for a wake, the wake itself under a savepoint (wakeInTx). When the wake
// fails the delivery stays in processing with the wake pending.
func (rv *Receiver) recordTx(ctx context.Context, tx *sql.Tx, cur *txInbox, conv domain.EmailConversation, msg *agentmail.Message,
	d *store.EmailDelivery, ev queue.Event, commentID string, wake bool, r *receiveResult) error {
	ev.IssueID, ev.CommentID = conv.IssueID, commentID
	d.ConversationID, d.ProviderThreadID = conv.ID, msg.ThreadID
	d.NextAttemptAt, d.RedactedError = nil, ""
	// The conversation's activity is written with the delivery's final
	// update (one round trip on PostgreSQL): by the wake when it succeeds,
	// else below, since a failed wake rolls its update back.
	touch := convTouch{id: conv.ID}
	if wake {
		touch.state = "active"
	}
	if wake {
		woke, wakeErr, err := rv.wakeInTx(ctx, tx, cur, *d, ev, touch)
		if err != nil {
			return err
		}
		if wakeErr == nil {
			r.ev, r.state, r.woke = woke.ev, domain.DeliveryProcessed, &woke
			return nil
		}
		r.wakeErr = wakeErr
	}
	ev.WakePending = &wake
	if err := queue.Encode(d, ev); err != nil {
		return err
	}
	r.ev = ev
	if wake {
		d.State, r.state = domain.DeliveryProcessing, domain.DeliveryProcessing
		return touch.update(ctx, rv, tx, d)
	}
	r.state = domain.DeliveryProcessed
	return rv.finishTouching(ctx, tx, d, domain.DeliveryProcessed, touch)
}

// fetchThread returns the thread's messages of this inbox, oldest first,
// following every page; the triggering message is included even if the
// thread listing lags behind it. A listing already fetched for an earlier
// delivery of the same thread in this batch (l, nil when none is kept) is
// used again when it holds msg: items of one thread are handled in order
// by one goroutine, and a listing that holds msg is one a fetch made now
// could have returned, so each delivery sees its message in context, as
// before, for one provider read per thread rather than per delivery.
func (rv *Receiver) fetchThread(ctx context.Context, client *agentmail.Client, inbox string, msg *agentmail.Message, l *threadListing) ([]*agentmail.Message, error) {
	if l != nil && l.threadID == msg.ThreadID {
		if out, found := withMessage(l.msgs, msg); found {
			return out, nil
		}
	}
	listing, err := rv.listThread(ctx, client, inbox, msg.ThreadID)
	if err != nil {
		return nil, err
	}
	if l != nil {
		l.threadID, l.msgs = msg.ThreadID, listing
	}
	out, _ := withMessage(listing, msg)
	return out, nil
}

// withMessage returns a copy of listing with msg in its place (appended
// when listing lacks it, found false).
func withMessage(listing []*agentmail.Message, msg *agentmail.Message) (out []*agentmail.Message, found bool) {
	out = make([]*agentmail.Message, 0, len(listing)+1)
	for _, m := range listing {
		if m.MessageID == msg.MessageID {
			m, found = msg, true
		}
		out = append(out, m)
	}
	if !found {
		out = append(out, msg)
	}
	return out, found
}

// listThread reads every page of the provider thread: its messages of this
// inbox, cleaned, each once, oldest first.
func (rv *Receiver) listThread(ctx context.Context, client *agentmail.Client, inbox, threadID string) ([]*agentmail.Message, error) {
	var out []*agentmail.Message
	seen := map[string]bool{}
	token := ""
	for range 100 {
		t, err := client.GetThread(ctx, inbox, threadID, agentmail.ThreadParams{Limit: 100, PageToken: token})
		if err != nil {
			return nil, err
		}
		for i := range t.Messages {
			m := queue.CleanMessage(&t.Messages[i])
			if !strings.EqualFold(m.InboxID, inbox) || seen[m.MessageID] {
				continue
			}
			seen[m.MessageID] = true
			out = append(out, m)
		}
		if t.NextPageToken == "" {
			break
		}
		token = t.NextPageToken
	}
	return out, nil
}

// threadListing keeps the last listing of one provider thread for the
// later deliveries of that thread in the same batch. It is used by one
// goroutine at a time (a thread's items run in order); a nil listing keeps
// nothing.
type threadListing struct {
	threadID string
	msgs     []*agentmail.Message
}

// message returns the message id in l's listing of provider thread
// threadID, or nil when l is nil, lists another thread or lacks it. A listed message
// is the provider's full message, read by a REST call of this batch, as
// authoritative as a message read (and cleaned by listThread).
func (l *threadListing) message(threadID, id string) *agentmail.Message {
	if l == nil || threadID == "" || l.threadID != threadID {
		return nil
	}
	for _, m := range l.msgs {
		if m.MessageID == id {
			return m
		}
	}
	return nil
}

// claimedPublication reports whether msg is the provider message of the
// publication its header names. The header is forgeable and only picks
// the row to compare; the provider message id recorded when our send was
// accepted decides, so an outside sender copying a publication id it saw
// in our mail is still a sender. When it says no, ReadThreadFacts asks
// whether any send of the company's inboxes produced this provider
// message id (a provider or relay may drop our header).
func (rv *Receiver) claimedPublication(ctx context.Context, tx *sql.Tx, msg *agentmail.Message) (bool, error) {
	id, ok := publicationClaim(msg)
	if msg.MessageID == "" || !ok {
		return false, nil
	}
	p, err := rv.st.GetPublication(ctx, tx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && p.ProviderMessageID == msg.MessageID, err
}

// messageIDs are the provider ids of the thread's messages and of msg.
func messageIDs(thread []*agentmail.Message, msg *agentmail.Message) []string {
	ids := make([]string, 0, len(thread)+1)
	for _, m := range thread {
		ids = append(ids, m.MessageID)
	}
	return append(ids, msg.MessageID)
}

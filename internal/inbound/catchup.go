package inbound

import (
	"context"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// catchup scans the inbox for mail the transports missed (docs/email-pipeline.md, "Catch-up"),
// under the inbox's catch-up lease so replicas do not scan together, or,
// for a WebSocket inbox whose socket this process runs, under that socket's
// lease (only the socket holder scans such an inbox, so the scan needs no
// lease of its own; a socket not yet subscribed may fail any moment, so
// its inbox is scanned under the catch-up lease). It
// starts from the receipt-time checkpoint minus the overlap (never before
// the activation cutoff), reads every page of message metadata (AgentMail
// orders by the sender's Date header, so new mail can appear on any page)
// and admits each eligible message it has not admitted yet. It never
// imports mailbox history: anything received before activation is skipped.
// It reports whether a scan ran to completion (or had nothing to do), and
// when not, whether that is because another replica holds the catch-up
// lease (busy) rather than a failure. The scan's record (checkpoint,
// last_sync_at) is written at its end (finishCatchup).
func (w *Worker) catchup(ctx context.Context, st *inboxState, ep domain.EmailEndpoint, key string) (completed, busy bool) {
	if ep.ActivationAt == nil {
		return true, false
	}
	var l *store.Lease
	w.mu.Lock()
	if s := w.sockets[ep.ID]; ep.ReceiveMode == domain.ReceiveWebSocket && s != nil && s.running && s.connected {
		l = s.lease
	}
	w.mu.Unlock()
	if l == nil {
		cl, _, err := w.st.TryLease(ctx, w.q, ep.CompanyID, ep.ID, store.LeaseKeyCatchup, w.o.Holder, w.t.SocketLeaseTTL)
		if err != nil || cl == nil {
			if err != nil && ctx.Err() == nil {
				w.log.Warn("acquire catch-up lease", "endpoint", ep.ID, "err", err)
			}
			return false, err == nil
		}
		w.workLeases.Add(1) // renewLoop keeps it while the scan runs
		defer w.workLeases.Add(-1)
		defer func() { _ = cl.Release(ctx) }()
		l = cl
	}
	activation := *ep.ActivationAt
	after := activation
	if ep.SyncCheckpoint != nil {
		if t := ep.SyncCheckpoint.Add(-w.t.CatchupOverlap); t.After(after) {
			after = t
		}
	}
	scanStarted := w.st.Now()
	client := w.o.Client.WithAPIKey(key)
	admitted, err := w.scan(ctx, ep, client, activation, after, l)
	if err != nil {
		if ctx.Err() == nil && !w.stopping.Load() {
			w.log.Warn("catch-up scan", "endpoint", ep.ID, "err", queue.Redact(err))
			w.setHealth(ctx, ep.ID, queue.GenericFailure, queue.Redact(err))
		}
		return false, false
	}
	if w.stopping.Load() || ctx.Err() != nil {
		return false, false
	}
	w.finishCatchup(ctx, st, ep.ID, scanStarted)
	w.log.Debug("catch-up scan finished", "endpoint", ep.ID, "admitted", admitted)
	w.mu.Lock()
	healthy := ep.ReceiveMode == domain.ReceiveWebhook || w.socketConnectedLocked(ep.ID)
	known := st.health == healthConnected
	w.mu.Unlock()
	if !healthy || known {
		return true, false
	}
	retrying, err := w.st.CountDeliveriesInState(ctx, w.q, ep.ID, domain.DeliveryRetry)
	if err != nil {
		return true, false
	}
	if retrying == 0 {
		w.setHealth(ctx, ep.ID, healthConnected, "")
	}
	return true, false
}

// scan reads every page after the cutoff and admits what no transport
// admitted yet; it returns how many events it admitted.
func (w *Worker) scan(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, activation, after time.Time, l *store.Lease) (int, error) {
	admitted := 0
	pageToken := ""
	for range 10_000 {
		// Mail the provider filtered is listed too: it is admitted and
		// quarantined with its reason, so nothing is dropped without a trace.
		page, err := client.ListMessages(ctx, ep.Address, agentmail.ListMessagesParams{Limit: 100, Ascending: true, PageToken: pageToken,
			IncludeSpam: true, IncludeBlocked: true, IncludeUnauthenticated: true})
		if err != nil {
			return admitted, err
		}
		var cands []agentmail.MessageItem
		var kinds, keys []string
		for _, it := range page.Messages {
			if !it.CreatedAt.IsZero() && queue.BeforeCutoff(it.CreatedAt, after) {
				continue
			}
			if queue.HasLabel(it.Labels, "trash") {
				continue
			}
			for _, kind := range catchupKinds(it.Labels) {
				cands = append(cands, it)
				kinds = append(kinds, kind)
				keys = append(keys, kind+":"+it.MessageID)
			}
		}
		if len(cands) > 0 {
			seen, err := w.st.ExistingDeduplicationKeys(ctx, w.q, ep.ID, keys)
			if err != nil {
				return admitted, err
			}
			for i, it := range cands {
				if seen[keys[i]] {
					continue
				}
				receipt := it.CreatedAt
				if receipt.IsZero() {
					// Without a receipt time in the listing, the full message
					// decides (its created_at, else its Date).
					m, err := client.GetMessage(ctx, ep.Address, it.MessageID)
					if err != nil {
						return admitted, err
					}
					m = queue.CleanMessage(m)
					if queue.HasLabel(m.Labels, "trash") {
						continue
					}
					receipt = queue.ReceiptTime(m)
				}
				if queue.BeforeCutoff(receipt, activation) {
					continue
				}
				ev := agentmail.Event{Kind: kinds[i], InboxID: ep.Address, MessageID: it.MessageID, ThreadID: it.ThreadID,
					Labels: it.Labels, Timestamp: it.Timestamp, CreatedAt: it.CreatedAt}
				ok, err := w.AdmitEvent(ctx, ep, ev, queue.SourceCatchup)
				if err != nil {
					return admitted, err
				}
				if ok {
					admitted++
				}
			}
		}
		// Keep the scan's lease alive on long mailboxes; a lost lease means
		// another replica scans now, so stop without recording progress.
		held, err := w.keepScanLease(ctx, ep.ID, l)
		if err != nil {
			return admitted, err
		}
		if !held {
			return admitted, queue.ErrLeaseLost
		}
		if page.NextPageToken == "" || w.stopping.Load() {
			return admitted, nil
		}
		pageToken = page.NextPageToken
	}
	return admitted, nil
}

// receiptLabels maps the system labels the provider adds to a sent message
// as its delivery receipts arrive to the receipt event kinds.
var receiptLabels = []struct{ label, kind string }{
	{"delivered", agentmail.EventMessageDelivered},
	{"bounced", agentmail.EventMessageBounced},
	{"complained", agentmail.EventMessageComplained},
	{"rejected", agentmail.EventMessageRejected},
}

// catchupKinds are the synthetic events of a scanned message: for our own
// sent mail a message.sent receipt plus one receipt per receipt label,
// for everything else message.received.
//
// Why the labels: AgentMail does not replay events a live connection
// missed, and a receipt is an event about a message the scan has usually
// admitted already, so without them a receipt emitted while the socket was
// down (between a drop and the reconnect, or before the first subscription)
// would never be applied and the send would stay "sent" for ever. A receipt
// rebuilt this way has no bounce type or recipients: it settles the send's
// outcome but suppresses no recipient.
func catchupKinds(labels []string) []string {
	if !queue.HasLabel(labels, "sent") {
		return []string{agentmail.EventMessageReceived}
	}
	kinds := []string{agentmail.EventMessageSent}
	for _, r := range receiptLabels {
		if queue.HasLabel(labels, r.label) {
			kinds = append(kinds, r.kind)
		}
	}
	return kinds
}

// keepScanLease renews a catch-up lease after each page. A scan under this
// process's running socket lease needs no statement: renewLoop keeps that
// lease, and closing the socket (a lost lease) stops the scan.
func (w *Worker) keepScanLease(ctx context.Context, endpointID string, l *store.Lease) (bool, error) {
	if l.Key == store.LeaseKeySocket {
		w.mu.Lock()
		s := w.sockets[endpointID]
		held := s != nil && s.running && s.lease == l
		w.mu.Unlock()
		return held, nil
	}
	return l.Renew(ctx)
}

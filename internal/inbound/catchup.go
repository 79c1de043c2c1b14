package inbound

import (
	"context"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// catchup scans the inbox for mail the transports missed (reference §5.8),
// under the inbox's catch-up lease so replicas do not scan together. It
// starts from the receipt-time checkpoint minus the overlap (never before
// the activation cutoff), reads every page of message metadata (AgentMail
// orders by the sender's Date header, so new mail can appear on any page)
// and admits each eligible message it has not admitted yet. It never
// imports mailbox history: anything received before activation is skipped.
func (w *Worker) catchup(ctx context.Context, ep domain.EmailEndpoint, key string) {
	if ep.ActivationAt == nil {
		return
	}
	token := w.o.Holder + ":" + store.NewID()
	ok, err := w.st.AcquireLease(ctx, w.q, ep.CompanyID, ep.ID, email.LeaseCatchup, token, w.o.Holder, w.t.SocketLeaseTTL)
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			w.log.Warn("inbound: acquire catch-up lease", "endpoint", ep.ID, "err", err)
		}
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = w.st.ReleaseLease(rctx, w.q, ep.ID, email.LeaseCatchup, token)
	}()
	activation := *ep.ActivationAt
	after := activation
	if ep.SyncCheckpoint != nil {
		if t := ep.SyncCheckpoint.Add(-w.t.CatchupOverlap); t.After(after) {
			after = t
		}
	}
	scanStarted := w.st.Now()
	client := w.o.Client.WithAPIKey(key)
	if err := w.scan(ctx, ep, client, activation, after, token); err != nil {
		if ctx.Err() == nil && !w.stopping.Load() {
			w.log.Warn("inbound: catch-up scan", "endpoint", ep.ID, "err", redact(err))
			_ = w.st.SetEndpointHealth(ctx, w.q, ep.ID, genericFailure, redact(err))
		}
		return
	}
	if w.stopping.Load() || ctx.Err() != nil {
		return
	}
	if err := w.st.FinishCatchup(ctx, w.q, ep.ID, scanStarted); err != nil {
		w.log.Warn("inbound: record catch-up", "endpoint", ep.ID, "err", err)
		return
	}
	retrying, err := w.st.CountDeliveriesInState(ctx, w.q, ep.ID, store.DeliveryRetry)
	if err != nil {
		return
	}
	healthy := ep.ReceiveMode == domain.ReceiveWebhook || w.SocketConnected(ep.ID)
	if retrying == 0 && healthy {
		_ = w.st.SetEndpointHealth(ctx, w.q, ep.ID, healthConnected, "")
	}
}

func (w *Worker) scan(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, activation, after time.Time, token string) error {
	pageToken := ""
	for range 10_000 {
		page, err := client.ListMessages(ctx, ep.Address, agentmail.ListMessagesParams{Limit: 100, Ascending: true, PageToken: pageToken})
		if err != nil {
			return err
		}
		var cands []agentmail.MessageItem
		var keys []string
		for _, it := range page.Messages {
			if !it.CreatedAt.IsZero() && beforeCutoff(it.CreatedAt, after) {
				continue
			}
			if labelsFiltered(it.Labels) {
				continue
			}
			cands = append(cands, it)
			keys = append(keys, catchupKind(it.Labels)+":"+it.MessageID)
		}
		if len(cands) > 0 {
			seen, err := w.st.ExistingDeduplicationKeys(ctx, w.q, ep.ID, keys)
			if err != nil {
				return err
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
						return err
					}
					if providerFiltered(m) {
						continue
					}
					receipt = receiptTime(m)
				}
				if beforeCutoff(receipt, activation) {
					continue
				}
				kind := catchupKind(it.Labels)
				ev := agentmail.Event{Kind: kind, InboxID: ep.Address, MessageID: it.MessageID, ThreadID: it.ThreadID,
					Labels: it.Labels, Timestamp: it.Timestamp, CreatedAt: it.CreatedAt}
				if _, err := w.AdmitEvent(ctx, ep, ev, SourceCatchup); err != nil {
					return err
				}
			}
		}
		// Keep the scan's lease alive on long mailboxes; a lost lease means
		// another replica scans now, so stop without recording progress.
		held, err := w.st.RenewLease(ctx, w.q, ep.ID, email.LeaseCatchup, token, w.t.SocketLeaseTTL)
		if err != nil {
			return err
		}
		if !held {
			return errLeaseLost
		}
		if page.NextPageToken == "" || w.stopping.Load() {
			return nil
		}
		pageToken = page.NextPageToken
	}
	return nil
}

// catchupKind is the synthetic event kind of a scanned message: our own
// sent mail is a message.sent receipt, everything else message.received.
func catchupKind(labels []string) string {
	if hasLabel(labels, "sent") {
		return agentmail.EventMessageSent
	}
	return agentmail.EventMessageReceived
}

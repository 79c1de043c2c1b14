package qualify

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// reply sends an explicit reply to m through Paperclip's send API with
// board authority and waits for the provider's delivery receipt.
func (r *runner) reply(ctx context.Context, mode string, m *Inbound) (*Reply, string, error) {
	replyAll := false
	p, err := r.api.Send(ctx, r.companyID, outbound.SendRequest{EndpointID: r.endpointID, ConversationID: m.ConversationID,
		ReplyToMessageID: m.ProviderMessageID, ReplyAll: &replyAll, IdempotencyKey: randomID(),
		Text: "Live qualification reply (" + r.rep.RunID + ", " + mode + "). No action needed."})
	if err != nil {
		return nil, "", err
	}
	accepted := p.CreatedAt.UTC()
	rep := &Reply{Mode: mode, PublicationID: p.ID, SendID: p.ID, Outcome: string(p.Outcome), AcceptedAt: &accepted}
	r.rep.Replies = append(r.rep.Replies, rep)
	err = r.waitFor(ctx, "the reply's delivery receipt", func(ctx context.Context) (bool, error) {
		if p, err = r.api.SendStatus(ctx, r.companyID, p.ID); err != nil {
			return false, err
		}
		rep.Outcome = string(p.Outcome)
		if p.ProviderMessageID != nil {
			rep.ProviderMessageID = *p.ProviderMessageID
		}
		if p.SentAt != nil {
			t := p.SentAt.UTC()
			rep.SentAt = &t
		}
		if p.DeliveredAt != nil {
			t := p.DeliveredAt.UTC()
			rep.DeliveredAt = &t
		}
		// "uncertain" is not final: the worker retries with the same
		// idempotency key, and the timeout reports it if it stays.
		switch p.Outcome {
		case "delivered":
			return true, nil
		case "failed":
			msg := ""
			if p.Error != nil {
				msg = ": " + *p.Error
			}
			return false, failf("the reply ended %s%s", p.Outcome, msg)
		}
		return false, nil
	})
	rep.AcceptedToSentMs, rep.SentToDeliveredMs = between(rep.AcceptedAt, rep.SentAt), between(rep.SentAt, rep.DeliveredAt)
	if err != nil {
		if rep.Outcome != "" && !strings.Contains(err.Error(), "ended") {
			err = failf("%v; outcome %s", err, rep.Outcome)
			if p.Error != nil {
				err = failf("%v (last error: %s)", err, *p.Error)
			}
		}
		return rep, "", err
	}
	return rep, fmt.Sprintf("publication %s delivered as %s; accepted → sent %s, sent → delivered %s", p.ID, rep.ProviderMessageID,
		fmtMs(rep.AcceptedToSentMs), fmtMs(rep.SentToDeliveredMs)), nil
}

// sameID compares Message-IDs with or without angle brackets.
func sameID(a, b string) bool {
	trim := func(s string) string { return strings.Trim(strings.TrimSpace(s), "<>") }
	return trim(a) != "" && strings.EqualFold(trim(a), trim(b))
}

// threading checks, with the key, that the provider put the reply in the
// inbound message's thread with In-Reply-To set, and that the recipient
// got it in the same conversation.
func (r *runner) threading(ctx context.Context, m *Inbound, rep *Reply) (string, error) {
	sent, err := r.prov.GetMessage(ctx, r.address, rep.ProviderMessageID)
	if err != nil {
		return "", failf("read the reply from the provider: %s", agentmail.Describe(err))
	}
	rep.ProviderThreadID, rep.InReplyTo = sent.ThreadID, sent.InReplyTo
	if m.ProviderThreadID == "" {
		in, err := r.prov.GetMessage(ctx, r.address, m.ProviderMessageID)
		if err != nil {
			return "", failf("read the received message from the provider: %s", agentmail.Describe(err))
		}
		m.ProviderThreadID = in.ThreadID
	}
	if sent.ThreadID != m.ProviderThreadID {
		return "", failf("the reply is in provider thread %s, the received message in %s", sent.ThreadID, m.ProviderThreadID)
	}
	if !sameID(sent.InReplyTo, m.ProviderMessageID) {
		return "", failf("the reply's In-Reply-To is %q, want %q", sent.InReplyTo, m.ProviderMessageID)
	}
	detail := fmt.Sprintf("reply in thread %s with In-Reply-To %s", sent.ThreadID, m.ProviderMessageID)
	switch r.rep.InboundPath {
	case "provider":
		// The recipient is an inbox of the key: its copy must join the
		// conversation the test message started there.
		var got *agentmail.Message
		err := r.waitFor(ctx, "the reply in the recipient's inbox", func(ctx context.Context) (bool, error) {
			msg, err := r.prov.GetMessage(ctx, r.o.Recipient, rep.ProviderMessageID)
			if err != nil {
				return false, fmt.Errorf("%s", agentmail.Describe(err))
			}
			got = msg
			return true, nil
		})
		if err != nil {
			return "", err
		}
		orig, err := r.prov.GetMessage(ctx, r.o.Recipient, m.ProviderMessageID)
		if err != nil {
			return "", failf("read the test message in the recipient's inbox: %s", agentmail.Describe(err))
		}
		if got.ThreadID != orig.ThreadID {
			return "", failf("the recipient got the reply in thread %s, the test message is in %s", got.ThreadID, orig.ThreadID)
		}
		detail += fmt.Sprintf("; the recipient has it in its thread %s", got.ThreadID)
	case "emulator":
		var found bool
		err := r.waitFor(ctx, "the reply in the emulator's outbox", func(ctx context.Context) (bool, error) {
			msgs, err := r.emu.outbox(ctx, r.o.Recipient)
			if err != nil {
				return false, err
			}
			for _, o := range msgs {
				if sameID(o.MessageID, rep.ProviderMessageID) {
					found = sameID(o.InReplyTo, m.ProviderMessageID)
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return "", err
		}
		if !found {
			return "", failf("the mail that left for %s does not carry In-Reply-To %s", r.o.Recipient, m.ProviderMessageID)
		}
		detail += "; the mail that left for the recipient carries it"
	default:
		detail += "; check that the reply shows in the same conversation at " + r.o.Recipient
	}
	return detail, nil
}

// cleanup removes the inbox connection (the server deletes the webhook and
// the runtime key it created), checks with the key that no registration
// of this run is left at the provider, and retires the agent. The
// provider inbox stays.
func (r *runner) cleanup(ctx context.Context) {
	if r.agentID == "" && r.endpointID == "" {
		r.skip("cleanup", "nothing was created")
		return
	}
	r.do(ctx, "cleanup", func(ctx context.Context) (string, error) {
		var parts []string
		var problems []string
		if r.endpointID != "" {
			if err := r.control(ctx, "remove"); err != nil {
				problems = append(problems, "remove the inbox connection: "+err.Error())
			} else {
				if ep, err := r.api.Inbox(ctx, r.endpointID); err != nil {
					problems = append(problems, err.Error())
				} else if ep.Status != "archived" {
					problems = append(problems, "the inbox connection is "+ep.Status+", not archived")
				} else if ep.LastError != nil && *ep.LastError != "" {
					problems = append(problems, "the server could not remove its provider registrations: "+*ep.LastError)
				} else {
					parts = append(parts, "inbox connection removed")
				}
			}
			if r.before != nil {
				left, err := r.leftovers(ctx)
				switch {
				case err != nil:
					problems = append(problems, err.Error())
				case left != "":
					problems = append(problems, left)
				default:
					parts = append(parts, "no webhook or runtime key of this run left at the provider")
				}
			}
			parts = append(parts, "provider inbox "+r.address+" left in place")
		}
		if r.agentID != "" {
			terminated := domain.AgentTerminated
			if _, err := r.api.PatchAgent(ctx, r.agentID, apiclient.AgentInput{Status: &terminated}); err != nil {
				problems = append(problems, "retire the agent: "+err.Error())
			} else {
				parts = append(parts, "agent retired")
			}
		}
		if len(problems) > 0 {
			return "", failf("%s", strings.Join(problems, "; "))
		}
		return strings.Join(parts, "; "), nil
	})
}

// leftovers lists provider registrations on the inbox that were not there
// before the run.
func (r *runner) leftovers(ctx context.Context) (string, error) {
	after, err := r.registrations(ctx, r.address)
	if err != nil {
		return "", err
	}
	var left []string
	for id := range after.webhooks {
		if !r.before.webhooks[id] {
			left = append(left, "webhook "+id)
		}
	}
	for id := range after.keys {
		if !r.before.keys[id] {
			left = append(left, "API key "+id)
		}
	}
	if after.keysHidden || r.before.keysHidden {
		r.note("The key may not list the inbox's API keys, so the runtime key's removal was checked by the server only.")
	}
	if len(left) == 0 {
		return "", nil
	}
	sort.Strings(left)
	return "left at the provider: " + strings.Join(left, ", "), nil
}

// recheck counts tasks and wakes again at the end: a late duplicate (a
// redelivery, a catch-up after a reconnect) would show here.
func (r *runner) recheck(ctx context.Context) {
	var seen []*Inbound
	for _, m := range r.rep.Inbound {
		if m.TaskID != "" {
			seen = append(seen, m)
		}
	}
	if len(seen) == 0 {
		r.skip("recheck", "no message was received")
		return
	}
	r.do(ctx, "recheck", func(ctx context.Context) (string, error) {
		for _, m := range seen {
			tasks, err := r.tasksFor(ctx, m.Subject)
			if err != nil {
				return "", err
			}
			wakes, err := r.wakesFor(ctx, m.TaskID)
			if err != nil {
				return "", err
			}
			if len(tasks) != 1 || len(wakes) != 1 {
				return "", failf("%s: %d task(s), %d wake(s)", m.Subject, len(tasks), len(wakes))
			}
		}
		return fmt.Sprintf("%d message(s): one task and one wake each", len(seen)), nil
	})
}

package qualify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// inspectKey asks the server (not the provider) what the key reaches, so
// the key is checked exactly as setup will use it, and decides which inbox
// is qualified and how test mail reaches it.
func (r *runner) inspectKey(ctx context.Context) (string, error) {
	res, err := r.api.Inspect(ctx, r.companyID, r.o.APIKey)
	if err != nil {
		return "", err
	}
	r.rep.KeyScope = res.Scope
	visible := map[string]bool{}
	for _, in := range res.Inboxes {
		visible[strings.ToLower(in.InboxID)] = true
	}
	switch {
	case r.o.Inbox != "":
		if !visible[r.o.Inbox] {
			return "", failf("the key cannot reach inbox %s", r.o.Inbox)
		}
		r.address = r.o.Inbox
	case res.Scope == agentmail.ScopeInbox && len(res.Inboxes) == 1:
		r.address = strings.ToLower(res.Inboxes[0].InboxID)
	}
	if r.address != "" && r.address == r.o.Recipient {
		return "", failf("the recipient must not be the inbox under test: mail from an inbox's own address never wakes its agent")
	}
	switch {
	case visible[r.o.Recipient]:
		r.rep.InboundPath = "provider"
	case r.emu != nil:
		r.rep.InboundPath = "emulator"
	default:
		r.rep.InboundPath = "manual"
	}
	if r.address != "" {
		before, err := r.registrations(ctx, r.address)
		if err != nil {
			return "", err
		}
		r.before = before
	}
	target := r.address
	if target == "" {
		target = "a new inbox " + r.username() + "@agentmail.to"
	}
	return fmt.Sprintf("%s-scoped key reaching %d inbox(es); qualifying %s; test mail: %s", res.Scope, len(res.Inboxes), target, r.rep.InboundPath), nil
}

func (r *runner) username() string {
	if r.o.Username != "" {
		return r.o.Username
	}
	return "paperclip-qualify-" + r.short
}

// registrations are an inbox's provider webhooks and inbox API keys (by id).
type registrations struct {
	webhooks map[string]bool
	keys     map[string]bool
	// keysHidden is set when the key may not list inbox keys.
	keysHidden bool
}

// maxRegistrationPages bounds the pages read from one listing: an inbox
// with more than this many pages of webhooks or keys (100 a page) is not
// one a qualification run should be pointed at.
const maxRegistrationPages = 50

// registrations reads every page of the inbox's webhooks and API keys, so
// a registration of this run is found wherever the provider lists it.
func (r *runner) registrations(ctx context.Context, inbox string) (*registrations, error) {
	out := &registrations{webhooks: map[string]bool{}, keys: map[string]bool{}}
	err := eachPage("the inbox's webhooks", func(token string) (string, error) {
		whs, err := r.prov.ListInboxWebhooks(ctx, inbox, agentmail.ListParams{Limit: 100, PageToken: token})
		if err != nil {
			return "", fmt.Errorf("list the inbox's webhooks: %s", agentmail.Describe(err))
		}
		for _, w := range whs.Webhooks {
			out.webhooks[w.WebhookID] = true
		}
		return whs.NextPageToken, nil
	})
	if err != nil {
		return nil, err
	}
	err = eachPage("the inbox's API keys", func(token string) (string, error) {
		var keys struct {
			APIKeys []struct {
				APIKeyID string `json:"api_key_id"`
			} `json:"api_keys"`
			NextPageToken string `json:"next_page_token"`
		}
		q := url.Values{"limit": {"100"}}
		if token != "" {
			q.Set("page_token", token)
		}
		if err := r.prov.Do(ctx, "GET", "/inboxes/"+url.PathEscape(inbox)+"/api-keys", q, nil, &keys); err != nil {
			return "", errKeysHidden
		}
		for _, k := range keys.APIKeys {
			out.keys[k.APIKeyID] = true
		}
		return keys.NextPageToken, nil
	})
	switch {
	case err == errKeysHidden && len(out.keys) == 0:
		// The key may not list inbox keys (a narrower scope).
		out.keysHidden = true
	case err == errKeysHidden:
		return nil, errors.New("list the inbox's API keys: a later page was refused")
	case err != nil:
		return nil, err
	}
	return out, nil
}

// errKeysHidden is a refused API key listing.
var errKeysHidden = errors.New("the key may not list the inbox's API keys")

// eachPage calls page with each page token in turn (first ""), until a
// page has no next token. A provider that repeats a token or never ends
// is an error, not an endless loop.
func eachPage(what string, page func(token string) (next string, err error)) error {
	seen := map[string]bool{}
	token := ""
	for range maxRegistrationPages {
		next, err := page(token)
		if err != nil || next == "" {
			return err
		}
		if seen[next] {
			return fmt.Errorf("list %s: the provider repeated page token %q", what, next)
		}
		seen[next] = true
		token = next
	}
	return fmt.Errorf("list %s: more than %d pages", what, maxRegistrationPages)
}

// qualifyMode runs one mode's steps; the first mode sets the inbox up,
// later ones switch it with the reconnect API.
func (r *runner) qualifyMode(ctx context.Context, mode string, first bool) {
	skipRest := func(why string, ids ...string) {
		for _, id := range ids {
			r.skip(mode+"."+id, why)
		}
	}
	if !r.do(ctx, mode+".connect", func(ctx context.Context) (string, error) { return r.connect(ctx, mode, first) }) {
		skipRest("the inbox is not receiving", "receive", "reply", "threading", "reconnect", "interrupt")
		return
	}
	var got *Inbound
	if r.do(ctx, mode+".receive", func(ctx context.Context) (string, error) {
		m, detail, err := r.receiveOne(ctx, mode, "receive", mode)
		got = m
		return detail, err
	}) {
		var rep *Reply
		if r.do(ctx, mode+".reply", func(ctx context.Context) (string, error) {
			var detail string
			var err error
			rep, detail, err = r.reply(ctx, mode, got)
			return detail, err
		}) {
			r.do(ctx, mode+".threading", func(ctx context.Context) (string, error) { return r.threading(ctx, got, rep) })
		} else {
			skipRest("the reply was not delivered", "threading")
		}
	} else {
		skipRest("nothing was received", "reply", "threading")
	}
	r.do(ctx, mode+".reconnect", func(ctx context.Context) (string, error) { return r.reconnect(ctx, mode) })
	r.do(ctx, mode+".interrupt", func(ctx context.Context) (string, error) { return r.interrupt(ctx, mode) })
}

// connect sets the inbox up (first mode) or switches its receive mode,
// then waits until it receives.
func (r *runner) connect(ctx context.Context, mode string, first bool) (string, error) {
	var ep domain.EmailEndpointSummary
	var err error
	if first || r.endpointID == "" {
		in := email.SetupInput{AssignedAgentID: r.agentID, APIKey: r.o.APIKey, ReceiveMode: mode, IdempotencyKey: randomID()}
		if r.address != "" {
			in.InboxID = r.address
		} else {
			in.Username = r.username()
		}
		if ep, err = r.api.SetupInbox(ctx, r.companyID, in); err != nil {
			return "", err
		}
		r.endpointID, r.rep.EndpointID = ep.ID, ep.ID
		if r.address == "" {
			r.rep.InboxCreated = true
			r.before = &registrations{webhooks: map[string]bool{}, keys: map[string]bool{}}
		}
		r.address, r.rep.Inbox = strings.ToLower(address(ep)), strings.ToLower(address(ep))
	} else if ep, err = r.api.ReconnectInbox(ctx, r.endpointID, email.ReconnectInput{APIKey: r.o.APIKey, ReceiveMode: mode}); err != nil {
		return "", err
	}
	if ep.Status != "active" || ep.ReceiveMode != mode {
		return "", failf("the inbox is %s in %s mode, want active in %s mode", ep.Status, ep.ReceiveMode, mode)
	}
	how, err := r.awaitReceiving(ctx, mode)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s active in %s mode; %s", r.address, mode, how), nil
}

// awaitReceiving waits until the inbox's first catch-up scan has run and,
// in WebSocket mode, its live connection listens: the emulator says when
// it is subscribed; against a real account the settle time stands in.
func (r *runner) awaitReceiving(ctx context.Context, mode string) (string, error) {
	start := time.Now()
	err := r.waitFor(ctx, "the inbox's first catch-up scan", func(ctx context.Context) (bool, error) {
		ep, err := r.api.Inbox(ctx, r.endpointID)
		if err != nil {
			return false, err
		}
		if ep.Status != "active" {
			return false, failf("the inbox became %s (%s)", ep.Status, ep.HealthMessage)
		}
		return ep.LastSyncAt != nil, nil
	})
	if err != nil {
		return "", err
	}
	if mode != ModeWebSocket {
		return fmt.Sprintf("caught up after %.1fs", time.Since(start).Seconds()), nil
	}
	if r.emu == nil {
		time.Sleep(r.o.Settle)
		return fmt.Sprintf("caught up, then allowed %s for the live connection to subscribe", r.o.Settle), nil
	}
	if err := r.waitSubscribed(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("live connection subscribed after %.1fs", time.Since(start).Seconds()), nil
}

// lastSync is the inbox's last finished catch-up scan (nil before the
// first).
func (r *runner) lastSync(ctx context.Context) (*time.Time, error) {
	ep, err := r.api.Inbox(ctx, r.endpointID)
	if err != nil {
		return nil, err
	}
	return ep.LastSyncAt, nil
}

func (r *runner) waitSubscribed(ctx context.Context) error {
	return r.waitFor(ctx, "a subscribed live connection (the emulator reports none)", func(ctx context.Context) (bool, error) {
		n, err := r.emu.subscribed(ctx, r.address)
		return n > 0, err
	})
}

// receiveOne sends one test message and checks that it makes exactly one
// task and one wake and was admitted by one of the wanted sources.
func (r *runner) receiveOne(ctx context.Context, mode, step string, sources ...string) (*Inbound, string, error) {
	m, err := r.sendInbound(ctx, mode, step)
	if err != nil {
		return m, "", err
	}
	if err := r.awaitAdmission(ctx, m); err != nil {
		return m, "", err
	}
	if !contains(sources, m.Source) {
		return m, "", failf("message %s was admitted by %s, want %s", m.ProviderMessageID, m.Source, strings.Join(sources, " or "))
	}
	return m, fmt.Sprintf("task %s; admitted by %s; transit %s, admission → wake %s, wake → run start %s", m.TaskID, m.Source,
		fmtMs(m.TransitMs), fmtMs(m.AdmissionToWakeMs), fmtMs(m.WakeToRunStartMs)), nil
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// sendInbound makes one test message arrive at the inbox from the
// recipient and records it in the report.
func (r *runner) sendInbound(ctx context.Context, mode, step string) (*Inbound, error) {
	subject := fmt.Sprintf("Paperclip qualification %s %s %s", r.short, mode, step)
	text := fmt.Sprintf("Live qualification %s: %s, step %s. Sent by paperclipai email qualify.", r.rep.RunID, mode, step)
	now := time.Now().UTC()
	m := &Inbound{Mode: mode, Step: step, Subject: subject, SentAt: &now}
	r.rep.Inbound = append(r.rep.Inbound, m)
	switch r.rep.InboundPath {
	case "provider":
		res, err := r.prov.SendMessage(ctx, r.o.Recipient, agentmail.SendMessageRequest{To: []string{r.address}, Subject: subject, Text: text}, randomID())
		if err != nil {
			return m, failf("send the test message from %s: %s", r.o.Recipient, agentmail.Describe(err))
		}
		m.ProviderMessageID = res.MessageID
	case "emulator":
		res, err := r.emu.deliver(ctx, r.address, deliverRequest{From: r.o.Recipient, Subject: subject, Text: text})
		if err != nil {
			return m, err
		}
		m.ProviderMessageID = res.MessageID
	default:
		r.o.Progress.Note(fmt.Sprintf("Send an email now from %s to %s with the subject %q (waiting up to %s).",
			r.o.Recipient, r.address, subject, r.o.Timeout))
		// The key reads the inbox: the provider says when the mail is in.
		err := r.waitFor(ctx, "the provider to receive "+quote(subject), func(ctx context.Context) (bool, error) {
			page, err := r.prov.ListMessages(ctx, r.address, agentmail.ListMessagesParams{Limit: 50})
			if err != nil {
				return false, fmt.Errorf("list the inbox: %s", agentmail.Describe(err))
			}
			for _, it := range page.Messages {
				if strings.Contains(it.Subject, subject) && !contains(it.Labels, "sent") {
					// The sender's Date header: the only send time there is.
					sent := it.Timestamp.UTC()
					m.ProviderMessageID, m.SentAt = it.MessageID, &sent
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return m, err
		}
	}
	return m, nil
}

// awaitAdmission waits for the message's task, delivery and wake, and
// checks there is exactly one task and one wake.
func (r *runner) awaitAdmission(ctx context.Context, m *Inbound) error {
	token := m.Subject
	err := r.waitFor(ctx, "a task for "+quote(token), func(ctx context.Context) (bool, error) {
		tasks, err := r.tasksFor(ctx, token)
		if err != nil || len(tasks) == 0 {
			return false, err
		}
		if len(tasks) > 1 {
			return false, failf("%d tasks for one message", len(tasks))
		}
		m.TaskID = tasks[0].ID
		return true, nil
	})
	if err != nil {
		return err
	}
	err = r.waitFor(ctx, "the message's processed delivery", func(ctx context.Context) (bool, error) {
		th, err := r.api.Thread(ctx, r.companyID, m.TaskID)
		if err != nil || th == nil {
			return false, err
		}
		m.ConversationID = th.ConversationID
		if m.ProviderMessageID == "" {
			for _, tm := range th.Messages {
				if tm.Direction == "inbound" {
					m.ProviderMessageID = tm.ProviderMessageID
					break
				}
			}
		}
		ds, err := r.api.TaskDeliveries(ctx, r.companyID, m.TaskID)
		if err != nil {
			return false, err
		}
		for _, d := range ds {
			if d.EventKind != "message.received" || d.ProviderMessageID != m.ProviderMessageID {
				continue
			}
			m.DeliveryID, m.Source, m.ProviderThreadID = d.ID, d.Source, d.ProviderThreadID
			rec := d.ReceivedAt.UTC()
			m.ReceivedAt, m.AdmissionToWakeMs, m.TransitMs = &rec, d.AdmissionToWakeMs, between(m.SentAt, &rec)
			return d.State == "processed" && d.AdmissionToWakeMs != nil, nil
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return r.waitFor(ctx, "the wake's run to start", func(ctx context.Context) (bool, error) {
		wakes, err := r.wakesFor(ctx, m.TaskID)
		if err != nil || len(wakes) == 0 {
			return false, err
		}
		if len(wakes) > 1 {
			return false, failf("%d wakes for one message", len(wakes))
		}
		w := wakes[0]
		if w.Status == "refused" {
			return false, failf("the wake was refused: %s", w.RefusalReason)
		}
		created := w.CreatedAt.UTC()
		m.RunID, m.WakeRequestedAt = w.ID, &created
		if w.StartedAt == nil {
			return false, nil
		}
		started := w.StartedAt.UTC()
		m.RunStartedAt, m.WakeToRunStartMs = &started, between(&created, &started)
		return true, nil
	})
}

func quote(s string) string { return `"` + s + `"` }

// tasksFor lists the qualification agent's email tasks whose title holds token.
func (r *runner) tasksFor(ctx context.Context, token string) ([]domain.Issue, error) {
	// The newest 200: a qualification's tasks are the company's latest.
	q := url.Values{"assigneeAgentId": {r.agentID}, "originKind": {"chat_channel"}, "limit": {"200"}}
	all, _, err := r.api.Issues(r.companyID).Page(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []domain.Issue
	for _, t := range all {
		if strings.Contains(t.Title, token) {
			out = append(out, t)
		}
	}
	return out, nil
}

// wakesFor lists the email wakes of a task.
func (r *runner) wakesFor(ctx context.Context, taskID string) ([]domain.Run, error) {
	q := url.Values{"agentId": {r.agentID}, "issueId": {taskID}, "limit": {"200"}}
	runs, _, err := r.api.Runs(r.companyID).Page(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []domain.Run
	for _, w := range runs {
		if w.WakeReason == "email_received" {
			out = append(out, w)
		}
	}
	return out, nil
}

// reconnect drops the live connection (emulator, WebSocket mode) or
// reconnects the inbox through the API, then checks live receiving.
func (r *runner) reconnect(ctx context.Context, mode string) (string, error) {
	how := "reconnected through the API (the receive path and runtime key are replaced)"
	if r.emu != nil && mode == ModeWebSocket {
		synced, err := r.lastSync(ctx)
		if err != nil {
			return "", err
		}
		if err := r.emu.dropSockets(ctx); err != nil {
			return "", err
		}
		how = "the emulator dropped the live connection"
		if err := r.waitSubscribed(ctx); err != nil {
			return "", err
		}
		// Every (re)connect is followed by a catch-up scan. Mail sent while
		// that scan runs may be admitted by it before the socket pushes it,
		// which would not show that live receiving came back: wait until
		// the scan is over.
		if err := r.waitFor(ctx, "the catch-up scan after the reconnect", func(ctx context.Context) (bool, error) {
			now, err := r.lastSync(ctx)
			return now != nil && (synced == nil || now.After(*synced)), err
		}); err != nil {
			return "", err
		}
	} else {
		if err := r.inboxAction(ctx, "reconnect", func(ctx context.Context) error {
			_, err := r.api.ReconnectInbox(ctx, r.endpointID, email.ReconnectInput{APIKey: r.o.APIKey, ReceiveMode: mode})
			return err
		}); err != nil {
			return "", err
		}
		if _, err := r.awaitReceiving(ctx, mode); err != nil {
			return "", err
		}
	}
	_, detail, err := r.receiveOne(ctx, mode, "reconnect", mode)
	if err != nil {
		return "", err
	}
	return how + "; then " + detail, nil
}

// interrupt stops receiving, sends mail meanwhile and checks that it is
// caught up, once, when receiving resumes.
func (r *runner) interrupt(ctx context.Context, mode string) (string, error) {
	if r.emu != nil && mode == ModeWebSocket {
		return r.interruptByDrop(ctx, mode)
	}
	return r.interruptByPause(ctx, mode)
}

// interruptByDrop refuses new WebSocket handshakes, drops the live
// connection and sends mail while none can connect; when handshakes are
// allowed again, the reconnect must catch the message up.
func (r *runner) interruptByDrop(ctx context.Context, mode string) (string, error) {
	fault, err := r.emu.refuseSockets(ctx)
	if err != nil {
		return "", err
	}
	removed := false
	defer func() {
		if !removed {
			_ = r.emu.removeFault(context.WithoutCancel(ctx), fault)
		}
	}()
	if err := r.emu.dropSockets(ctx); err != nil {
		return "", err
	}
	m, err := r.sendInbound(ctx, mode, "interrupt")
	if err != nil {
		return "", err
	}
	if err := r.emu.removeFault(ctx, fault); err != nil {
		return "", err
	}
	removed = true
	if err := r.awaitAdmission(ctx, m); err != nil {
		return "", err
	}
	if m.Source != "catchup" {
		return "", failf("message %s was admitted by %s while no connection was possible, want catchup", m.ProviderMessageID, m.Source)
	}
	return fmt.Sprintf("socket dropped and refused while mail arrived; caught up into task %s (admission → wake %s)", m.TaskID, fmtMs(m.AdmissionToWakeMs)), nil
}

// interruptByPause pauses the inbox, sends mail, checks no task appears
// while paused, resumes and checks the catch-up.
func (r *runner) interruptByPause(ctx context.Context, mode string) (string, error) {
	if err := r.control(ctx, "pause"); err != nil {
		return "", err
	}
	m, err := r.sendInbound(ctx, mode, "interrupt")
	if err != nil {
		_ = r.control(context.WithoutCancel(ctx), "resume")
		return "", err
	}
	// Watch the paused inbox: the mail must not start work yet.
	time.Sleep(r.o.Quiet)
	tasks, err := r.tasksFor(ctx, m.Subject)
	if err != nil {
		_ = r.control(context.WithoutCancel(ctx), "resume")
		return "", err
	}
	if len(tasks) > 0 {
		_ = r.control(context.WithoutCancel(ctx), "resume")
		return "", failf("mail sent while the inbox was paused made a task before resume")
	}
	if err := r.control(ctx, "resume"); err != nil {
		return "", err
	}
	if err := r.awaitAdmission(ctx, m); err != nil {
		return "", err
	}
	// A webhook redelivery after resume may admit the message before the
	// scan does; both are a catch-up of the interruption.
	want := []string{"catchup"}
	if mode == ModeWebhook {
		want = append(want, ModeWebhook)
	}
	if !contains(want, m.Source) {
		return "", failf("message %s was admitted by %s after the pause, want %s", m.ProviderMessageID, m.Source, strings.Join(want, " or "))
	}
	return fmt.Sprintf("paused, no task for %s; after resume admitted by %s into task %s", r.o.Quiet, m.Source, m.TaskID), nil
}

// control runs an inbox control action (see inboxAction).
func (r *runner) control(ctx context.Context, action string) error {
	return r.inboxAction(ctx, action, func(ctx context.Context) error {
		_, err := r.api.ControlInbox(ctx, r.endpointID, action)
		return err
	})
}

// inboxAction runs call (a control action or a reconnect of the inbox),
// retrying while another email operation, a catch-up scan say, holds the
// inbox (409 "retry shortly").
func (r *runner) inboxAction(ctx context.Context, what string, call func(context.Context) error) error {
	return r.waitFor(ctx, "the inbox to "+what, func(ctx context.Context) (bool, error) {
		err := call(ctx)
		if statusOf(err) == 409 {
			return false, err
		}
		if err != nil {
			return false, failf("%v", err)
		}
		return true, nil
	})
}

package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// The task email view: on a task bound to an email conversation the
// timeline shows received and sent emails as cards (in place of the system
// comments that carry their text for agents), sends that have no provider
// message yet as send-intent cards, and each send's outcome; managers can
// resolve an uncertain send. Email text is only ever escaped plain text:
// the API returns no HTML bodies, and nothing here converts provider data
// to template.HTML.

// taskEmailView is what the task page shows of its email conversation.
type taskEmailView struct {
	// Disabled: email connections are turned off, the history is hidden.
	Disabled bool
	Thread   outbound.ThreadSummary
	Address  string
	// InboxLink is the inbox settings page (managers), else empty.
	InboxLink string
	InboxNote string
	Emails    int
	Sends     int
	StartedBy string
	Cancelled bool
	Active    bool
	Items     []taskEmailItem
	Poll      int
	Base, CID string
	Counts    string
	// Pending counts sends not out yet (queued, retrying or uncertain): a
	// task can be Done while its reply still waits.
	Pending      int
	PendingText  string
	HasInbound   bool
	CanResolve   bool
	ResolveState *taskResolveState
}

// taskEmailItem is one timeline entry: a comment, an email card or a send
// intent.
type taskEmailItem struct {
	at      time.Time
	Comment *domain.Comment
	Author  string
	Email   *taskEmailCard
	Intent  *taskEmailSend
}

// taskEmailCard is one retained email.
type taskEmailCard struct {
	outbound.ThreadMessage
	Inbound     bool
	Kind        string
	ShowFull    bool
	Attachments []taskEmailAttachment
	Send        *taskEmailSend
}

// taskEmailAttachment is one of an email's attachments (a download link, or
// "unavailable" when the task has no such attachment).
type taskEmailAttachment struct {
	ID, Filename, ContentType string
	Size                      int64
	Missing                   bool
}

// taskEmailSend is one send with its outcome presentation.
type taskEmailSend struct {
	outbound.SendSummary
	Req         outbound.SendRequest
	Reply       bool
	ReplyAll    bool
	ReplyTo     string
	Subject     string
	RequestedBy string
	RunID       string
	Label       string
	Tone        string
	Text        string
	LastError   string
	// Suppressed is set for a send refused because a recipient is
	// suppressed: the view links to the company's suppressed recipients.
	Suppressed bool
	Steps      []taskEmailStep
	Terminal   bool
	Uncertain  bool
	// Retrying: the worker still owns the send after a failed attempt;
	// RetryLine says "Retrying · attempt 3 · next in 4 s". Resolution is
	// offered only once retries stopped (Uncertain and not Retrying).
	Retrying  bool
	RetryLine string
	// Resolve is the re-render state when the last resolve of this send failed.
	Resolve *taskResolveState
}

// taskEmailStep is one step of the Queued → Sent → Delivered stepper.
type taskEmailStep struct {
	Label   string
	Done    bool
	Current bool
}

// taskResolveState keeps a failed resolve's input and error for the
// re-rendered page.
type taskResolveState struct {
	PID       string
	Outcome   string
	MessageID string
	Checked   bool
	Err       *APIError
	// Retry offers "Try again" (the send's thread was busy).
	Retry bool
}

// taskEmailLoader returns the API reads the task page needs for its email
// view (run in parallel with the page's others) and a finish step that
// builds the view once they are done. finish reports false when it already
// answered with an error page.
func (u *UI) taskEmailLoader(c *rc, t domain.Issue, d *taskData, frag string) (loads []func(), finish func() bool) {
	if !isEmailTask(t) || (frag != "" && frag != "task-timeline" && frag != "task-email" && frag != "task-header") {
		return nil, func() bool { return true }
	}
	var th *outbound.ThreadSummary
	var thErr, attErr *APIError
	var atts []domain.Attachment
	loads = append(loads, func() {
		thErr = into(c, &th)(c.cl().Thread(c.ctx(), c.cid, t.ID))
	})
	if frag == "task-timeline" {
		// The full page reads the attachments anyway; the fragment needs
		// them for the email cards' download links.
		loads = append(loads, func() { attErr = all(c, c.cl().Attachments(t.ID), nil, &atts) })
	}
	finish = func() bool {
		if thErr != nil {
			if thErr.Status == http.StatusForbidden && thErr.Code == "email_connections_disabled" {
				d.EmailView = &taskEmailView{Disabled: true, Base: d.Base, CID: c.cid}
				return true
			}
			c.fail(thErr)
			return false
		}
		if attErr != nil {
			c.fail(attErr)
			return false
		}
		if th == nil {
			return true
		}
		if frag != "task-timeline" {
			atts = d.Attachments
		}
		v := u.buildTaskEmail(c, t, d, *th, atts)
		d.EmailView = v
		if v.Active {
			d.TimelinePoll = u.pollInterval(3000)
		}
		if d.Resolve != nil && d.Resolve.Err != nil {
			// The page shows a failed resolve next to its form: polling
			// would replace the region and lose the message and the input.
			d.TimelinePoll = 0
		}
		v.Poll = d.TimelinePoll
		return true
	}
	return loads, finish
}

func (u *UI) buildTaskEmail(c *rc, t domain.Issue, d *taskData, th outbound.ThreadSummary, atts []domain.Attachment) *taskEmailView {
	v := &taskEmailView{Thread: th, Base: d.Base, CID: c.cid, CanResolve: c.caps.Manager, ResolveState: d.Resolve,
		Emails: len(th.Messages), Sends: len(th.Publications), Cancelled: t.Status == domain.IssueCancelled}
	v.Counts = plural(v.Emails, "email", "emails") + " · " + plural(v.Sends, "send", "sends")
	if th.Endpoint.Address != nil {
		v.Address = *th.Endpoint.Address
	}
	if c.caps.Manager {
		v.InboxLink = fmt.Sprintf("/c/%s/apps/agentmail/inboxes/%s/settings", c.cid, th.Endpoint.ID)
	}
	if note, ok := taskEmailInboxNotes[th.Endpoint.Status]; ok {
		v.InboxNote = note
	}
	attIdx := map[string]domain.Attachment{}
	for _, a := range atts {
		attIdx[a.ID] = a
	}
	byProviderID := map[string]outbound.ThreadMessage{}
	for _, m := range th.Messages {
		if m.ProviderMessageID != "" {
			byProviderID[m.ProviderMessageID] = m
		}
	}
	sends := map[string]*taskEmailSend{}
	var intents []*taskEmailSend
	for _, p := range th.Publications {
		s := u.taskEmailSend(d, p, byProviderID)
		if d.Resolve != nil && d.Resolve.PID == p.ID {
			s.Resolve = d.Resolve
		}
		switch p.Outcome {
		case domain.OutcomeQueued, domain.OutcomeSent, domain.OutcomeUncertain:
			v.Active = true
		}
		if p.Outcome == domain.OutcomeQueued || p.Outcome == domain.OutcomeUncertain {
			v.Pending++
		}
		if p.ProviderMessageID != nil {
			if m, ok := byProviderID[*p.ProviderMessageID]; ok && m.Direction == "outbound" {
				sends[m.ProviderMessageID] = s
				continue
			}
		}
		// Not bound to a retained email yet: a send intent (until the sent
		// message arrives, after which the email card carries the outcome).
		intents = append(intents, s)
	}
	if v.Pending > 0 {
		v.PendingText = plural(v.Pending, "email is", "emails are") + " not sent yet."
	}
	if strings.HasPrefix(t.OriginID, "email-send:") {
		key := strings.TrimPrefix(t.OriginID, "email-send:")
		for _, p := range th.Publications {
			if p.ID != key {
				continue
			}
			var req outbound.SendRequest
			_ = json.Unmarshal(p.Request, &req)
			to := strings.Join(req.To, ", ")
			if t.CreatedByAgentID != "" {
				v.StartedBy = fmt.Sprintf("Started by %s with an email to %s", d.AgentIdx.Name(t.CreatedByAgentID), to)
			} else {
				v.StartedBy = "Started with an email to " + to
			}
		}
	}

	// The timeline: comments in order, except that a message's system
	// comment is replaced by the message's card; messages without a
	// comment at their timestamp; intents when they were accepted.
	cards := map[string]*taskEmailCard{}
	var loose []*taskEmailCard
	for _, m := range th.Messages {
		card := &taskEmailCard{ThreadMessage: m, Inbound: m.Direction != "outbound", Kind: taskEmailReceived,
			ShowFull: m.FullText != "" && m.FullText != m.Text, Send: sends[m.ProviderMessageID]}
		if !card.Inbound {
			card.Kind = taskEmailSent
		} else {
			v.HasInbound = true
		}
		for _, id := range m.AttachmentIDs {
			if a, ok := attIdx[id]; ok {
				card.Attachments = append(card.Attachments, taskEmailAttachment{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType, Size: a.SizeBytes})
			} else {
				card.Attachments = append(card.Attachments, taskEmailAttachment{ID: id, Missing: true})
			}
		}
		if m.CommentID != nil {
			cards[*m.CommentID] = card
		} else {
			loose = append(loose, card)
		}
	}
	for i := range d.Comments {
		cm := d.Comments[i]
		if card, ok := cards[cm.ID]; ok {
			v.Items = append(v.Items, taskEmailItem{at: cm.CreatedAt, Email: card})
			delete(cards, cm.ID)
			continue
		}
		v.Items = append(v.Items, taskEmailItem{at: cm.CreatedAt, Comment: &cm, Author: d.Author(cm)})
	}
	// A card whose comment is not in the list (say, the list was cut)
	// still shows, at its own time.
	for _, card := range cards {
		loose = append(loose, card)
	}
	for _, card := range loose {
		v.Items = append(v.Items, taskEmailItem{at: card.Timestamp, Email: card})
	}
	for _, s := range intents {
		v.Items = append(v.Items, taskEmailItem{at: s.CreatedAt, Intent: s})
	}
	sort.SliceStable(v.Items, func(i, j int) bool { return v.Items[i].at.Before(v.Items[j].at) })
	return v
}

// taskEmailSend presents one send: who asked, to whom, and its outcome.
func (u *UI) taskEmailSend(d *taskData, p outbound.SendSummary, byProviderID map[string]outbound.ThreadMessage) *taskEmailSend {
	s := &taskEmailSend{SendSummary: p, Label: taskEmailOutcomeLabels[p.Outcome], Tone: taskEmailOutcomeTones[p.Outcome],
		Text: taskEmailOutcomeText[p.Outcome], Uncertain: p.Outcome == domain.OutcomeUncertain}
	if s.Label == "" {
		s.Label, s.Tone = string(p.Outcome), "gray"
	}
	_ = json.Unmarshal(p.Request, &s.Req)
	s.Reply = s.Req.ConversationID != ""
	s.ReplyAll = s.Req.ReplyAll != nil && *s.Req.ReplyAll
	if s.Req.Subject != nil {
		s.Subject = *s.Req.Subject
	}
	if s.Reply {
		if m, ok := byProviderID[s.Req.ReplyToMessageID]; ok {
			s.ReplyTo = m.From
			if len(m.ReplyTo) > 0 {
				s.ReplyTo = strings.Join(m.ReplyTo, ", ")
			}
		}
	}
	if a := p.RequestedBy.AgentID; a != nil {
		s.RequestedBy = d.AgentIdx.Name(*a)
		if p.RequestedBy.RunID != nil {
			s.RunID = *p.RequestedBy.RunID
		}
	} else if uid := p.RequestedBy.UserID; uid != nil {
		s.RequestedBy = "a board user"
		if n, ok := d.Authors[*uid]; ok {
			s.RequestedBy = n
		}
	}
	sent := p.SentAt != nil
	switch p.Outcome {
	case domain.OutcomeQueued:
		s.Steps = []taskEmailStep{{Label: "Queued", Current: true}, {Label: "Sent"}, {Label: "Delivered"}}
	case domain.OutcomeSent:
		s.Steps = []taskEmailStep{{Label: "Queued", Done: true}, {Label: "Sent", Current: true}, {Label: "Delivered"}}
	case domain.OutcomeDelivered:
		s.Steps = []taskEmailStep{{Label: "Queued", Done: true}, {Label: "Sent", Done: true}, {Label: "Delivered", Done: true, Current: true}}
	case domain.OutcomeAwaitingReview:
		// Held by the inbox's send policy: a person approves it first.
		s.Terminal = true
		s.Steps = []taskEmailStep{}
		s.Text = "A person must approve this email before it is sent."
	default:
		// Failed and uncertain replace the remaining steps with their badge.
		s.Terminal = true
		s.Steps = []taskEmailStep{{Label: "Queued", Done: true}}
		if sent {
			s.Steps = append(s.Steps, taskEmailStep{Label: "Sent", Done: true})
		}
	}
	// Retrying only after an attempt failed (it left its error): the
	// first attempt, in flight, is still just Queued.
	if (p.Outcome == domain.OutcomeUncertain || p.Outcome == domain.OutcomeQueued) && p.Retrying && p.Attempts > 0 && p.Error != nil {
		s.Retrying, s.Uncertain = true, false
		s.Label, s.Tone, s.Text = taskEmailRetrying, "amber", taskEmailRetryingText
		s.RetryLine = retryLine(p.Attempts, p.NextAttemptAt, time.Now())
		// Not terminal: the send is still on its way to Sent.
		s.Terminal = false
		s.Steps = []taskEmailStep{{Label: "Queued", Current: true}, {Label: "Sent"}, {Label: "Delivered"}}
	}
	if p.Error != nil {
		if p.Outcome == domain.OutcomeFailed {
			s.Text = *p.Error
			s.Suppressed = p.ErrorCode != nil && *p.ErrorCode == outbound.CodeRecipientSuppressed
		} else if p.Outcome != domain.OutcomeSent && p.Outcome != domain.OutcomeDelivered {
			s.LastError = *p.Error
		}
	}
	return s
}

// retryLine spells a retrying send's progress: "Retrying · attempt 3 ·
// next in 4 s" ("next attempt now" once it is due).
func retryLine(attempts int, next *time.Time, now time.Time) string {
	line := fmt.Sprintf("%s · attempt %d", taskEmailRetrying, attempts)
	if next == nil {
		return line
	}
	if d := next.Sub(now); d > 0 {
		return line + fmt.Sprintf(" · next in %d s", int((d+time.Second-1)/time.Second))
	}
	return line + " · next attempt now"
}

// resolveDelivery settles an uncertain send after the operator checked
// AgentMail: "sent" with the provider message that proves it, or "not
// sent" after an explicit confirmation (irreversible: a resend is a new
// explicit action by the agent).
func (u *UI) resolveDelivery(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	pid, ok := c.requirePathID("pid")
	if !ok {
		return
	}
	// The send must belong to this task (the API checks the company).
	cur, err := c.cl().SendStatus(c.ctx(), c.cid, pid)
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	if cur.IssueID != t.ID {
		c.notFound()
		return
	}
	rs := &taskResolveState{PID: pid, Outcome: c.form("outcome"), MessageID: strings.TrimSpace(c.form("providerMessageId")),
		Checked: c.form("checked") == "on"}
	again := func(status int, msg string) {
		rs.Err = &APIError{Status: status, Message: msg}
		u.renderTask(c, status, t, taskData{CommentWake: true, Resolve: rs})
	}
	body := outbound.ResolveInput{Outcome: domain.SendOutcome(rs.Outcome)}
	switch rs.Outcome {
	case "sent":
		if len(rs.MessageID) > 998 {
			again(http.StatusBadRequest, taskEmailResolveBadID)
			return
		}
		body.ProviderMessageID = rs.MessageID
	case "failed":
		if !rs.Checked {
			again(http.StatusBadRequest, taskEmailResolveNeedBox)
			return
		}
	default:
		again(http.StatusBadRequest, "Choose Confirm sent or Confirm not sent.")
		return
	}
	// Resolving "sent" asks AgentMail for the message: finish it even if
	// the browser goes away (the result is visible on the next visit).
	ctx, cancel := context.WithTimeout(acting(context.WithoutCancel(c.r.Context()), c.actor), 150*time.Second)
	defer cancel()
	_, err = c.cl().Resolve(ctx, c.cid, pid, body)
	if e := uiError(err); e != nil {
		if e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		rs.Err = e
		rs.Retry = e.Status == http.StatusConflict && strings.Contains(e.Message, "retry")
		u.renderTask(c, e.Status, t, taskData{CommentWake: true, Resolve: rs})
		return
	}
	flash := flashDeliverySent
	if rs.Outcome == "failed" {
		flash = flashDeliveryNotSent
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s#task-timeline", c.cid, t.ID), flash)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

package qualify

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Step statuses.
const (
	StatusPending = "pending"
	StatusRunning = "running"
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// Step is one checklist item and its result.
type Step struct {
	// ID is stable for machines: "preflight.server", "websocket.receive", …
	ID string `json:"id"`
	// Mode is the transport mode the step belongs to ("" for preflight
	// and cleanup).
	Mode       string     `json:"mode,omitempty"`
	Title      string     `json:"title"`
	Status     string     `json:"status"`
	Detail     string     `json:"detail,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	DurationMs *int64     `json:"durationMs,omitempty"`
}

// Inbound is one test message received by the inbox, with its provider
// identifiers and stage timestamps. Durations are in milliseconds; a nil
// duration was not measurable.
type Inbound struct {
	Mode              string `json:"mode"`
	Step              string `json:"step"`
	Subject           string `json:"subject"`
	ProviderMessageID string `json:"providerMessageId,omitempty"`
	ProviderThreadID  string `json:"providerThreadId,omitempty"`
	TaskID            string `json:"taskId,omitempty"`
	ConversationID    string `json:"conversationId,omitempty"`
	DeliveryID        string `json:"deliveryId,omitempty"`
	// Source is how Paperclip admitted the message: websocket, webhook
	// or catchup.
	Source string `json:"source,omitempty"`
	RunID  string `json:"runId,omitempty"`
	// SentAt is this machine's clock when the message was handed to the
	// provider (or, for a manual send, when the operator was asked).
	SentAt *time.Time `json:"sentAt,omitempty"`
	// ReceivedAt is the durable admission time (the delivery's
	// received_at), WakeRequestedAt the run's creation, RunStartedAt its
	// start: server clock.
	ReceivedAt        *time.Time `json:"receivedAt,omitempty"`
	WakeRequestedAt   *time.Time `json:"wakeRequestedAt,omitempty"`
	RunStartedAt      *time.Time `json:"runStartedAt,omitempty"`
	TransitMs         *int64     `json:"transitMs,omitempty"`
	AdmissionToWakeMs *int64     `json:"admissionToWakeMs,omitempty"`
	WakeToRunStartMs  *int64     `json:"wakeToRunStartMs,omitempty"`
}

// Reply is one explicit reply sent through Paperclip and its outcome.
type Reply struct {
	Mode              string     `json:"mode"`
	PublicationID     string     `json:"publicationId"`
	SendID            string     `json:"sendId"` // PublicationID under its new name
	Outcome           string     `json:"outcome"`
	ProviderMessageID string     `json:"providerMessageId,omitempty"`
	ProviderThreadID  string     `json:"providerThreadId,omitempty"`
	InReplyTo         string     `json:"inReplyTo,omitempty"`
	AcceptedAt        *time.Time `json:"acceptedAt,omitempty"`
	SentAt            *time.Time `json:"sentAt,omitempty"`
	DeliveredAt       *time.Time `json:"deliveredAt,omitempty"`
	AcceptedToSentMs  *int64     `json:"acceptedToSentMs,omitempty"`
	SentToDeliveredMs *int64     `json:"sentToDeliveredMs,omitempty"`
}

// Report is the qualification record: every step's result, the provider
// identifiers and the stage timings. It never holds a credential.
type Report struct {
	RunID      string    `json:"runId"`
	Passed     bool      `json:"passed"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Server     string    `json:"server"`
	// Provider is "emulator" or "agentmail"; ProviderURL its REST base.
	Provider    string `json:"provider"`
	ProviderURL string `json:"providerUrl"`
	KeyScope    string `json:"keyScope,omitempty"`
	CompanyID   string `json:"companyId,omitempty"`
	AgentID     string `json:"agentId,omitempty"`
	EndpointID  string `json:"endpointId,omitempty"`
	Inbox       string `json:"inbox,omitempty"`
	// InboxCreated says the provider inbox was created by this run (it is
	// left in place either way).
	InboxCreated bool   `json:"inboxCreated"`
	Recipient    string `json:"recipient"`
	// InboundPath is how test mail reaches the inbox: "provider" (sent by
	// the key from the recipient's own AgentMail inbox), "emulator" (the
	// emulator's deliver endpoint) or "manual" (the operator sends it).
	InboundPath string     `json:"inboundPath,omitempty"`
	Modes       []string   `json:"modes"`
	Steps       []*Step    `json:"steps"`
	Inbound     []*Inbound `json:"inbound"`
	Replies     []*Reply   `json:"replies"`
	Notes       []string   `json:"notes"`
}

func ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}

func between(from, to *time.Time) *int64 {
	if from == nil || to == nil {
		return nil
	}
	return ms(to.Sub(*from))
}

func fmtMs(v *int64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%d ms", *v)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// cell escapes a Markdown table cell.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// Markdown writes the report for people.
func (r *Report) Markdown(w io.Writer) error {
	var b strings.Builder
	result := "PASS"
	if !r.Passed {
		result = "FAIL"
	}
	fmt.Fprintf(&b, "# Email live qualification: %s\n\n", result)
	fmt.Fprintf(&b, "| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| Run | %s |\n", code(r.RunID))
	fmt.Fprintf(&b, "| Started | %s |\n| Finished | %s |\n", fmtTime(&r.StartedAt), fmtTime(&r.FinishedAt))
	fmt.Fprintf(&b, "| Server | %s |\n", cell(r.Server))
	fmt.Fprintf(&b, "| Provider | %s (%s) |\n", cell(r.Provider), cell(r.ProviderURL))
	fmt.Fprintf(&b, "| Key scope | %s |\n", cell(r.KeyScope))
	created := "attached"
	if r.InboxCreated {
		created = "created by this run"
	}
	fmt.Fprintf(&b, "| Inbox | %s (%s; left in place) |\n", code(r.Inbox), created)
	fmt.Fprintf(&b, "| Recipient | %s |\n", code(r.Recipient))
	fmt.Fprintf(&b, "| Test mail | %s |\n", cell(r.InboundPath))
	fmt.Fprintf(&b, "| Modes | %s |\n", cell(strings.Join(r.Modes, ", ")))
	fmt.Fprintf(&b, "| Company / agent / inbox connection | %s / %s / %s |\n\n", code(r.CompanyID), code(r.AgentID), code(r.EndpointID))

	b.WriteString("## Steps\n\n| Step | Result | Time | Detail |\n| --- | --- | --- | --- |\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(s.Title), strings.ToUpper(s.Status), fmtMs(s.DurationMs), cell(s.Detail))
	}

	b.WriteString("\n## Received messages\n\n")
	b.WriteString("Provider transit is sent → `received_at` (this machine's clock against the server's); " +
		"admission → wake and wake → run start are measured on the server.\n\n")
	b.WriteString("| Mode | Step | Provider message id | Provider thread id | Admitted by | Sent | Received (`received_at`) | Transit | Admission → wake | Wake → run start |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, m := range r.Inbound {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(m.Mode), cell(m.Step), code(m.ProviderMessageID),
			code(m.ProviderThreadID), cell(m.Source), fmtTime(m.SentAt), fmtTime(m.ReceivedAt), fmtMs(m.TransitMs),
			fmtMs(m.AdmissionToWakeMs), fmtMs(m.WakeToRunStartMs))
	}

	b.WriteString("\n## Replies\n\n")
	b.WriteString("| Mode | Publication | Outcome | Provider message id | Provider thread id | In-Reply-To | Accepted | Accepted → sent | Sent → delivered |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range r.Replies {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(p.Mode), code(p.PublicationID), cell(p.Outcome),
			code(p.ProviderMessageID), code(p.ProviderThreadID), code(p.InReplyTo), fmtTime(p.AcceptedAt),
			fmtMs(p.AcceptedToSentMs), fmtMs(p.SentToDeliveredMs))
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n, "\n", " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Table writes the closing pass/fail table in plain text.
func (r *Report) Table(w io.Writer) error {
	width := 0
	for _, s := range r.Steps {
		width = max(width, len([]rune(s.Title)))
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, s := range r.Steps {
		pad := strings.Repeat(" ", width-len([]rune(s.Title)))
		line := fmt.Sprintf("%-7s %s%s", strings.ToUpper(statusWord(s.Status)), s.Title, pad)
		if s.DurationMs != nil {
			line += fmt.Sprintf("  %6.1fs", float64(*s.DurationMs)/1000)
		}
		if s.Status == StatusFailed || s.Status == StatusSkipped {
			line += "  " + s.Detail
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	passed, failed, skipped := r.counts()
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "\nQualification %s: %d passed, %d failed, %d skipped.\n", verdict, passed, failed, skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

func statusWord(s string) string {
	switch s {
	case StatusPassed:
		return "pass"
	case StatusFailed:
		return "fail"
	case StatusSkipped:
		return "skip"
	}
	return s
}

func (r *Report) counts() (passed, failed, skipped int) {
	for _, s := range r.Steps {
		switch s.Status {
		case StatusPassed:
			passed++
		case StatusFailed:
			failed++
		default:
			skipped++
		}
	}
	return
}

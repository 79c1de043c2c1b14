// Package qualify runs the email live-qualification checklist against a
// running Paperclip server, as an operator would: it connects an inbox
// through the normal setup API, sends mail to it through the provider,
// checks that each message makes exactly one task and one wake, sends an
// explicit reply and checks provider threading and delivery, drives a
// disconnect/reconnect and an interruption of receiving and checks the
// catch-up, then removes what it created. It records every step, the
// provider message and thread ids and the stage timings in a Report that
// never holds a credential. See docs/qualification.md.
package qualify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/apiclient"
)

// Receive modes.
const (
	ModeWebSocket = "websocket"
	ModeWebhook   = "webhook"
)

// Progress receives step updates as they happen; the command line draws
// them as a live list on a terminal or as plain lines otherwise.
type Progress interface {
	// Plan announces every step of the run, all pending.
	Plan(steps []*Step)
	// Update reports a step whose status changed.
	Update(step *Step)
	// Note is something the operator must see now (for example, an email
	// to send by hand).
	Note(text string)
}

// Options configure one qualification run.
type Options struct {
	// Server is the control plane's base URL (without /api).
	Server string
	// Token is a board API key; empty acts as the local board.
	Token string
	// APIKey is the AgentMail key of the disposable inbox or organization.
	// It goes to the server's setup API and to the provider, never into
	// the report.
	APIKey string
	// ProviderURL is the AgentMail REST base (with /v0).
	ProviderURL string
	// Emulator is the emulator's base URL, when qualifying against it.
	Emulator string
	// Recipient is the approved test recipient.
	Recipient string
	// Modes to qualify, in order.
	Modes []string
	// CompanyID to work in; empty finds or creates "Email qualification".
	CompanyID string
	// Inbox attaches this existing provider inbox; empty uses the key's
	// own inbox (inbox-scoped key) or creates Username@agentmail.to.
	Inbox    string
	Username string
	// Timeout bounds every wait for an event.
	Timeout time.Duration
	// Settle is how long to let a new live connection subscribe when the
	// provider cannot say (a real account); Quiet how long a paused inbox
	// is watched for a task that must not appear.
	Settle time.Duration
	Quiet  time.Duration
	// HTTPClient is used for every call; nil means a default client.
	HTTPClient *http.Client
	Progress   Progress
}

func (o *Options) validate() error {
	if o.Server == "" {
		return errors.New("qualify: no server URL")
	}
	if o.APIKey == "" {
		return errors.New("qualify: no AgentMail API key")
	}
	if o.Recipient == "" || !strings.Contains(o.Recipient, "@") {
		return errors.New("qualify: --recipient must be an email address")
	}
	if len(o.Modes) == 0 {
		return errors.New("qualify: no receive mode")
	}
	seen := map[string]bool{}
	for _, m := range o.Modes {
		if m != ModeWebSocket && m != ModeWebhook {
			return fmt.Errorf("qualify: unknown mode %q (want websocket or webhook)", m)
		}
		if seen[m] {
			return fmt.Errorf("qualify: mode %q given twice", m)
		}
		seen[m] = true
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 3 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Progress == nil {
		o.Progress = nopProgress{}
	}
	o.Server = strings.TrimSuffix(strings.TrimRight(o.Server, "/"), "/api")
	o.Recipient = strings.ToLower(strings.TrimSpace(o.Recipient))
	o.Inbox = strings.ToLower(strings.TrimSpace(o.Inbox))
	return nil
}

type nopProgress struct{}

func (nopProgress) Plan([]*Step) {}
func (nopProgress) Update(*Step) {}
func (nopProgress) Note(string)  {}

// runner holds one run's state.
type runner struct {
	o     Options
	api   *apiclient.Client
	emu   *emulatorControl
	prov  *agentmail.Client
	rep   *Report
	steps map[string]*Step
	short string // first 8 characters of the run id, in subjects and names

	companyID, agentID string
	endpointID         string
	address            string
	// before are the provider registrations of an attached inbox before
	// the run, so cleanup can prove it left only those.
	before *registrations
}

// Run performs the qualification and returns its report. The error is
// only for runs that could not start (bad options); failed steps are in
// the report, whose Passed is false then.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	prov, err := agentmail.New(agentmail.Options{BaseURL: o.ProviderURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("qualify: provider URL: %w", err)
	}
	id := randomID()
	r := &runner{o: o, prov: prov, short: id[:8], steps: map[string]*Step{},
		api: newAPI(o)}
	provider := "agentmail"
	if o.Emulator != "" {
		provider = "emulator"
		r.emu = &emulatorControl{c: &jsonClient{base: strings.TrimRight(o.Emulator, "/"), http: o.HTTPClient}}
	}
	r.rep = &Report{RunID: id, StartedAt: time.Now().UTC(), Server: o.Server, Provider: provider, ProviderURL: prov.BaseURL(),
		Recipient: o.Recipient, Modes: o.Modes, Inbound: []*Inbound{}, Replies: []*Reply{}, Notes: []string{}}
	r.plan()
	o.Progress.Plan(r.rep.Steps)
	if r.emu != nil {
		r.note("Run against the AgentMail emulator: it checks this installation's wiring; only a run against the real provider is live qualification.")
	}

	if r.preflight(ctx) {
		for i, m := range o.Modes {
			r.qualifyMode(ctx, m, i == 0)
		}
	}
	r.cleanup(context.WithoutCancel(ctx))
	r.recheck(context.WithoutCancel(ctx))

	r.rep.FinishedAt = time.Now().UTC()
	r.rep.Passed = true
	for _, s := range r.rep.Steps {
		if s.Status == StatusPending {
			r.skip(s.ID, "not reached")
		}
		if s.Status != StatusPassed {
			r.rep.Passed = false
		}
	}
	return r.rep, nil
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// plan lists every step before anything runs.
func (r *runner) plan() {
	add := func(id, mode, title string) {
		s := &Step{ID: id, Mode: mode, Title: title, Status: StatusPending}
		r.rep.Steps = append(r.rep.Steps, s)
		r.steps[id] = s
	}
	add("preflight.server", "", "Server reachable, email connections enabled")
	add("preflight.key", "", "AgentMail key inspected")
	add("preflight.agent", "", "Qualification agent created")
	for _, m := range r.o.Modes {
		add(m+".connect", m, m+": inbox connected and receiving")
		add(m+".receive", m, m+": mail received, one task, one wake")
		add(m+".reply", m, m+": explicit reply accepted, sent, delivered")
		add(m+".threading", m, m+": reply threaded by the provider")
		add(m+".reconnect", m, m+": disconnect, reconnect, receive again")
		add(m+".interrupt", m, m+": receiving interrupted, mail caught up")
	}
	add("cleanup", "", "Cleanup: inbox registration, runtime key, webhook removed")
	add("recheck", "", "Re-check: still one task and one wake per message")
}

// stepFailure carries a failed step's message.
type stepFailure struct{ msg string }

func (e *stepFailure) Error() string { return e.msg }

func failf(format string, args ...any) error { return &stepFailure{msg: fmt.Sprintf(format, args...)} }

// do runs step id: fn returns a detail on success, or an error whose text
// becomes the detail of the failure.
func (r *runner) do(ctx context.Context, id string, fn func(ctx context.Context) (string, error)) bool {
	s := r.steps[id]
	start := time.Now().UTC()
	s.StartedAt, s.Status = &start, StatusRunning
	r.o.Progress.Update(s)
	detail, err := fn(ctx)
	end := time.Now().UTC()
	s.FinishedAt, s.DurationMs = &end, ms(end.Sub(start))
	if err != nil {
		s.Status, s.Detail = StatusFailed, err.Error()
	} else {
		s.Status, s.Detail = StatusPassed, detail
	}
	r.o.Progress.Update(s)
	return err == nil
}

func (r *runner) skip(id, why string) {
	s := r.steps[id]
	if s.Status != StatusPending {
		return
	}
	s.Status, s.Detail = StatusSkipped, why
	r.o.Progress.Update(s)
}

// waitFor polls cond every 200 ms until it reports done, returns a
// *stepFailure, or the timeout passes. Other errors are treated as
// transient (the last one is named on timeout).
func (r *runner) waitFor(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	return r.waitWithin(ctx, r.o.Timeout, what, cond)
}

func (r *runner) waitWithin(ctx context.Context, within time.Duration, what string, cond func(ctx context.Context) (bool, error)) error {
	deadline := time.Now().Add(within)
	var last error
	for {
		done, err := cond(ctx)
		if done && err == nil {
			return nil
		}
		var sf *stepFailure
		if errors.As(err, &sf) {
			return err
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return failf("timed out after %s waiting for %s (last error: %v)", within, what, last)
			}
			return failf("timed out after %s waiting for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return failf("interrupted while waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

// preflight checks the server and the key and creates the agent.
func (r *runner) preflight(ctx context.Context) bool {
	ok := r.do(ctx, "preflight.server", func(ctx context.Context) (string, error) {
		health, err := r.api.Health(ctx)
		if err != nil {
			return "", err
		}
		settings, err := r.api.Settings(ctx)
		if err != nil {
			return "", err
		}
		if !settings.Experimental.EnableChatConnectors {
			return "", failf("email connections are disabled on this server: an instance admin must turn on experimental.enableChatConnectors")
		}
		if err := r.ensureCompany(ctx); err != nil {
			return "", err
		}
		r.rep.CompanyID = r.companyID
		return fmt.Sprintf("%s, database %s, version %s", health.Status, health.Database, health.Version), nil
	})
	ok = ok && r.do(ctx, "preflight.key", r.inspectKey)
	ok = ok && r.do(ctx, "preflight.agent", func(ctx context.Context) (string, error) {
		// A no-op agent: its run proves that the wake starts a run, and
		// nothing it does can disturb the checks (docs/qualification.md).
		name, typ := "Email qualification "+r.short, "process"
		ag, err := r.api.CreateAgent(ctx, r.companyID, apiclient.AgentInput{Name: &name, AdapterType: &typ,
			AdapterConfig: json.RawMessage(`{"command":"true","timeoutSec":60}`)})
		if err != nil {
			return "", err
		}
		r.agentID, r.rep.AgentID = ag.ID, ag.ID
		return "agent " + ag.ID + " (process adapter running `true`)", nil
	})
	if !ok {
		for _, s := range r.rep.Steps {
			if s.Mode != "" {
				r.skip(s.ID, "preflight failed")
			}
		}
	}
	return ok
}

const companyName = "Email qualification"

func (r *runner) ensureCompany(ctx context.Context) error {
	if r.o.CompanyID != "" {
		if _, err := r.api.Company(ctx, r.o.CompanyID); err != nil {
			return err
		}
		r.companyID = r.o.CompanyID
		return nil
	}
	list, err := r.api.Companies(ctx)
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.Name == companyName {
			r.companyID = c.ID
			return nil
		}
	}
	c, err := r.api.CreateCompany(ctx, companyName)
	if err != nil {
		return err
	}
	r.companyID = c.ID
	return nil
}

package email

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/vault"
)

// Health codes of an inbox (EmailEndpointSummary.HealthCode), one per
// reason its health message gives (docs/api.md, "Inbox health").
const (
	CodeConnected               = "connected"
	CodeConnecting              = "connecting"
	CodePaused                  = "paused"
	CodeSetupIncomplete         = "setup_incomplete"
	CodeDisconnected            = "disconnected"
	CodeCleanupFailed           = "provider_cleanup_failed"
	CodeCredentialMissing       = "credential_missing"
	CodeCredentialUndecryptable = "credential_undecryptable"
	CodeCredentialRevoked       = "credential_revoked"
	CodeGrantRevoked            = "grant_revoked"
	CodeAgentAccessRevoked      = "agent_access_revoked"
	CodeWebhookSignature        = "webhook_signature_failing"
	CodeReceivingError          = "receiving_error"
	CodeAgentRunFailed          = "agent_run_failed"
)

// Problems recorded on an inbox where they are observed
// (store.RecordEndpointProblem), outside the receiving transports' own
// health columns.
const (
	// ProblemSetupFailed is a setup attempt that ended in an error; it is
	// shown while the inbox is a draft and cleared when it activates.
	ProblemSetupFailed = "setup_failed"
	// ProblemWebhookSignature is a webhook delivery whose signature did not
	// verify; a verified delivery clears it.
	ProblemWebhookSignature = "webhook_signature"
)

// WebhookSignatureProblem is the plain-words message of
// ProblemWebhookSignature.
const WebhookSignatureProblem = "Webhook deliveries are being refused: their signature does not verify with this inbox's signing secret. " +
	"If the webhook was changed in AgentMail, reconnect the inbox with receiveMode webhook; otherwise someone else is posting to its URL"

// ForActor trims a summary for its reader: only instance administrators
// learn which replica (host name and process id) holds an inbox's live
// connection; members, company owners and agents do not learn the
// server's infrastructure.
func ForActor(a authz.Actor, sum domain.EmailEndpointSummary) domain.EmailEndpointSummary {
	if authz.RequireInstanceAdmin(a) != nil {
		sum.SocketOwner = nil
	}
	return sum
}

// runProblemWindow bounds how far back a failed agent run still marks its
// inbox: older failures are history, not health.
const runProblemWindow = 7 * 24 * time.Hour

// maxReasonLen bounds the quoted part of a health message (a run's error,
// a task title), in characters.
const maxReasonLen = 300

// healthInputs is what the health of a set of inboxes is computed from
// besides their rows, read for all of them at once (two statements per 200
// inboxes, plus one per key to decrypt): a list page polls it.
type healthInputs struct {
	facts map[string]store.EndpointHealthFacts
	runs  map[string]store.EmailRunProblem
	err   error
}

// readHealth reads the health inputs of eps.
func (s *Service) readHealth(ctx context.Context, eps []domain.EmailEndpoint) healthInputs {
	var ids, active []string
	for _, e := range eps {
		if e.Status == domain.EndpointArchived {
			continue
		}
		ids = append(ids, e.ID)
		if e.Status == domain.EndpointActive {
			active = append(active, e.ID)
		}
	}
	var in healthInputs
	if len(ids) == 0 {
		return in
	}
	if in.facts, in.err = s.Store.EndpointHealthFacts(ctx, s.Store.DB, ids, TargetEndpoint, PathAPIKey, PathWebhookSecret); in.err != nil {
		s.Log.Warn("read email inbox health", "err", in.err)
		return in
	}
	if len(active) > 0 {
		var err error
		if in.runs, err = s.Store.EmailRunProblems(ctx, s.Store.DB, active, s.Store.Now().Add(-runProblemWindow)); err != nil {
			// The other reasons stand; only this one is unknown.
			s.Log.Warn("read email run problems", "err", err)
		}
	}
	return in
}

// health fills the summary's health fields from the endpoint and its
// health inputs. It never fails: a fact that cannot be read leaves the
// reason it would have given out.
func (s *Service) health(ctx context.Context, e domain.EmailEndpoint, in healthInputs, sum *domain.EmailEndpointSummary) {
	set := func(health, code, msg, lastError string, at *time.Time) {
		sum.Health, sum.HealthCode, sum.HealthMessage, sum.LastErrorAt = health, code, msg, at
		sum.LastError = nil
		if lastError != "" {
			sum.LastError = &lastError
		}
	}
	if e.Status == domain.EndpointArchived {
		if e.LastError != "" {
			set(domain.HealthDisconnected, CodeCleanupFailed, e.LastError, e.LastError, nil)
			return
		}
		set(domain.HealthDisconnected, CodeDisconnected, "Disconnected", "", nil)
		return
	}
	f, ok := in.facts[e.ID]
	if in.err != nil || !ok {
		set(domain.HealthAttention, CodeReceivingError, "The inbox's health could not be read; see the server log", "", nil)
		return
	}
	if e.Status == domain.EndpointDraft {
		msg := "Setup incomplete: setup has not finished"
		lastError := ""
		var at *time.Time
		if f.ProblemCode == ProblemSetupFailed {
			msg = "Setup incomplete: " + strings.TrimSuffix(f.ProblemMessage, ".")
			lastError, at = f.ProblemMessage, f.ProblemAt
		}
		set(domain.HealthSetupIncomplete, CodeSetupIncomplete,
			msg+". Retry the setup with the same idempotencyKey, or discard this draft (control action remove).", lastError, at)
		return
	}
	credCode, credMsg := s.credentialProblem(ctx, e, f)
	if e.Status == domain.EndpointPaused {
		msg := "Paused: no mail is received and nothing is sent until a board user resumes the inbox."
		if credCode != "" {
			msg += " Resuming will fail: " + credMsg
		}
		set(domain.HealthPaused, CodePaused, msg, credMsg, nil)
		return
	}
	if e.ReceiveMode == domain.ReceiveWebSocket && f.SocketHolder != "" {
		h := f.SocketHolder
		sum.SocketOwner = &h
	}
	switch {
	case credCode != "":
		set(domain.HealthAttention, credCode, credMsg, credMsg, nil)
		return
	case f.ProblemCode == ProblemWebhookSignature && e.ReceiveMode == domain.ReceiveWebhook:
		set(domain.HealthAttention, CodeWebhookSignature, f.ProblemMessage, f.ProblemMessage, f.ProblemAt)
		return
	case e.LastError != "":
		msg := e.HealthMessage
		if msg == "" || msg == "Connected" {
			msg = e.LastError
		}
		set(domain.HealthAttention, CodeReceivingError, msg, e.LastError, nil)
		return
	}
	if p, ok := in.runs[e.ID]; ok {
		msg := runProblemMessage(p)
		at := p.At
		set(domain.HealthAttention, CodeAgentRunFailed, msg, msg, &at)
		return
	}
	if e.ReceiveMode == domain.ReceiveWebSocket && f.SocketHolder == "" {
		set(domain.HealthConnecting, CodeConnecting,
			"Connecting: no server holds the live connection yet; new mail still arrives through the catch-up scan.", "", nil)
		return
	}
	set(domain.HealthOK, CodeConnected, "Connected", "", nil)
}

// credentialProblem says why the inbox's credentials would refuse work
// now ("" when they would not): the same conditions as the active-inbox
// check, each with its own reason, plus a key this server cannot decrypt.
func (s *Service) credentialProblem(ctx context.Context, e domain.EmailEndpoint, f store.EndpointHealthFacts) (string, string) {
	if code, msg := s.secretProblem(ctx, f.RuntimeSecretID, "AgentMail key",
		"reconnect the inbox with an API key"); code != "" {
		return code, msg
	}
	if e.ReceiveMode == domain.ReceiveWebhook {
		if code, msg := s.secretProblem(ctx, f.WebhookSecretID, "webhook signing secret",
			"reconnect the inbox with receiveMode webhook"); code != "" {
			return code, msg
		}
	}
	if e.CredentialConnectionID == "" {
		return "", ""
	}
	switch {
	case !f.ConnectionFound || f.ConnectionStatus != "active":
		return CodeCredentialRevoked, "The saved AgentMail credential this inbox uses was removed or disabled; reconnect the inbox with an API key"
	case f.ActiveGrants == 0:
		return CodeGrantRevoked, "Every grant of the saved AgentMail credential this inbox uses was revoked, so nobody may use it; " +
			"add a grant to the credential (POST …/connections/:id/grants) or reconnect the inbox with an API key"
	case f.AgentInstalls == 0:
		return CodeAgentAccessRevoked, "The assigned agent no longer has access to the saved AgentMail credential this inbox uses (its install was removed); " +
			"give it access again (POST …/connections/:id/installs) or reconnect the inbox with an API key"
	}
	return "", ""
}

// secretProblem checks that a bound secret exists and opens with this
// server's master key.
func (s *Service) secretProblem(ctx context.Context, secretID, what, fix string) (string, string) {
	if secretID == "" {
		return CodeCredentialMissing, fmt.Sprintf("The inbox's %s is missing; %s", what, fix)
	}
	_, err := s.Vault.Resolve(ctx, s.Store.DB, secretID, 0)
	switch {
	case err == nil:
		return "", ""
	case errors.Is(err, store.ErrNotFound):
		return CodeCredentialMissing, fmt.Sprintf("The inbox's %s is missing; %s", what, fix)
	case errors.Is(err, vault.ErrCorrupt):
		return CodeCredentialUndecryptable, fmt.Sprintf("The inbox's %s cannot be decrypted with this server's master key "+
			"(it was sealed with another key, or it is damaged); start the server with the instance's master key, or %s", what, fix)
	}
	s.Log.Warn("check email inbox secret", "err", err)
	return "", ""
}

// refusalWords says in plain words why the heartbeat refused a run
// (heartbeat's refusal reasons); an unknown reason shows as its code.
var refusalWords = map[string]string{
	"agent_paused":                           "the agent is paused",
	"agent_terminated":                       "the agent is terminated",
	"agent_not_active":                       "the agent is not active",
	"budget_exceeded":                        "the agent's monthly budget is spent",
	"issue_state_changed":                    "the task changed before the run started",
	"issue_not_found":                        "the task no longer exists",
	"low_trust_requires_sandbox_environment": "a low-trust agent runs only in an active sandbox environment, and it has none",
	"isolated_workspace_requires_sandbox_environment": "the task needs an isolated workspace, which runs only in an active sandbox environment",
	"unapproved_config_requires_sandbox_environment":  "its configuration was not written by an instance administrator, so it runs only in an active sandbox environment",
}

// runProblemMessage describes a failed or refused agent run in plain words.
func runProblemMessage(p store.EmailRunProblem) string {
	what := "failed"
	reason := p.Error
	switch p.Status {
	case domain.RunTimedOut:
		what = "timed out"
	case domain.RunRefused:
		what, reason = "was refused", p.RefusalReason
		if words, ok := refusalWords[p.RefusalReason]; ok {
			reason = words
		}
		if p.Error != "" {
			reason = p.Error
		}
	}
	msg := fmt.Sprintf("The agent's last run on the email task %q %s", clip(p.IssueTitle), what)
	if reason != "" {
		msg += ": " + clip(reason)
	}
	return msg + ". Its mail may be unanswered: fix the agent, then wake it on that task again."
}

// clip shortens s to maxReasonLen characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxReasonLen {
		return s
	}
	r := []rune(s)
	return string(r[:maxReasonLen]) + "…"
}

package email

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Who may write to an agent (docs/email-setup.md, "5. Who may write to
// your agent"): an inbox's sender rules are kept here and written to
// AgentMail's inbox-scoped allow/block lists, so the provider drops mail
// before it costs anything; receiving enforces the same rules again.

// SenderRulesView is the API shape of an inbox's sender rules.
type SenderRulesView struct {
	domain.SenderRules
	Sync  SenderRulesSync `json:"sync"`
	Drift *SenderDrift    `json:"drift"`
}

// SenderRulesSync is the state of the rules' sync to AgentMail.
type SenderRulesSync struct {
	// State is synced, pending or failed.
	State        string     `json:"state"`
	LastSyncedAt *time.Time `json:"lastSyncedAt"`
	// Error is the last failure, in fixed words (never provider text).
	Error *string `json:"error"`
	// Attempts counts failed attempts since the last change.
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"nextAttemptAt"`
}

// SenderDrift reports that AgentMail's lists for the inbox differ from
// Paperclip's (changed in the AgentMail console): Provider is what
// AgentMail holds. Resolve it with the resolve-drift action.
type SenderDrift struct {
	CheckedAt time.Time          `json:"checkedAt"`
	Provider  domain.SenderRules `json:"provider"`
	Actions   []string           `json:"actions"`
}

// Drift resolutions (POST …/sender-rules/resolve-drift {"action": …}).
const (
	DriftTakeProvider = "take_provider" // "Take AgentMail's entries"
	DriftWriteOurs    = "write_ours"    // "Write ours back"
)

// RulesWriterMessage is the refusal of a rules change by a member who is
// not an owner or admin.
const RulesWriterMessage = "Only company owners and admins can change who may write to an inbox"

// RequireRulesWriter checks that a may change who writes to the company's
// inboxes (sender rules, releases, blocks, suppressions): a company owner
// or admin, the local board or an instance administrator.
func (s *Service) RequireRulesWriter(ctx context.Context, a authz.Actor, companyID string) error {
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	acc, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false)
	if err != nil {
		return err
	}
	if a.LocalBoard || a.IsInstanceAdmin || acc.Role == domain.RoleOwner || acc.Role == domain.RoleAdmin {
		return nil
	}
	return &domain.Refusal{Kind: domain.KindForbidden, Message: RulesWriterMessage}
}

// LoadSenderRules returns an inbox's rules (empty when none were set) and
// its stored row (nil when none).
func (s *Service) LoadSenderRules(ctx context.Context, endpointID string) (domain.SenderRules, *store.SenderRules, error) {
	row, err := s.Store.GetSenderRules(ctx, s.Store.DB, endpointID)
	if errors.Is(err, store.ErrNotFound) {
		return domain.SenderRules{Receive: domain.SenderRuleLists{Allow: []string{}, Block: []string{}},
			Reply: domain.SenderRuleLists{Allow: []string{}, Block: []string{}}}, nil, nil
	}
	if err != nil {
		return domain.SenderRules{}, nil, err
	}
	rules, err := decodeRules(row.Rules)
	return rules, &row, err
}

func decodeRules(raw string) (domain.SenderRules, error) {
	var r domain.SenderRules
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("decode sender rules: %w", err)
	}
	return withEmptyLists(r), nil
}

// withEmptyLists makes every nil list an empty one (JSON [] rather than null).
func withEmptyLists(r domain.SenderRules) domain.SenderRules {
	for _, l := range []*[]string{&r.Receive.Allow, &r.Receive.Block, &r.Reply.Allow, &r.Reply.Block} {
		if *l == nil {
			*l = []string{}
		}
	}
	return r
}

// SenderRulesView returns an inbox's rules with their sync state and any
// drift (GET …/sender-rules); the caller checked the actor may read the
// inbox (ReadableInbox).
func (s *Service) SenderRulesView(ctx context.Context, endpointID string) (SenderRulesView, error) {
	rules, row, err := s.LoadSenderRules(ctx, endpointID)
	if err != nil {
		return SenderRulesView{}, err
	}
	v := SenderRulesView{SenderRules: rules, Sync: SenderRulesSync{State: store.RulesSynced}}
	if row == nil {
		return v, nil
	}
	v.Sync = SenderRulesSync{State: row.SyncState, LastSyncedAt: row.LastSyncedAt, Error: optString(row.SyncError),
		Attempts: row.SyncAttempts}
	if row.SyncState != store.RulesSynced {
		v.Sync.NextAttempt = row.NextSyncAt
	}
	if row.Drift != "" && row.DriftCheckedAt != nil {
		prov, err := decodeRules(row.Drift)
		if err != nil {
			return v, err
		}
		v.Drift = &SenderDrift{CheckedAt: *row.DriftCheckedAt, Provider: prov, Actions: []string{DriftTakeProvider, DriftWriteOurs}}
	}
	return v, nil
}

// WritableInbox is ReadableInbox for a rules writer (RequireRulesWriter);
// an archived inbox has no provider lists to write (ErrInboxNotActive).
func (s *Service) WritableInbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, error) {
	ep, err := s.ReadableInbox(ctx, a, endpointID)
	if err != nil {
		return ep, err
	}
	if err := s.RequireRulesWriter(ctx, a, ep.CompanyID); err != nil {
		return ep, err
	}
	if ep.Status == domain.EndpointArchived {
		return ep, ErrInboxNotActive
	}
	return ep, nil
}

// PutSenderRules replaces the rules of ep (loaded with WritableInbox) as
// a and returns the new view (PUT …/sender-rules).
func (s *Service) PutSenderRules(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, in domain.SenderRules) (SenderRulesView, error) {
	if err := s.SetSenderRules(ctx, a, ep, in, "email.sender_rules.updated", nil); err != nil {
		return SenderRulesView{}, err
	}
	return s.SenderRulesView(ctx, ep.ID)
}

// SetSenderRules validates and stores an inbox's rules as actor (audited
// as action with details), marks them pending sync and wakes the syncer.
func (s *Service) SetSenderRules(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, in domain.SenderRules, action string, details map[string]any) error {
	rules, err := in.Normalize()
	if err != nil {
		return domain.Refuse(domain.KindInvalid, "%s", err.Error())
	}
	return s.storeRules(ctx, a, ep, rules, action, details)
}

func (s *Service) storeRules(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, rules domain.SenderRules, action string, details map[string]any) error {
	raw, err := json.Marshal(withEmptyLists(rules))
	if err != nil {
		return fmt.Errorf("encode sender rules: %w", err)
	}
	if details == nil {
		details = map[string]any{}
	}
	details["receiveAllow"], details["receiveBlock"] = len(rules.Receive.Allow), len(rules.Receive.Block)
	details["replyAllow"], details["replyBlock"] = len(rules.Reply.Allow), len(rules.Reply.Block)
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		v, err := s.Store.PutSenderRules(ctx, tx, ep.CompanyID, ep.ID, string(raw))
		if err != nil {
			return err
		}
		details["version"] = v
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, action, "email_endpoint", ep.ID, details)
	})
	if err != nil {
		return err
	}
	s.rulesEpoch.Add(1)
	s.RulesChanged.Notify()
	return nil
}

// BlockSender adds sender's address (or with wholeDomain its domain) to
// the inbox's receive block list, removing it from the receive allow list,
// as actor. It returns the entry blocked.
func (s *Service) BlockSender(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, sender string, wholeDomain bool, details map[string]any) (string, error) {
	entry := strings.ToLower(strings.TrimSpace(sender))
	if wholeDomain {
		if i := strings.LastIndex(entry, "@"); i >= 0 {
			entry = entry[i+1:]
		}
	}
	entry, err := domain.NormalizeSenderEntry(entry)
	if err != nil {
		return "", domain.Refuse(domain.KindInvalid, "The sender cannot be blocked: %s", err.Error())
	}
	rules, _, err := s.LoadSenderRules(ctx, ep.ID)
	if err != nil {
		return "", err
	}
	rules.Receive.Allow = slices.DeleteFunc(rules.Receive.Allow, func(v string) bool { return v == entry })
	if !slices.Contains(rules.Receive.Block, entry) {
		rules.Receive.Block = append(rules.Receive.Block, entry)
	}
	if details == nil {
		details = map[string]any{}
	}
	details["entry"] = entry
	return entry, s.SetSenderRules(ctx, a, ep, rules, "email.sender_blocked", details)
}

// Sync of the rules to AgentMail.

// ruleListNames are the provider lists Paperclip manages for an inbox.
var ruleListNames = []struct{ direction, listType string }{
	{agentmail.ListReceive, agentmail.ListAllow}, {agentmail.ListReceive, agentmail.ListBlock},
	{agentmail.ListReply, agentmail.ListAllow}, {agentmail.ListReply, agentmail.ListBlock},
}

func listOf(r *domain.SenderRules, direction, listType string) *[]string {
	l := &r.Receive
	if direction == agentmail.ListReply {
		l = &r.Reply
	}
	if listType == agentmail.ListAllow {
		return &l.Allow
	}
	return &l.Block
}

// ruleClients are the keyed clients a sync may use, in order: the inbox's
// runtime key (inbox-scoped: its own lists are in its scope), then the
// saved connection's key the inbox was set up with, for a runtime key
// without the list permissions.
func (s *Service) ruleClients(ctx context.Context, ep domain.EmailEndpoint) ([]*agentmail.Client, error) {
	var out []*agentmail.Client
	for _, path := range []string{PathAPIKey, PathControlKey} {
		key, err := s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, path)
		if errors.Is(err, errNoSecret) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s.keyed(key))
	}
	if len(out) == 0 {
		return nil, ErrCredentialUnavailable
	}
	return out, nil
}

// withRuleClient runs fn with the first key that has the scope: a 401 or
// 403 moves on to the next key.
func (s *Service) withRuleClient(ctx context.Context, ep domain.EmailEndpoint, fn func(c *agentmail.Client) error) error {
	clients, err := s.ruleClients(ctx, ep)
	if err != nil {
		return err
	}
	for i, c := range clients {
		err = fn(c)
		if err == nil || i == len(clients)-1 || !(errors.Is(err, agentmail.ErrForbidden) || errors.Is(err, agentmail.ErrUnauthorized)) {
			return err
		}
	}
	return err
}

// providerRules reads the inbox's four lists from AgentMail.
func providerRules(ctx context.Context, c *agentmail.Client, address string) (domain.SenderRules, error) {
	var r domain.SenderRules
	for _, n := range ruleListNames {
		entries, err := c.AllInboxListEntries(ctx, address, n.direction, n.listType)
		if err != nil {
			return r, err
		}
		l := listOf(&r, n.direction, n.listType)
		for _, e := range entries {
			if e.ReadOnly {
				continue // provider-managed (suppressions), not ours to change
			}
			*l = append(*l, strings.ToLower(e.Entry))
		}
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return withEmptyLists(r), nil
}

// writeRules makes the inbox's provider lists equal to rules: missing
// entries are created, extra ones deleted. Both are idempotent, so a sync
// cut short is simply repeated.
func writeRules(ctx context.Context, c *agentmail.Client, address string, rules domain.SenderRules) error {
	cur, err := providerRules(ctx, c, address)
	if err != nil {
		return err
	}
	for _, n := range ruleListNames {
		want, have := *listOf(&rules, n.direction, n.listType), *listOf(&cur, n.direction, n.listType)
		for _, e := range want {
			if !slices.Contains(have, e) {
				if err := c.CreateInboxListEntry(ctx, address, n.direction, n.listType,
					agentmail.CreateListEntryRequest{Entry: e, Reason: "Paperclip sender rules"}); err != nil {
					return err
				}
			}
		}
		for _, e := range have {
			if !slices.Contains(want, e) {
				if err := c.DeleteInboxListEntry(ctx, address, n.direction, n.listType, e); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// syncFailure is the stored description of a failed sync: fixed words and
// the provider client's safe diagnostics, never provider text or keys.
func syncFailure(err error) string {
	if p, ok := agentmail.ProblemFor(err); ok {
		return fmt.Sprintf("AgentMail refused the list change (status %d, operation %s, code %s)",
			p.Details.ProviderStatus, p.Details.Operation, p.Details.Code)
	}
	var ne *agentmail.NetworkError
	if errors.As(err, &ne) {
		return "AgentMail could not be reached (operation " + ne.Operation + ")"
	}
	if r, ok := domain.AsRefusal(err); ok {
		return r.Message
	}
	return "The sync could not be completed"
}

// SyncSenderRules writes one inbox's stored rules to AgentMail and records
// the outcome: synced (for that version only: a newer change stays
// pending), or failed with the next attempt after min(300 s, 2^attempts s).
func (s *Service) SyncSenderRules(ctx context.Context, row store.SenderRules) error {
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, row.EndpointID)
	if err != nil {
		return err
	}
	rules, err := decodeRules(row.Rules)
	if err != nil {
		return err
	}
	if ep.Status == domain.EndpointArchived || ep.Status == domain.EndpointDraft {
		return s.Store.MarkSenderRulesFailed(ctx, s.Store.DB, ep.ID, row.Version,
			"The inbox is not connected; its rules are kept and synced once it is", s.Store.Now().Add(time.Hour))
	}
	err = s.withRuleClient(ctx, ep, func(c *agentmail.Client) error { return writeRules(ctx, c, ep.Address, rules) })
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := min(300*time.Second, time.Duration(1<<min(row.SyncAttempts+1, 9))*time.Second)
		if ra, ok := agentmail.RetryAfter(err); ok {
			delay = max(delay, ra)
		}
		s.Log.Warn("sender rules sync failed", "endpoint", ep.ID, "err", err)
		return s.Store.MarkSenderRulesFailed(ctx, s.Store.DB, ep.ID, row.Version, syncFailure(err), s.Store.Now().Add(delay))
	}
	return s.Store.MarkSenderRulesSynced(ctx, s.Store.DB, ep.ID, row.Version)
}

// CheckDrift compares AgentMail's lists for the inbox with Paperclip's
// synced rules and records the difference (none: the drift is cleared).
// Rules still waiting for a sync are not compared: the sync will write
// them.
func (s *Service) CheckDrift(ctx context.Context, ep domain.EmailEndpoint) error {
	rules, row, err := s.LoadSenderRules(ctx, ep.ID)
	if err != nil || row == nil || row.SyncState != store.RulesSynced {
		return err
	}
	var prov domain.SenderRules
	if err := s.withRuleClient(ctx, ep, func(c *agentmail.Client) error {
		prov, err = providerRules(ctx, c, ep.Address)
		return err
	}); err != nil {
		return providerError(err)
	}
	drift := ""
	if !sameRules(rules, prov) {
		raw, _ := json.Marshal(prov)
		drift = string(raw)
	}
	return s.Store.SetSenderRulesDrift(ctx, s.Store.DB, ep.ID, drift)
}

func sameRules(a, b domain.SenderRules) bool {
	for _, n := range ruleListNames {
		if !slices.Equal(*listOf(&a, n.direction, n.listType), *listOf(&b, n.direction, n.listType)) {
			return false
		}
	}
	return true
}

// CheckDriftView runs CheckDrift on ep (loaded with WritableInbox) and
// returns the rules' view with the drift found (POST …/check-drift).
func (s *Service) CheckDriftView(ctx context.Context, ep domain.EmailEndpoint) (SenderRulesView, error) {
	if err := s.CheckDrift(ctx, ep); err != nil {
		return SenderRulesView{}, err
	}
	return s.SenderRulesView(ctx, ep.ID)
}

// ResolveDrift settles a drift of ep (loaded with WritableInbox) as a:
// DriftTakeProvider stores AgentMail's entries as read now, DriftWriteOurs
// writes Paperclip's rules back (POST …/resolve-drift). It returns the
// rules' view.
func (s *Service) ResolveDrift(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, action string) (SenderRulesView, error) {
	rules, row, err := s.LoadSenderRules(ctx, ep.ID)
	if err != nil {
		return SenderRulesView{}, err
	}
	switch action {
	case DriftTakeProvider:
		// Read AgentMail's entries now (not the stored drift): they may
		// have changed again since the check.
		var prov domain.SenderRules
		if err := s.withRuleClient(ctx, ep, func(c *agentmail.Client) error {
			prov, err = providerRules(ctx, c, ep.Address)
			return err
		}); err != nil {
			return SenderRulesView{}, providerError(err)
		}
		if err := s.SetSenderRules(ctx, a, ep, prov, "email.sender_rules.drift_resolved", map[string]any{"action": action}); err != nil {
			return SenderRulesView{}, err
		}
	case DriftWriteOurs:
		if row == nil {
			rules = domain.SenderRules{}
		}
		if err := s.storeRules(ctx, a, ep, rules, "email.sender_rules.drift_resolved", map[string]any{"action": action}); err != nil {
			return SenderRulesView{}, err
		}
	default:
		return SenderRulesView{}, domain.Refuse(domain.KindInvalid, "action must be %s or %s", DriftTakeProvider, DriftWriteOurs)
	}
	return s.SenderRulesView(ctx, ep.ID)
}

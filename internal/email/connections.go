package email

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ConnectInput saves an AgentMail credential with its access.
type ConnectInput struct {
	APIKey         string   `json:"apiKey"`
	GrantKind      string   `json:"grantKind"`
	AllAgents      bool     `json:"allAgents"`
	AgentIDs       []string `json:"agentIds"`
	IdempotencyKey string   `json:"idempotencyKey"`
	Name           string   `json:"name"`
}

func (in *ConnectInput) validate() error {
	if err := checkAPIKey(in.APIKey); err != nil {
		return err
	}
	if in.GrantKind == "" {
		in.GrantKind = "user"
	}
	if in.GrantKind != domain.GrantUser && in.GrantKind != domain.GrantOrganization {
		return domain.Refuse(domain.KindInvalid, "grantKind must be user or organization")
	}
	if len(in.AgentIDs) > 500 {
		return domain.Refuse(domain.KindInvalid, "agentIds may list at most 500 agents")
	}
	for _, id := range in.AgentIDs {
		if !store.ValidID(id) {
			return domain.Refuse(domain.KindInvalid, "agentIds must be UUIDs")
		}
	}
	if !store.ValidID(in.IdempotencyKey) {
		return domain.Refuse(domain.KindInvalid, "idempotencyKey must be a UUID")
	}
	if len(in.Name) > 200 {
		return domain.Refuse(domain.KindInvalid, "name must be at most 200 characters")
	}
	if err := safetext.Line(in.Name); err != nil {
		return domain.Refuse(domain.KindInvalid, "name must be one line: it %s", err)
	}
	return nil
}

func keyLabel(scope string) string {
	if scope == agentmail.ScopeInbox {
		return "AgentMail inbox API key"
	}
	return "AgentMail account API key"
}

// Connect validates the key with the provider, then in one transaction
// vaults it and saves the connection, its human grant and its agent access.
// Concurrent identical requests return one connection.
func (s *Service) Connect(ctx context.Context, a authz.Actor, companyID string, in ConnectInput) (domain.EmailConnection, bool, error) {
	if err := in.validate(); err != nil {
		return domain.EmailConnection{}, false, err
	}
	// Validate before writing anything.
	ident, err := s.keyed(in.APIKey).InspectKey(ctx)
	if err != nil {
		return domain.EmailConnection{}, false, providerError(err)
	}
	var conn domain.EmailConnection
	created := false
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email-account:"+companyID+":"+in.IdempotencyKey); err != nil {
			return err
		}
		for _, id := range in.AgentIDs {
			ag, err := s.Store.GetAgent(ctx, tx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("check agent: %w", err)
			}
			if err != nil || ag.CompanyID != companyID || ag.Status == domain.AgentTerminated {
				return domain.Refuse(domain.KindInvalid, "Select an available company agent")
			}
		}
		name := strings.TrimSpace(in.Name)
		if name == "" {
			name = "AgentMail"
		}
		conn = domain.EmailConnection{CompanyID: companyID, IdempotencyKey: in.IdempotencyKey, Name: name,
			Scope: ident.ScopeType, InboxID: ident.InboxID, OrganizationID: ident.OrganizationID, CreatedByUserID: a.UserID}
		var err error
		if created, err = s.Store.CreateEmailConnection(ctx, tx, &conn); err != nil {
			return err
		}
		if !created {
			// A replay (or the loser of a race): the caller must still have access.
			_, err := s.credentialAccess(ctx, tx, a, conn)
			return err
		}
		secretID, err := s.vaultKey(ctx, tx, companyID, keyLabel(ident.ScopeType), in.APIKey)
		if err != nil {
			return err
		}
		if err := s.bindSecret(ctx, tx, companyID, secretID, TargetConnection, conn.ID, PathControlKey); err != nil {
			return err
		}
		g := domain.EmailGrant{ConnectionID: conn.ID, Kind: in.GrantKind}
		if in.GrantKind == "user" {
			g.SubjectUserID = a.UserID
		}
		if err := s.Store.AddEmailGrant(ctx, tx, companyID, &g); err != nil {
			return err
		}
		var installs []string
		targets := []domain.EmailInstall{}
		if in.AllAgents {
			targets = append(targets, domain.EmailInstall{ConnectionID: conn.ID, TargetType: "company", TargetID: companyID})
		} else {
			for _, id := range uniq(in.AgentIDs) {
				targets = append(targets, domain.EmailInstall{ConnectionID: conn.ID, TargetType: "agent", TargetID: id})
			}
		}
		for i := range targets {
			if err := s.Store.AddEmailInstall(ctx, tx, companyID, &targets[i]); err != nil {
				return err
			}
			installs = append(installs, targets[i].ID)
		}
		if installs == nil {
			installs = []string{}
		}
		if err := s.Store.SetEmailConnectionInitialInstalls(ctx, tx, conn.ID, installs); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "email.connection.created", "email_connection", conn.ID,
			map[string]any{"scope": ident.ScopeType, "grantKind": in.GrantKind, "allAgents": in.AllAgents, "agentCount": len(installs)})
	})
	if err != nil {
		return domain.EmailConnection{}, false, err
	}
	out, err := s.presentConnection(ctx, s.Store.DB, conn.ID)
	return out, created, err
}

func uniq(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// presentConnection loads a connection with its grants and installs.
func (s *Service) presentConnection(ctx context.Context, q db.Querier, id string) (domain.EmailConnection, error) {
	c, err := s.Store.GetEmailConnection(ctx, q, id)
	if err != nil {
		return c, err
	}
	if c.Grants, err = s.Store.ListEmailGrants(ctx, q, id); err != nil {
		return c, err
	}
	c.Installs, err = s.Store.ListEmailInstalls(ctx, q, id)
	return c, err
}

// credentialAccess checks the actor may use a saved credential and returns
// its vaulted key (docs/email-setup.md, "2. Save a credential (optional)").
func (s *Service) credentialAccess(ctx context.Context, q db.Querier, a authz.Actor, c domain.EmailConnection) (string, error) {
	if c.Status != "active" {
		return "", domain.Refuse(domain.KindNotFound, "Active AgentMail connection not found")
	}
	key, err := s.resolveBound(ctx, q, TargetConnection, c.ID, PathControlKey)
	if errors.Is(err, errNoSecret) {
		return "", domain.Refuse(domain.KindForbidden, "AgentMail credential is unavailable")
	}
	if err != nil {
		return "", err
	}
	grants, err := s.Store.ListEmailGrants(ctx, q, c.ID)
	if err != nil {
		return "", err
	}
	if !domain.AnyGrantActive(grants) {
		return "", domain.Refuse(domain.KindForbidden, "AgentMail credential access has been revoked")
	}
	if !a.LocalBoard && !domain.GrantsAllow(grants, a.UserID) {
		return "", domain.Refuse(domain.KindForbidden, "You do not have access to this AgentMail credential")
	}
	return key, nil
}

// loadConnection reads a company's connection (404 when absent or foreign).
func (s *Service) loadConnection(ctx context.Context, q db.Querier, companyID, id string) (domain.EmailConnection, error) {
	c, err := s.Store.GetEmailConnection(ctx, q, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return c, fmt.Errorf("load connection: %w", err)
	}
	if err != nil || c.CompanyID != companyID {
		return c, domain.Refuse(domain.KindNotFound, "Active AgentMail connection not found")
	}
	return c, nil
}

// ConnectionKey returns a saved credential's key after the access check.
func (s *Service) ConnectionKey(ctx context.Context, a authz.Actor, companyID, connectionID string) (domain.EmailConnection, string, error) {
	c, err := s.loadConnection(ctx, s.Store.DB, companyID, connectionID)
	if err != nil {
		return c, "", err
	}
	key, err := s.credentialAccess(ctx, s.Store.DB, a, c)
	return c, key, err
}

// AgentHasAccess reports whether agentID may use the connection (a company
// install or an install for that agent).
func (s *Service) AgentHasAccess(ctx context.Context, q db.Querier, c domain.EmailConnection, agentID string) (bool, error) {
	ins, err := s.Store.ListEmailInstalls(ctx, q, c.ID)
	if err != nil {
		return false, err
	}
	for _, i := range ins {
		if (i.TargetType == "company" && i.TargetID == c.CompanyID) || (i.TargetType == "agent" && i.TargetID == agentID) {
			return true, nil
		}
	}
	return false, nil
}

// allowAgent gives the setup's final agent access to the credential
// (docs/email-setup.md, "2. Save a credential (optional)"): a connection
// created by this same setup request whose installs are still exactly the
// initial ones has them replaced by the final agent; otherwise the agent is
// added unless it already has access.
func (s *Service) allowAgent(ctx context.Context, tx *sql.Tx, a authz.Actor, c domain.EmailConnection, agentID, setupRequestID string) error {
	if err := s.Store.LockEmailConnection(ctx, tx, c.ID); err != nil {
		return err
	}
	c, err := s.Store.GetEmailConnection(ctx, tx, c.ID)
	if err != nil {
		return err
	}
	if _, err := s.credentialAccess(ctx, tx, a, c); err != nil {
		return err
	}
	installs, err := s.Store.ListEmailInstalls(ctx, tx, c.ID)
	if err != nil {
		return err
	}
	initial := c.InitialInstallIDs
	if initial != nil {
		// The marker is consumed on first use, so the default applies once.
		if err := s.Store.SetEmailConnectionInitialInstalls(ctx, tx, c.ID, nil); err != nil {
			return err
		}
	}
	if c.IdempotencyKey == setupRequestID && initial != nil && sameInstalls(installs, initial) {
		for _, i := range installs {
			if err := s.Store.DeleteEmailInstall(ctx, tx, c.ID, i.ID); err != nil {
				return err
			}
		}
		if err := s.Store.AddEmailInstall(ctx, tx, c.CompanyID, &domain.EmailInstall{ConnectionID: c.ID, TargetType: "agent", TargetID: agentID}); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), c.CompanyID, "email.connection.agents_updated", "email_connection", c.ID, map[string]any{"agentId": agentID})
	}
	has, err := s.AgentHasAccess(ctx, tx, c, agentID)
	if err != nil || has {
		return err
	}
	if err := s.Store.AddEmailInstall(ctx, tx, c.CompanyID, &domain.EmailInstall{ConnectionID: c.ID, TargetType: "agent", TargetID: agentID}); err != nil {
		return err
	}
	return s.Store.Audit(ctx, tx, a.AuditActor(), c.CompanyID, "email.connection.agent_added", "email_connection", c.ID, map[string]any{"agentId": agentID})
}

func sameInstalls(installs []domain.EmailInstall, ids []string) bool {
	if len(installs) != len(ids) {
		return false
	}
	for _, i := range installs {
		if !slices.Contains(ids, i.ID) {
			return false
		}
	}
	return true
}

// CredentialOption is one saved credential offered for setup.
type CredentialOption struct {
	ID        string    `json:"id"`
	Scope     string    `json:"scope"`
	InboxID   *string   `json:"inboxId"`
	CreatedAt time.Time `json:"createdAt"`
	Label     string    `json:"label"`
}

// legacyScopeDeadline bounds the /auth/me lookups of credentials saved
// without a scope; legacyScopeWorkers caps their concurrency.
const (
	legacyScopeDeadline = 3 * time.Second
	legacyScopeWorkers  = 4
)

// ListCredentials returns a page of the saved credentials the actor can
// use, newest first (organization and pod keys first within the page):
// scope and label only, never key material. The next page's cursor is
// that of the page's last stored credential, usable by the actor or not,
// so a page can be short but paging never skips one.
func (s *Service) ListCredentials(ctx context.Context, a authz.Actor, companyID string, p store.Page) ([]CredentialOption, *store.Cursor, error) {
	rows, err := s.Store.ListEmailConnections(ctx, s.Store.DB, companyID, p)
	if err != nil {
		return nil, nil, err
	}
	conns, next := store.TrimPage(rows, p, func(c domain.EmailConnection) store.Cursor {
		return store.Cursor{At: c.CreatedAt, ID: c.ID}
	})
	type cand struct {
		c   domain.EmailConnection
		key string
	}
	var cands []cand
	for _, c := range conns {
		key, err := s.credentialAccess(ctx, s.Store.DB, a, c)
		if err != nil {
			if domain.IsRefusal(err) {
				continue
			}
			return nil, nil, err
		}
		cands = append(cands, cand{c, key})
	}
	// Credentials saved without a scope are asked now, a few at a time,
	// all under one shared deadline so a slow provider cannot stall the list.
	dctx, cancel := context.WithTimeout(ctx, legacyScopeDeadline)
	defer cancel()
	sem := make(chan struct{}, legacyScopeWorkers)
	var wg sync.WaitGroup
	for i := range cands {
		if cands[i].c.Scope != "" {
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-dctx.Done():
				cands[i].c.Scope = "unavailable"
				return
			}
			defer func() { <-sem }()
			ident, err := s.keyed(cands[i].key).InspectKey(dctx)
			if err != nil {
				cands[i].c.Scope = "unavailable"
				return
			}
			cands[i].c.Scope, cands[i].c.InboxID = ident.ScopeType, ident.InboxID
		}(i)
	}
	wg.Wait()
	out := make([]CredentialOption, 0, len(cands))
	for _, cd := range cands {
		c := cd.c
		o := CredentialOption{ID: c.ID, Scope: c.Scope, CreatedAt: c.CreatedAt, Label: c.Name}
		if c.InboxID != "" {
			v := c.InboxID
			o.InboxID = &v
		}
		if c.Name == "" || c.Name == "AgentMail" {
			switch c.Scope {
			case agentmail.ScopeInbox:
				o.Label = "AgentMail inbox key · " + c.InboxID
			case "unavailable":
				o.Label = "AgentMail key · unavailable"
			default:
				o.Label = "AgentMail account key"
			}
		}
		out = append(out, o)
	}
	rank := func(scope string) int {
		if scope == agentmail.ScopeOrganization || scope == agentmail.ScopePod {
			return 0
		}
		return 1
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i].Scope) != rank(out[j].Scope) {
			return rank(out[i].Scope) < rank(out[j].Scope)
		}
		return out[i].CreatedAt.After(out[j].CreatedAt)
	})
	return out, next, nil
}

// InspectResult describes what a key can reach.
type InspectResult struct {
	Scope   string         `json:"scope"`
	Inboxes []InboxInfo    `json:"inboxes"`
	Domains []DomainStatus `json:"domains"`
}

// InboxInfo is an inbox visible to a key.
type InboxInfo struct {
	InboxID     string `json:"inboxId"`
	Email       string `json:"email"`
	DisplayName string `json:"displayName,omitempty"`
}

// DomainStatus is a custom domain and its verification status.
type DomainStatus struct {
	DomainID string `json:"domainId"`
	Domain   string `json:"domain"`
	Status   string `json:"status"`
}

// Inspect reports the key's scope, its inboxes and its domains with status.
func (s *Service) Inspect(ctx context.Context, key string) (InspectResult, error) {
	c := s.keyed(key)
	ident, err := c.InspectKey(ctx)
	if err != nil {
		return InspectResult{}, providerError(err)
	}
	out := InspectResult{Scope: ident.ScopeType, Inboxes: []InboxInfo{}, Domains: []DomainStatus{}}
	if ident.ScopeType == agentmail.ScopeInbox {
		in, err := c.GetInbox(ctx, ident.InboxID)
		if err != nil {
			return out, providerError(err)
		}
		out.Inboxes = append(out.Inboxes, InboxInfo{InboxID: in.InboxID, Email: in.Email, DisplayName: in.DisplayName})
		return out, nil
	}
	list, err := allInboxes(ctx, c)
	if err != nil {
		return out, providerError(err)
	}
	for _, in := range list {
		out.Inboxes = append(out.Inboxes, InboxInfo{InboxID: in.InboxID, Email: in.Email, DisplayName: in.DisplayName})
	}
	doms, err := allDomains(ctx, c)
	if err != nil {
		return out, providerError(err)
	}
	for _, d := range doms {
		full, err := c.GetDomain(ctx, d.DomainID)
		if err != nil {
			return out, providerError(err)
		}
		out.Domains = append(out.Domains, DomainStatus{DomainID: full.DomainID, Domain: full.Domain, Status: full.Status})
	}
	return out, nil
}

// AddressCheck is the result of an address check: never "free".
type AddressCheck struct {
	Address string `json:"address"`
	Status  string `json:"status"`
}

// CheckAddress reports whether username@domain is a visible inbox of the
// account ("taken") or not known to be taken ("unknown"). It lists inboxes
// instead of fetching the speculative address: the provider caches negative
// lookups, which would break creating that inbox's key moments later.
func (s *Service) CheckAddress(ctx context.Context, key, username, domainName string) (AddressCheck, error) {
	addr := strings.ToLower(username + "@" + domainName)
	list, err := allInboxes(ctx, s.keyed(key))
	if err != nil {
		return AddressCheck{}, providerError(err)
	}
	for _, in := range list {
		if strings.EqualFold(in.InboxID, addr) || strings.EqualFold(in.Email, addr) {
			return AddressCheck{Address: addr, Status: "taken"}, nil
		}
	}
	return AddressCheck{Address: addr, Status: "unknown"}, nil
}

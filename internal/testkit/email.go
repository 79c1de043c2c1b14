package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
)

// EmailEnv is a server wired to a fresh in-process AgentMail emulator, with
// experimental email connections enabled, one company, one agent and an
// organization-scoped provider key.
type EmailEnv struct {
	*Instance
	Em        *emulator.Server
	Board     *Client
	CompanyID string
	AgentID   string
	OrgKey    string
}

// EmailConfig points cfg at the emulator.
func EmailConfig(cfg config.Config, em *emulator.Server) config.Config {
	cfg.AgentMailAPIURL = em.APIURL()
	cfg.AgentMailWSURL = em.WebSocketURL()
	return cfg
}

// StartEmulator starts an emulator without SMTP, stopped when the test ends.
func StartEmulator(t testing.TB) *emulator.Server {
	t.Helper()
	em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: -1})
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() { em.Close() })
	return em
}

// NewEmailEnv starts an emulator and a server on databaseURL ("" = SQLite).
// mutate, when given, adjusts the configuration before start.
func NewEmailEnv(t testing.TB, databaseURL string, mutate ...func(*config.Config)) *EmailEnv {
	t.Helper()
	em := StartEmulator(t)
	cfg := EmailConfig(Config(t, databaseURL), em)
	for _, m := range mutate {
		m(&cfg)
	}
	inst := Start(t, cfg)
	board := NewClient(t, inst.URL())
	api, ctx, on := board.API(), context.Background(), true
	Must(api.PatchSettings(ctx, apiclient.SettingsPatch{
		Experimental: &apiclient.ExperimentalPatch{EnableChatConnectors: &on}}))(t, "enable email connections")
	co := Must(api.CreateCompany(ctx, "Mail Co"))(t, "create company")
	name, adapter := "Mail Agent", "process"
	ag := Must(api.CreateAgent(ctx, co.ID, apiclient.AgentInput{Name: &name, AdapterType: &adapter,
		AdapterConfig: json.RawMessage(`{"command":"/bin/true"}`)}))(t, "create agent")
	_, key := em.CreateOrganization("Acme Mail")
	return &EmailEnv{Instance: inst, Em: em, Board: board, CompanyID: co.ID, AgentID: ag.ID, OrgKey: key}
}

// SetupInbox connects an inbox with in and returns its summary; an empty
// assigned agent, key source or idempotency key is the env's agent, the
// org key and a fresh key.
func (e *EmailEnv) SetupInbox(t testing.TB, in email.SetupInput) domain.EmailEndpointSummary {
	t.Helper()
	if in.AssignedAgentID == "" {
		in.AssignedAgentID = e.AgentID
	}
	if in.APIKey == "" && in.CredentialConnectionID == "" {
		in.APIKey = e.OrgKey
	}
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = NewUUID()
	}
	return Must(e.Board.API().SetupInbox(context.Background(), e.CompanyID, in))(t, "set up inbox")
}

// Setup connects an inbox for the env's agent with the org key and returns
// the endpoint summary as a map. extra overrides fields of the setup body
// (email.SetupInput's JSON names; a nil value drops the field); a field
// the route does not take fails the test.
func (e *EmailEnv) Setup(username string, extra map[string]any) map[string]any {
	t := e.Board.T
	t.Helper()
	body := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": username,
		"idempotencyKey": NewUUID()}
	for k, v := range extra {
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("encode setup body: %v", err)
	}
	var in email.SetupInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("setup body %s: %v", raw, err)
	}
	return AsMap(t, Must(e.Board.API().SetupInbox(context.Background(), e.CompanyID, in))(t, "set up inbox"))
}

// Control runs an inbox control action, retrying while an email operation
// holds a thread lease (stopping an inbox is refused meanwhile, by design).
func (e *EmailEnv) Control(t testing.TB, endpointID, action string) domain.EmailEndpointSummary {
	t.Helper()
	var out domain.EmailEndpointSummary
	Eventually(t, 30*time.Second, "inbox "+action, func() bool {
		sum, err := e.Board.API().ControlInbox(context.Background(), endpointID, action)
		if err == nil {
			out = sum
		}
		return err == nil
	})
	return out
}

// Reconnect reconnects an inbox with in and returns the summary, retrying
// only the 409 the server answers while an email operation holds the
// inbox ("retry shortly", by design); any other refusal fails the test.
func (e *EmailEnv) Reconnect(t testing.TB, endpointID string, in email.ReconnectInput) domain.EmailEndpointSummary {
	t.Helper()
	var out domain.EmailEndpointSummary
	Eventually(t, 30*time.Second, "inbox reconnect", func() bool {
		sum, err := e.Board.API().ReconnectInbox(context.Background(), endpointID, in)
		switch {
		case err == nil:
			out = sum
			return true
		case Status(err) == http.StatusConflict:
			return false
		}
		t.Fatalf("reconnect: %v", err)
		return false
	})
	return out
}

// Deliver delivers req to address through the emulator, from Jane Doe
// unless req names a sender, and fails the test when it cannot.
func (e *EmailEnv) Deliver(t testing.TB, address string, req emulator.DeliverRequest) emulator.DeliverResult {
	t.Helper()
	if req.From == "" {
		req.From = "Jane Doe <jane@example.com>"
	}
	res, err := e.Em.Deliver(address, req)
	if err != nil {
		t.Fatalf("deliver: %v", err)
	}
	return res
}

// Deliveries returns the admitted events (all states) of the inbox
// endpointID.
func (e *EmailEnv) Deliveries(t testing.TB, endpointID string) []store.EmailDelivery {
	t.Helper()
	ds, err := e.Store.ListDeliveries(context.Background(), e.Store.DB, endpointID)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Settled reports whether no delivery of ds is waiting (each is
// processed or filtered).
func Settled(ds []store.EmailDelivery) bool {
	for _, d := range ds {
		if d.State != domain.DeliveryProcessed && d.State != domain.DeliveryFiltered {
			return false
		}
	}
	return true
}

package testkit

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/domain"
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
	board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	cid := ID(board.JSON("POST", "/api/companies", map[string]any{"name": "Mail Co"}, 201))
	aid := ID(board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mail Agent", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, key := em.CreateOrganization("Acme Mail")
	return &EmailEnv{Instance: inst, Em: em, Board: board, CompanyID: cid, AgentID: aid, OrgKey: key}
}

// Setup connects an inbox for the env's agent with the org key and returns
// the endpoint summary.
func (e *EmailEnv) Setup(username string, extra map[string]any) map[string]any {
	body := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": username,
		"idempotencyKey": NewUUID()}
	for k, v := range extra {
		body[k] = v
	}
	return e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", body, 201)
}

// Control runs an inbox control action, retrying while an email operation
// holds a thread lease (stopping an inbox is refused meanwhile, by design).
func (e *EmailEnv) Control(t testing.TB, endpointID, action string) map[string]any {
	t.Helper()
	var out map[string]any
	Eventually(t, 30*time.Second, "inbox "+action, func() bool {
		st, body := e.Board.Do("POST", "/api/email/inboxes/"+endpointID+"/control", map[string]any{"action": action})
		if st == 200 {
			_ = json.Unmarshal(body, &out)
		}
		return st == 200
	})
	return out
}

// Reconnect reconnects an inbox with body and returns the summary,
// retrying only the 409 the server answers while an email operation holds
// the inbox ("retry shortly", by design); any other status fails the test.
func (e *EmailEnv) Reconnect(t testing.TB, endpointID string, body map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	Eventually(t, 30*time.Second, "inbox reconnect", func() bool {
		st, raw := e.Board.Do("POST", "/api/email/inboxes/"+endpointID+"/reconnect", body)
		switch st {
		case http.StatusOK:
			_ = json.Unmarshal(raw, &out)
			return true
		case http.StatusConflict:
			return false
		}
		t.Fatalf("reconnect: status %d: %s", st, raw)
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

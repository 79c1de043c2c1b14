// Package demo seeds and runs the one-command demo: an in-process AgentMail
// emulator and a company whose agent answers email end to end through the
// same API path any agent uses.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/server"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Names of the seeded objects.
const (
	CompanyName = "Demo Co"
	AgentName   = "Mail Assistant"
	Username    = "assistant"
	Address     = "assistant@agentmail.to"
	// DefaultListen is the server address `paperclipai api` assumes.
	DefaultListen = "127.0.0.1:3100"
)

// state is what a demo home remembers between runs.
type state struct {
	APIKey     string `json:"apiKey"`
	EndpointID string `json:"endpointId"`
}

func statePath(home string) string { return filepath.Join(home, "instance", "demo.json") }

func loadState(home string) (state, error) {
	var st state
	b, err := os.ReadFile(statePath(home))
	if errors.Is(err, os.ErrNotExist) {
		r := make([]byte, 12)
		_, _ = rand.Read(r)
		st = state{APIKey: "am_demo_" + hex.EncodeToString(r), EndpointID: store.NewID()}
		return st, saveState(home, st)
	}
	if err != nil {
		return st, fmt.Errorf("demo state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("demo state: %w", err)
	}
	return st, nil
}

func saveState(home string, st state) error {
	if err := os.MkdirAll(filepath.Dir(statePath(home)), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	return os.WriteFile(statePath(home), b, 0o600)
}

// EmulatorStatePath is the demo emulator's state file: its mailboxes
// survive a restart of the demo.
func EmulatorStatePath(home string) string {
	return filepath.Join(home, "instance", "demo-emulator.json")
}

// StartEmulator starts the demo's emulator with the home's persisted
// organization key (so a re-run recognises the same account) and its saved
// mailboxes (so old threads, messages and keys are still there).
func StartEmulator(ctx context.Context, home, listen, smtp string) (*emulator.Server, error) {
	st, err := loadState(home)
	if err != nil {
		return nil, err
	}
	return emulator.Start(ctx, emulator.Options{Listen: listen, SMTPListen: smtp, APIKeys: []string{st.APIKey},
		StateFile: EmulatorStatePath(home)})
}

// Seeded describes the demo objects.
type Seeded struct {
	CompanyID  string
	AgentID    string
	EndpointID string
	Address    string
	// APIKey is the emulator organization's key, printed so a user can
	// connect AgentMail in the browser (it only opens the local emulator).
	APIKey string
}

// Seed creates (or, on a re-run, reuses) the demo company, its agent and
// the agent's inbox. ag is the demo agent's adapter (ExampleAgent or
// CLIAgent).
func Seed(ctx context.Context, srv *server.Server, em *emulator.Server, ag Agent) (Seeded, error) {
	var out Seeded
	st, err := loadState(srv.Config.Home)
	if err != nil {
		return out, err
	}
	board, err := srv.Store.GetUserByEmail(ctx, srv.DB, store.LocalBoardEmail)
	if err != nil {
		return out, err
	}
	actor := authz.Actor{Kind: authz.KindBoard, UserID: board.ID, IsInstanceAdmin: true, LocalBoard: true}
	settings, err := srv.Store.GetSettings(ctx, srv.DB)
	if err != nil {
		return out, err
	}
	settings.Experimental.EnableChatConnectors = true
	if ag.CLI != nil {
		if settings.AgentCLI == nil {
			settings.AgentCLI = map[string]domain.AgentCLISettings{}
		}
		settings.AgentCLI[ag.Type] = *ag.CLI
	}
	if err := srv.Store.PutSettings(ctx, srv.DB, settings); err != nil {
		return out, err
	}
	companies, err := srv.Store.ListCompanies(ctx, srv.DB, "")
	if err != nil {
		return out, err
	}
	for _, c := range companies {
		if c.Name == CompanyName {
			out.CompanyID = c.ID
		}
	}
	if out.CompanyID == "" {
		c, err := srv.Store.CreateCompany(ctx, srv.DB, CompanyName, board.ID)
		if err != nil {
			return out, err
		}
		out.CompanyID = c.ID
	}
	agents, err := srv.Store.ListAgents(ctx, srv.DB, out.CompanyID)
	if err != nil {
		return out, err
	}
	cfg := ag.Config
	for _, a := range agents {
		if a.Name == AgentName && a.Status != domain.AgentTerminated {
			out.AgentID = a.ID
			if string(a.AdapterConfig) != string(cfg) || a.AdapterType != ag.Type || !a.HostExecutionApproved {
				// The binary may have moved since the last run, or another
				// demo agent was chosen. The server itself writes this
				// configuration: it may run on the host.
				a.AdapterType, a.AdapterConfig, a.HostExecutionApproved = ag.Type, cfg, true
				if err := srv.Store.UpdateAgent(ctx, srv.DB, &a); err != nil {
					return out, err
				}
			}
		}
	}
	if out.AgentID == "" {
		a := domain.Agent{CompanyID: out.CompanyID, Name: AgentName, AdapterType: ag.Type, AdapterConfig: cfg, HostExecutionApproved: true}
		if err := srv.Store.CreateAgent(ctx, srv.DB, &a); err != nil {
			return out, err
		}
		out.AgentID = a.ID
	}
	out.EndpointID, out.Address, out.APIKey = st.EndpointID, Address, st.APIKey
	// The emulator's key is saved as an AgentMail connection (idempotent by
	// the endpoint's key, so a re-run finds the same one), the way the
	// browser's Connect AgentMail step saves it: the AgentMail pages then
	// show the connection the demo inbox uses instead of "No AgentMail
	// connection yet" above an address that receives mail.
	conn, _, err := srv.Email.Connect(ctx, actor, out.CompanyID, email.ConnectInput{APIKey: st.APIKey,
		GrantKind: domain.GrantOrganization, AllAgents: true, IdempotencyKey: st.EndpointID, Name: "AgentMail emulator (demo)"})
	if err != nil {
		return out, fmt.Errorf("save the demo AgentMail connection: %w", err)
	}
	ep, err := srv.Store.GetEndpoint(ctx, srv.DB, st.EndpointID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && ep.Status == domain.EndpointDraft):
		_, err = srv.Email.Setup(ctx, actor, out.CompanyID, email.SetupInput{AssignedAgentID: out.AgentID, CredentialConnectionID: conn.ID,
			Username: Username, ReceiveMode: domain.ReceiveWebSocket, IdempotencyKey: st.EndpointID})
		if err != nil {
			return out, fmt.Errorf("connect the demo inbox: %w", err)
		}
	case err != nil:
		return out, err
	case ep.Status == domain.EndpointArchived:
		return out, errors.New("the demo inbox was disconnected; remove " + statePath(srv.Config.Home) + " to seed a new one")
	default:
		// The emulator's state file normally still holds the inbox and its
		// runtime key. When it does not (a home from before the state file,
		// or the file was removed), recreate the inbox (idempotent by
		// client_id) and reconnect with the account key, which keeps the
		// inbox identity, conversations and tasks.
		c, err := agentmail.New(agentmail.Options{BaseURL: em.APIURL(), APIKey: st.APIKey})
		if err != nil {
			return out, err
		}
		if _, err := c.GetInbox(ctx, Address); err == nil {
			return out, nil
		} else if !errors.Is(err, agentmail.ErrNotFound) {
			return out, fmt.Errorf("look up the demo inbox: %w", err)
		}
		if _, err := c.CreateInbox(ctx, agentmail.CreateInboxRequest{Username: Username, DisplayName: AgentName,
			ClientID: "paperclip-" + st.EndpointID}); err != nil && !agentmail.IsAddressTaken(err) {
			return out, fmt.Errorf("recreate the demo inbox: %w", err)
		}
		if _, err := srv.Email.Reconnect(ctx, actor, st.EndpointID, email.ReconnectInput{APIKey: st.APIKey,
			ReceiveMode: domain.ReceiveWebSocket}); err != nil {
			return out, fmt.Errorf("reconnect the demo inbox: %w", err)
		}
	}
	return out, nil
}

// Instructions is the text printed when the demo is ready.
func Instructions(srv *server.Server, em *emulator.Server, s Seeded) string {
	smtp := em.SMTPAddr()
	var b strings.Builder
	fmt.Fprintf(&b, "\nPaperclip demo is running.\n\n")
	fmt.Fprintf(&b, "  UI and API:        %s  (API under %s/api)\n", srv.URL(), srv.URL())
	fmt.Fprintf(&b, "  Company:           %s (%s)\n", CompanyName, s.CompanyID)
	fmt.Fprintf(&b, "  Agent:             %s, answering mail to %s\n", AgentName, s.Address)
	fmt.Fprintf(&b, "  AgentMail emulator: %s (outbox: %s/_emulator/outbox)\n\n", em.URL(), em.URL())
	fmt.Fprintf(&b, "Send a first email:\n")
	fmt.Fprintf(&b, "  paperclipai emulator send --url %s --to %s --from you@example.com --subject \"Hello\" --text \"Can you help me?\"\n", em.URL(), s.Address)
	if smtp != "" {
		fmt.Fprintf(&b, "  or any SMTP client to %s (for example: swaks --server %s --to %s)\n", smtp, smtp, s.Address)
	}
	// `paperclipai api` calls 127.0.0.1:3100 unless told otherwise: name
	// the server when --listen moved it.
	api := "paperclipai api"
	if u := srv.URL(); u != "http://"+DefaultListen {
		api = "PAPERCLIP_API_URL=" + u + "/api paperclipai api"
	}
	fmt.Fprintf(&b, "\nThen watch the task, the agent's run and its reply:\n")
	fmt.Fprintf(&b, "  %s/c/%s/tasks  (or: %s GET /companies/%s/issues)\n", srv.URL(), s.CompanyID, api, s.CompanyID)
	fmt.Fprintf(&b, "  curl -s %s/_emulator/outbox\n", em.URL())
	// The CLI finds the server through its environment (127.0.0.1:3100
	// by default) and needs the company: print the one line that points
	// it at this demo, moved ports included.
	env := "PAPERCLIP_COMPANY_ID=" + s.CompanyID
	if u := srv.URL(); u != "http://"+DefaultListen {
		env = "PAPERCLIP_API_URL=" + u + "/api " + env
	}
	fmt.Fprintf(&b, "\nUse the paperclipai CLI with this demo from another terminal:\n")
	fmt.Fprintf(&b, "  export %s\n", env)
	fmt.Fprintf(&b, "  paperclipai email status\n")
	fmt.Fprintf(&b, "\nOr set up email yourself in the browser, without any API call:\n")
	fmt.Fprintf(&b, "  1. Open %s/c/%s/apps/agentmail/connect\n", srv.URL(), s.CompanyID)
	fmt.Fprintf(&b, "  2. Paste the emulator's AgentMail API key when asked: %s\n", s.APIKey)
	fmt.Fprintf(&b, "  3. Click \"Give an agent an email address\"; the ready screen shows how to send it a test email.\n\n")
	return b.String()
}

// Package mcpserver is the agents' tool endpoint at /mcp (MCP Streamable
// HTTP, stateless). The bearer token is the run-scoped token, so every tool
// call acts as that agent in that run. The agentmail_* tools exist only for
// agents with an active, authorized inbox, and the assignment is resolved
// again on every call; search_api and call_api expose the agent-callable
// API catalog.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Tool names.
const (
	ToolInboxes    = "agentmail_inboxes"
	ToolReadThread = "agentmail_read_thread"
	ToolSend       = "agentmail_send"
	ToolDelivery   = "agentmail_delivery"
	ToolSearchAPI  = "search_api"
	ToolCallAPI    = "call_api"
)

// errUnassigned is returned when a tool's inbox assignment is gone.
var errUnassigned = domain.Refuse(domain.KindForbidden, "This connector is no longer assigned or authorized")

// errForeignTask refuses a send that is not about the run's current task.
var errForeignTask = domain.Refuse(domain.KindForbidden, "Email send must belong to the current task")

// Server serves /mcp.
type Server struct {
	Store     *store.Store
	Heartbeat *heartbeat.Service
	Email     *email.Service
	Outbound  *outbound.Service
	Authz     *authz.Service
	// API is the /api handler call_api dispatches to in-process.
	API http.Handler
	Log *slog.Logger
}

type ctxKey struct{}

type caller struct {
	token string
	run   domain.Run
	agent domain.Agent
}

// Handler returns the authenticated MCP handler.
func (s *Server) Handler() http.Handler {
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		run, agent, err := s.Heartbeat.AuthenticateToken(ctx, token)
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: agent.ID, Expiration: time.Now().Add(time.Hour),
			Extra: map[string]any{"caller": caller{token: token, run: run, agent: agent}}}, nil
	}
	h := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.Log})
	return auth.RequireBearerToken(verify, nil)(h)
}

func callerOf(ctx context.Context, extra *mcp.RequestExtra) (caller, error) {
	var ti *auth.TokenInfo
	if extra != nil {
		ti = extra.TokenInfo
	}
	if ti == nil {
		ti = auth.TokenInfoFromContext(ctx)
	}
	if ti == nil {
		return caller{}, authz.ErrUnauthenticated
	}
	c, ok := ti.Extra["caller"].(caller)
	if !ok {
		return caller{}, authz.ErrUnauthenticated
	}
	return c, nil
}

func (c caller) actor() authz.Actor {
	ag, run := c.agent, c.run
	return authz.Actor{Kind: authz.KindAgent, Agent: &ag, Run: &run, RunHeaderMatches: true}
}

// assigned returns the agent's active, authorized inboxes, sorted by id.
func (s *Server) assigned(ctx context.Context, c caller) ([]domain.EmailEndpointSummary, error) {
	list, err := s.Email.ListInboxes(ctx, c.actor(), c.agent.CompanyID)
	if err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list, nil
}

// serverFor builds the per-caller tool set: agentmail_* only for agents
// with an assigned inbox right now.
func (s *Server) serverFor(r *http.Request) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "paperclip", Version: buildinfo.Version}, nil)
	c, err := callerOf(r.Context(), nil)
	if err == nil {
		if list, err := s.assigned(r.Context(), c); err == nil && len(list) > 0 {
			s.addEmailTools(srv)
		} else if isToolCall(r) && s.everAssigned(r.Context(), c) {
			// Listed only while an inbox is active and authorized, but a
			// call by an agent that lost its assignment reaches the tool so
			// it can say why it is refused.
			s.addEmailTools(srv)
		}
	}
	s.addAPITools(srv)
	return srv
}

// isToolCall peeks at the JSON-RPC method of a stateless request, leaving
// the body intact for the transport.
func isToolCall(r *http.Request) bool {
	if r.Body == nil || r.Method != http.MethodPost {
		return false
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil {
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(raw, &msg) == nil && msg.Method == "tools/call"
}

// everAssigned reports whether the agent has a non-archived inbox, active or not.
func (s *Server) everAssigned(ctx context.Context, c caller) bool {
	eps, err := s.Store.ListEndpoints(ctx, s.Store.DB, c.agent.CompanyID)
	if err != nil {
		return false
	}
	for _, ep := range eps {
		if ep.AssignedAgentID == c.agent.ID {
			return true
		}
	}
	return false
}

// result renders v as the tool's JSON text (and structured) result.
func result(v any) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}

// toolError reports a failure as a tool error result the agent can read:
// a service's refusal (a *domain.Refusal) by its message, anything else by
// its text. The tools map refusals themselves; status codes belong to the
// HTTP API only.
func toolError(err error) (*mcp.CallToolResult, any, error) {
	msg := err.Error()
	if r, ok := domain.AsRefusal(err); ok {
		msg = r.Message
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil, nil
}

type empty struct{}

// SendArgs is the agentmail_send input: the send request under "request".
type SendArgs struct {
	Request SendInput `json:"request" jsonschema:"the email send or reply request"`
}

// SendInput mirrors the send API body.
type SendInput struct {
	EndpointID       string   `json:"endpointId" jsonschema:"the inbox record id from agentmail_inboxes (not the address)"`
	ParentIssueID    string   `json:"parentIssueId,omitempty" jsonschema:"new email: the current task id (or its identifier, ACME-12)"`
	ConversationID   string   `json:"conversationId,omitempty" jsonschema:"reply: the bound conversation id from the thread"`
	ReplyToMessageID string   `json:"replyToMessageId,omitempty" jsonschema:"reply: the exact provider message id to answer"`
	ReplyAll         *bool    `json:"replyAll,omitempty" jsonschema:"reply to every visible recipient (default false; never Bcc)"`
	To               []string `json:"to,omitempty"`
	Cc               []string `json:"cc,omitempty"`
	Bcc              []string `json:"bcc,omitempty"`
	Subject          *string  `json:"subject,omitempty"`
	Text             string   `json:"text" jsonschema:"the message body"`
	AttachmentIDs    []string `json:"attachmentIds,omitempty" jsonschema:"attachments already on the source task"`
	IdempotencyKey   string   `json:"idempotencyKey" jsonschema:"a new UUID per send; keep it and the payload identical on retry"`
}

// DeliveryArgs is the agentmail_delivery input: the send's id as sendId
// or, under its older name, publicationId (one of the two).
type DeliveryArgs struct {
	SendID        string `json:"sendId,omitempty" jsonschema:"the id returned by agentmail_send"`
	PublicationID string `json:"publicationId,omitempty" jsonschema:"the same id under its older name; give sendId or publicationId"`
}

// id is the send the arguments name, or an error when they name none, a
// malformed one or two different ones.
func (in DeliveryArgs) id() (string, error) {
	switch {
	case in.SendID != "" && in.PublicationID != "" && in.SendID != in.PublicationID:
		return "", errors.New("sendId and publicationId name different sends; give one")
	case in.SendID != "":
		if !store.ValidID(in.SendID) {
			return "", errors.New("sendId must be a UUID")
		}
		return in.SendID, nil
	}
	if !store.ValidID(in.PublicationID) {
		return "", errors.New("publicationId must be a UUID")
	}
	return in.PublicationID, nil
}

const sendDescription = "Send an email or reply through an assigned inbox for the current task. Comments and final responses never send email; only this explicit action does. " +
	"A send needs a new UUID idempotencyKey; keep the key and the identical payload on retry. Replies use conversationId and replyToMessageId from agentmail_read_thread; " +
	"replyAll defaults to false and never includes Bcc. A new email needs endpointId, parentIssueId (the current task), to, subject and text. Sending does not close the task. " +
	"Outcome awaiting_review means a person will review this email before it is sent; do not send it again."

func (s *Server) addEmailTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: ToolInboxes, Description: "List the agent's active assigned email inboxes; use an inbox's id as endpointId."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			c, list, err := s.resolve(ctx, req)
			if err != nil {
				return toolError(err)
			}
			_ = c
			return result(list)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolReadThread, Description: "Read the email thread bound to the run's current task (null when the task has no email)."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			c, _, err := s.resolve(ctx, req)
			if errors.Is(err, errUnassigned) && c.run.IssueID != "" {
				// The agent's only inbox is paused or revoked: say so the
				// way the HTTP thread read does, when the task is its mail.
				if _, terr := s.Outbound.Thread(ctx, c.actor(), c.agent.CompanyID, c.run.IssueID); terr != nil {
					return toolError(terr)
				}
			}
			if err != nil {
				return toolError(err)
			}
			if c.run.IssueID == "" {
				return result(nil)
			}
			th, err := s.Outbound.Thread(ctx, c.actor(), c.agent.CompanyID, c.run.IssueID)
			if err != nil {
				return toolError(err)
			}
			return result(th)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolSend, Description: sendDescription},
		func(ctx context.Context, req *mcp.CallToolRequest, in SendArgs) (*mcp.CallToolResult, any, error) {
			c, _, err := s.resolve(ctx, req)
			if err != nil {
				return toolError(err)
			}
			r := outbound.SendRequest(in.Request)
			if r.ParentIssueID != "" {
				// The current task by its UUID or its identifier (ACME-12).
				if r.ParentIssueID, err = s.Outbound.TaskRef(ctx, c.agent.CompanyID, r.ParentIssueID); err != nil {
					return toolError(err)
				}
			}
			// The send must belong to the run's current task.
			if r.ParentIssueID != "" && r.ParentIssueID != c.run.IssueID {
				return toolError(errForeignTask)
			}
			if r.ConversationID != "" {
				th, err := s.Outbound.Thread(ctx, c.actor(), c.agent.CompanyID, c.run.IssueID)
				if domain.IsRefusal(err, domain.KindConflict) {
					return toolError(err) // the inbox is paused or its credential unavailable: say so
				}
				if err != nil || th == nil || th.ConversationID != r.ConversationID {
					return toolError(errForeignTask)
				}
			}
			out, err := s.Outbound.Accept(ctx, c.actor(), c.agent.CompanyID, r)
			if err != nil {
				return toolError(err)
			}
			return result(out)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolDelivery, Description: "Read a send's outcome (queued, sent, delivered, failed, uncertain, awaiting_review, rejected, expired). Queued means persisted, not sent; never resend on a timeout. " +
		"awaiting_review: a person will review this email; do not send it again. rejected: read the reviewer's reason in review.reason."},
		func(ctx context.Context, req *mcp.CallToolRequest, in DeliveryArgs) (*mcp.CallToolResult, any, error) {
			c, _, err := s.resolve(ctx, req)
			if err != nil {
				return toolError(err)
			}
			id, err := in.id()
			if err != nil {
				return toolError(err)
			}
			if rs, ok := sandbox.RestrictionFrom(ctx); ok && !rs.OwnPublication(ctx, id) {
				// Through a sandbox bridge, as on the bridge itself: only
				// the sends of the run's own task.
				return toolError(errors.New("not available inside the sandbox"))
			}
			out, err := s.Outbound.SendStatus(ctx, c.actor(), c.agent.CompanyID, id)
			if err != nil {
				return toolError(err)
			}
			return result(out)
		})
}

// resolve re-checks, on every call, that the run is live and the agent
// still has an assigned, authorized inbox.
func (s *Server) resolve(ctx context.Context, req *mcp.CallToolRequest) (caller, []domain.EmailEndpointSummary, error) {
	c, err := callerOf(ctx, req.Extra)
	if err != nil {
		return c, nil, err
	}
	run, agent, err := s.Heartbeat.AuthenticateToken(ctx, c.token)
	if err != nil {
		return c, nil, err
	}
	c.run, c.agent = run, agent
	list, err := s.assigned(ctx, c)
	if err != nil {
		return c, nil, err
	}
	if len(list) == 0 {
		return c, nil, errUnassigned
	}
	return c, list, nil
}

// SearchArgs is the search_api input.
type SearchArgs struct {
	Query string `json:"query,omitempty" jsonschema:"words to match against operation ids, paths and summaries"`
}

// CallArgs is the call_api input.
type CallArgs struct {
	OperationID string            `json:"operationId" jsonschema:"an operationId from search_api"`
	PathParams  map[string]string `json:"pathParams,omitempty"`
	Query       map[string]string `json:"query,omitempty"`
	Body        any               `json:"body,omitempty" jsonschema:"the JSON request body, for operations that take one"`
}

func (s *Server) addAPITools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: ToolSearchAPI, Description: "Search the agent-callable Paperclip API catalog."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SearchArgs) (*mcp.CallToolResult, any, error) {
			if _, err := callerOf(ctx, req.Extra); err != nil {
				return toolError(err)
			}
			return result(search(in.Query))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolCallAPI, Description: "Call a catalog operation as this agent in this run (the run's authority is applied)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in CallArgs) (*mcp.CallToolResult, any, error) {
			c, err := callerOf(ctx, req.Extra)
			if err != nil {
				return toolError(err)
			}
			op, ok := lookup(in.OperationID)
			if !ok {
				return toolError(fmt.Errorf("unknown operationId %q; use search_api", in.OperationID))
			}
			if op.BoardOnly {
				return toolError(errors.New("this operation is for board users only"))
			}
			if strings.HasPrefix(op.OperationID, "email.") {
				if _, _, err := s.resolve(ctx, req); err != nil {
					return toolError(err)
				}
			}
			return s.callAPI(ctx, c, op, in)
		})
}

// callAPI dispatches in-process to the API handler with the run's token and
// run id, so every normal authorization rule applies.
func (s *Server) callAPI(ctx context.Context, c caller, op Operation, in CallArgs) (*mcp.CallToolResult, any, error) {
	path := op.Path
	params := map[string]string{"companyId": c.agent.CompanyID}
	for k, v := range in.PathParams {
		params[k] = v
	}
	if _, ok := params["publicationId"]; !ok && params["sendId"] != "" {
		// A send's id under its new name fills the operation's
		// {publicationId}.
		params["publicationId"] = params["sendId"]
	}
	for k, v := range params {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	if strings.Contains(path, "{") {
		return toolError(fmt.Errorf("missing path parameters for %s", op.OperationID))
	}
	q := url.Values{}
	for k, v := range in.Query {
		q.Set(k, v)
	}
	target := "/api" + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	if op.HasBody {
		if in.Body == nil {
			return toolError(fmt.Errorf("%s needs a body", op.OperationID))
		}
		raw, err := json.Marshal(in.Body)
		if err != nil {
			return toolError(fmt.Errorf("%s: body is not JSON", op.OperationID))
		}
		body = bytes.NewReader(raw)
	}
	r := httptest.NewRequestWithContext(ctx, op.Method, target, body)
	r.RemoteAddr = "127.0.0.1:0"
	r.Header.Set("Authorization", "Bearer "+c.token)
	r.Header.Set("X-Paperclip-Run-Id", c.run.ID)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	api := s.API
	if rs, ok := sandbox.RestrictionFrom(ctx); ok {
		// A sandboxed run's call goes through its bridge's allowlist.
		api = rs.API
	}
	api.ServeHTTP(w, r)
	out := map[string]any{"status": w.Code}
	if next := w.Header().Get("X-Next-Cursor"); next != "" {
		// A list answers one page (docs/api.md, "Paging"): the caller
		// continues with query {"cursor": nextCursor}.
		out["nextCursor"] = next
	}
	var decoded any
	if json.Unmarshal(w.Body.Bytes(), &decoded) == nil {
		out["body"] = decoded
	} else {
		out["body"] = w.Body.String()
	}
	res, _, err := result(out)
	if err == nil && w.Code >= 400 {
		res.IsError = true
	}
	return res, nil, err
}

package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

func (s *Server) routes() {
	s.HandleFunc("GET /api/health", s.health)
	s.HandleFunc("GET /api/instance/settings", s.getSettings)
	s.HandleFunc("PATCH /api/instance/settings", s.patchSettings)

	s.HandleFunc("POST /api/companies", s.createCompany)
	s.HandleFunc("GET /api/companies", s.listCompanies)
	s.HandleFunc("GET /api/companies/{companyId}", s.getCompany)
	s.HandleFunc("POST /api/companies/{companyId}/members", s.addMember)
	s.HandleFunc("GET /api/companies/{companyId}/members", s.listMembers)
	s.HandleFunc("POST /api/companies/{companyId}/board-keys", s.createBoardKey)

	s.HandleFunc("POST /api/companies/{companyId}/agents", s.createAgent)
	s.HandleFunc("GET /api/companies/{companyId}/agents", companyList(s, s.Store.ListAgents))
	s.HandleFunc("GET /api/agents/{agentId}", s.getAgent)
	s.HandleFunc("PATCH /api/agents/{agentId}", s.patchAgent)
	s.HandleFunc("POST /api/agents/{agentId}/wakeup", s.wakeup)

	s.HandleFunc("POST /api/companies/{companyId}/projects", s.createProject)
	s.HandleFunc("GET /api/companies/{companyId}/projects", companyList(s, s.Store.ListProjects))
	s.HandleFunc("POST /api/companies/{companyId}/environments", s.createEnvironment)
	s.HandleFunc("GET /api/companies/{companyId}/environments", companyList(s, s.Store.ListEnvironments))

	s.HandleFunc("POST /api/companies/{companyId}/issues", s.createIssue)
	s.HandleFunc("GET /api/companies/{companyId}/issues", s.listIssues)
	s.HandleFunc("GET /api/issues/{issueId}", s.getIssue)
	s.HandleFunc("PATCH /api/issues/{issueId}", s.patchIssue)
	s.HandleFunc("GET /api/issues/{issueId}/comments", s.listComments)
	s.HandleFunc("POST /api/issues/{issueId}/comments", s.createComment)
	s.HandleFunc("GET /api/issues/{issueId}/attachments", s.listAttachments)
	s.HandleFunc("POST /api/issues/{issueId}/attachments", s.uploadAttachment)
	s.HandleFunc("GET /api/attachments/{attachmentId}/content", s.downloadAttachment)

	s.HandleFunc("GET /api/companies/{companyId}/heartbeat-runs", s.listRuns)
	s.HandleFunc("GET /api/heartbeat-runs/{runId}", s.getRun)
	s.HandleFunc("GET /api/heartbeat-runs/{runId}/log", s.getRunLog)
	s.HandleFunc("GET /api/companies/{companyId}/activity", s.listActivity)

	s.HandleFunc("POST /api/companies/{companyId}/secrets", s.createSecret)
	s.HandleFunc("GET /api/companies/{companyId}/secrets", s.listSecrets)
	s.HandleFunc("POST /api/secrets/{secretId}/versions", s.rotateSecret)
	s.HandleFunc("DELETE /api/secrets/{secretId}", s.deleteSecret)

	s.HandleFunc("POST /api/companies/{companyId}/action-policies", s.createPolicy)
	s.HandleFunc("GET /api/companies/{companyId}/action-policies", companyList(s,
		func(ctx context.Context, q db.Querier, companyID string) ([]domain.ActionPolicy, error) {
			return s.Store.ListPolicies(ctx, q, companyID, "")
		}))
	s.HandleFunc("DELETE /api/companies/{companyId}/action-policies/{policyId}", s.deletePolicy)

	s.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) error {
		return Errorf(http.StatusNotFound, "no such API route: %s %s", r.Method, r.URL.Path)
	})
}

// Audit writes an activity entry for a change made by the request's actor,
// inside the change's transaction.
func (s *Server) Audit(ctx context.Context, tx *sql.Tx, a authz.Actor, companyID, action, entityType, entityID string, details any) error {
	raw := json.RawMessage(`{}`)
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return err
		}
		raw = b
	}
	return s.Store.InsertActivity(ctx, tx, &domain.Activity{CompanyID: companyID, ActorKind: a.Kind, ActorID: a.ID(),
		AgentID: a.AgentID(), RunID: a.RunID(), Action: action, EntityType: entityType, EntityID: entityID, Details: raw})
}

// companyAccess checks the request actor's access to the path's company.
func (s *Server) companyAccess(r *http.Request, write bool) (string, authz.Access, error) {
	companyID, err := pathID(r, "companyId")
	if err != nil {
		return "", authz.Access{}, err
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, actor(r), companyID, write)
	return companyID, acc, err
}

// CompanyAccess is companyAccess for handlers registered by other packages.
func (s *Server) CompanyAccess(r *http.Request, write bool) (string, authz.Access, error) {
	return s.companyAccess(r, write)
}

// DecodeJSON is the API's strict JSON decoder for other packages' handlers.
func (s *Server) DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decodeJSON(w, r, v)
}

// WriteJSON writes a JSON response.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// Actor returns the request's authenticated actor.
func Actor(r *http.Request) authz.Actor { return actor(r) }

// companyList serves a GET route listing one company's rows to anyone with
// read access to the company.
func companyList[T any](s *Server, list func(ctx context.Context, q db.Querier, companyID string) ([]T, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := s.companyAccess(r, false)
		if err != nil {
			return err
		}
		out, err := list(r.Context(), s.Store.DB, companyID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

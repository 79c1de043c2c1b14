package api

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// MultipartRoutes are the API routes that take multipart/form-data bodies
// (uploads); every other API body must be JSON.
var MultipartRoutes = []string{"POST /api/issues/{issueId}/attachments"}

func (s *Server) routes() {
	s.HandlePublic("GET /api/health", s.health)
	s.Handle("GET /api/instance/settings", s.getSettings)
	s.Handle("PATCH /api/instance/settings", s.patchSettings)

	s.Handle("POST /api/companies", s.createCompany)
	s.Handle("GET /api/companies", s.listCompanies)
	s.Handle("GET /api/companies/{companyId}", s.getCompany)
	s.Handle("PATCH /api/companies/{companyId}", s.renameCompany)
	s.Handle("DELETE /api/companies/{companyId}", s.deleteCompany)
	s.Handle("POST /api/companies/{companyId}/members", s.addMember)
	s.Handle("GET /api/companies/{companyId}/members", s.listMembers)
	s.Handle("POST /api/companies/{companyId}/board-keys", s.createBoardKey)
	s.Handle("DELETE /api/companies/{companyId}/members/{userId}", s.removeMember)
	s.Handle("GET /api/companies/{companyId}/board-keys", s.listCompanyBoardKeys)
	s.Handle("GET /api/board-keys", s.listBoardKeys)
	s.Handle("DELETE /api/board-keys/{keyId}", s.revokeBoardKey)

	s.Handle("POST /api/companies/{companyId}/agents", s.createAgent)
	s.Handle("GET /api/companies/{companyId}/agents", companyPage(s, s.Store.ListAgentsPage, agentCursor))
	s.Handle("GET /api/agents/{agentId}", s.getAgent)
	s.Handle("PATCH /api/agents/{agentId}", s.patchAgent)
	s.Handle("POST /api/agents/{agentId}/wakeup", s.wakeup)

	s.Handle("POST /api/companies/{companyId}/projects", s.createProject)
	s.Handle("GET /api/companies/{companyId}/projects", companyPage(s, s.Store.ListProjectsPage, projectCursor))
	s.Handle("POST /api/companies/{companyId}/environments", s.createEnvironment)
	s.Handle("GET /api/companies/{companyId}/environments", companyPage(s, s.Store.ListEnvironments, environmentCursor))
	s.Handle("PATCH /api/environments/{environmentId}", s.patchEnvironment)

	s.Handle("POST /api/companies/{companyId}/issues", s.createIssue)
	s.Handle("GET /api/companies/{companyId}/issues", s.listIssues)
	s.Handle("GET /api/issues/{issueId}", s.getIssue)
	s.Handle("PATCH /api/issues/{issueId}", s.patchIssue)
	s.Handle("GET /api/issues/{issueId}/comments", s.listComments)
	s.Handle("POST /api/issues/{issueId}/comments", s.createComment)
	s.Handle("GET /api/issues/{issueId}/attachments", s.listAttachments)
	s.Handle(MultipartRoutes[0], s.uploadAttachment)
	s.Handle("GET /api/attachments/{attachmentId}", s.getAttachment)
	s.Handle("GET /api/attachments/{attachmentId}/content", s.downloadAttachment)

	s.Handle("GET /api/companies/{companyId}/heartbeat-runs", s.listRuns)
	s.Handle("GET /api/heartbeat-runs/{runId}", s.getRun)
	s.Handle("GET /api/heartbeat-runs/{runId}/log", s.getRunLog)
	s.Handle("POST /api/heartbeat-runs/{runId}/cancel", s.cancelRun)
	s.Handle("GET /api/companies/{companyId}/activity", s.listActivity)
	s.Handle("GET /api/companies/{companyId}/activity/export", s.exportActivity)
	s.Handle("GET /api/companies/{companyId}/search", s.search)
	s.Handle("GET /api/companies/{companyId}/changes", s.changes)

	s.Handle("POST /api/companies/{companyId}/secrets", s.createSecret)
	s.Handle("GET /api/companies/{companyId}/secrets", s.listSecrets)
	s.Handle("POST /api/secrets/{secretId}/versions", s.rotateSecret)
	s.Handle("DELETE /api/secrets/{secretId}", s.deleteSecret)

	s.Handle("POST /api/companies/{companyId}/action-policies", s.createPolicy)
	s.Handle("GET /api/companies/{companyId}/action-policies", companyPage(s, s.Store.ListPoliciesPage, policyCursor))
	s.Handle("DELETE /api/companies/{companyId}/action-policies/{policyId}", s.deletePolicy)

	s.meRoutes()

	s.Handle("/api/", func(w http.ResponseWriter, r *http.Request) error {
		return httpx.Errorf(http.StatusNotFound, "no such API route: %s %s", r.Method, r.URL.Path)
	})
}

// Audit writes an activity entry for a change made by the request's actor,
// inside the change's transaction.
func (s *Server) Audit(ctx context.Context, tx *sql.Tx, a authz.Actor, companyID, action, entityType, entityID string, details any) error {
	return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, action, entityType, entityID, details)
}

// companyAccess checks the request actor's access to the path's company.
func (s *Server) companyAccess(r *http.Request, write bool) (string, authz.Access, error) {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return "", authz.Access{}, err
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, httpx.Actor(r), companyID, write)
	return companyID, acc, err
}

// boardCompany is the opening of a board-only company route: the actor
// must be a board user (not an agent run) with read or, when write is set,
// write access to the path's company.
func (s *Server) boardCompany(r *http.Request, write bool) (authz.Actor, string, authz.Access, error) {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return a, "", authz.Access{}, err
	}
	companyID, acc, err := s.companyAccess(r, write)
	return a, companyID, acc, err
}

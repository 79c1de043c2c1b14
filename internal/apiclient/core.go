package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/retention"
	"github.com/paperclipai/paperclipai/internal/store"
)

// esc escapes one path segment.
func esc(id string) string { return url.PathEscape(id) }

// get decodes a GET answer into a T.
func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	var out T
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// send sends in with method and decodes the answer into a T.
func send[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.Do(ctx, method, path, in, &out)
	return out, err
}

// Health is GET /health's answer.
type Health struct {
	Status   string `json:"status"`
	Database string `json:"database"`
	Version  string `json:"version"`
}

// Health reads GET /health (public: no actor needed).
func (c *Client) Health(ctx context.Context) (Health, error) { return get[Health](ctx, c, "/health") }

// Me reads GET /me, the calling board actor.
func (c *Client) Me(ctx context.Context) (api.Me, error) { return get[api.Me](ctx, c, "/me") }

// Settings reads GET /instance/settings.
func (c *Client) Settings(ctx context.Context) (domain.InstanceSettings, error) {
	return get[domain.InstanceSettings](ctx, c, "/instance/settings")
}

// ExperimentalPatch changes the named feature flags (nil: unchanged).
type ExperimentalPatch struct {
	EnableChatConnectors     *bool `json:"enableChatConnectors,omitempty"`
	EnableIsolatedWorkspaces *bool `json:"enableIsolatedWorkspaces,omitempty"`
}

// SettingsPatch is PATCH /instance/settings' body.
type SettingsPatch struct {
	Experimental *ExperimentalPatch `json:"experimental,omitempty"`
	// AgentCLI replaces the settings of the named CLI adapters (a nil
	// value removes them).
	AgentCLI map[string]*domain.AgentCLISettings `json:"agentCli,omitempty"`
}

// PatchSettings sends PATCH /instance/settings.
func (c *Client) PatchSettings(ctx context.Context, p SettingsPatch) (domain.InstanceSettings, error) {
	return send[domain.InstanceSettings](ctx, c, http.MethodPatch, "/instance/settings", p)
}

// Companies reads GET /companies: the companies the caller sees, every
// page.
func (c *Client) Companies(ctx context.Context) ([]domain.Company, error) {
	return all[domain.Company](ctx, c, "/companies")
}

// CreateCompany sends POST /companies.
func (c *Client) CreateCompany(ctx context.Context, name string) (domain.Company, error) {
	return send[domain.Company](ctx, c, http.MethodPost, "/companies", struct {
		Name string `json:"name"`
	}{name})
}

// Company reads GET /companies/{companyId}.
func (c *Client) Company(ctx context.Context, companyID string) (domain.Company, error) {
	return get[domain.Company](ctx, c, "/companies/"+esc(companyID))
}

// Members is GET /companies/{companyId}/members.
func (c *Client) Members(companyID string) List[domain.Membership] {
	return newList[domain.Membership](c, "/companies/"+esc(companyID)+"/members")
}

// AddMember is POST /companies/{companyId}/members' body: exactly one of
// UserID and Email.
type AddMember struct {
	UserID      string   `json:"userId,omitempty"`
	Email       string   `json:"email,omitempty"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"`
}

// AddMember sends POST /companies/{companyId}/members.
func (c *Client) AddMember(ctx context.Context, companyID string, in AddMember) (domain.Membership, error) {
	return send[domain.Membership](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/members", in)
}

// RemoveMember sends DELETE /companies/{companyId}/members/{userId}.
func (c *Client) RemoveMember(ctx context.Context, companyID, userID string) error {
	return c.Do(ctx, http.MethodDelete, "/companies/"+esc(companyID)+"/members/"+esc(userID), nil, nil)
}

// NewBoardKey is POST /companies/{companyId}/board-keys' answer: the key
// and its token, shown this once.
type NewBoardKey struct {
	domain.BoardAPIKey
	Token string `json:"token"`
}

// CreateBoardKey sends POST /companies/{companyId}/board-keys; userID ""
// is the caller.
func (c *Client) CreateBoardKey(ctx context.Context, companyID, userID, name string) (NewBoardKey, error) {
	return send[NewBoardKey](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/board-keys", struct {
		UserID string `json:"userId,omitempty"`
		Name   string `json:"name,omitempty"`
	}{userID, name})
}

// BoardKeys reads GET /companies/{companyId}/board-keys, every page.
func (c *Client) BoardKeys(ctx context.Context, companyID string) ([]domain.BoardAPIKey, error) {
	return all[domain.BoardAPIKey](ctx, c, "/companies/"+esc(companyID)+"/board-keys")
}

// RevokeBoardKey sends DELETE /board-keys/{keyId}.
func (c *Client) RevokeBoardKey(ctx context.Context, keyID string) error {
	return c.Do(ctx, http.MethodDelete, "/board-keys/"+esc(keyID), nil, nil)
}

// Agents is GET /companies/{companyId}/agents.
func (c *Client) Agents(companyID string) List[domain.Agent] {
	return newList[domain.Agent](c, "/companies/"+esc(companyID)+"/agents")
}

// AgentInput is the body of POST /companies/{companyId}/agents and PATCH
// /agents/{agentId}: nil fields are left as they are.
type AgentInput struct {
	Name               *string                  `json:"name,omitempty"`
	Status             *string                  `json:"status,omitempty"`
	AdapterType        *string                  `json:"adapterType,omitempty"`
	AdapterConfig      json.RawMessage          `json:"adapterConfig,omitempty"`
	Permissions        *domain.AgentPermissions `json:"permissions,omitempty"`
	BudgetMonthlyCents *int64                   `json:"budgetMonthlyCents,omitempty"`
	EnvironmentID      *string                  `json:"environmentId,omitempty"`
}

// CreateAgent sends POST /companies/{companyId}/agents.
func (c *Client) CreateAgent(ctx context.Context, companyID string, in AgentInput) (domain.Agent, error) {
	return send[domain.Agent](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/agents", in)
}

// Agent reads GET /agents/{agentId}.
func (c *Client) Agent(ctx context.Context, agentID string) (domain.Agent, error) {
	return get[domain.Agent](ctx, c, "/agents/"+esc(agentID))
}

// PatchAgent sends PATCH /agents/{agentId}.
func (c *Client) PatchAgent(ctx context.Context, agentID string, in AgentInput) (domain.Agent, error) {
	return send[domain.Agent](ctx, c, http.MethodPatch, "/agents/"+esc(agentID), in)
}

// Wakeup is POST /agents/{agentId}/wakeup's body.
type Wakeup struct {
	Reason         string `json:"reason"`
	IssueID        string `json:"issueId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	CommentID      string `json:"commentId,omitempty"`
}

// Wake sends POST /agents/{agentId}/wakeup and returns the run.
func (c *Client) Wake(ctx context.Context, agentID string, in Wakeup) (domain.Run, error) {
	return send[domain.Run](ctx, c, http.MethodPost, "/agents/"+esc(agentID)+"/wakeup", in)
}

// Projects is GET /companies/{companyId}/projects.
func (c *Client) Projects(companyID string) List[domain.Project] {
	return newList[domain.Project](c, "/companies/"+esc(companyID)+"/projects")
}

// NewProject is POST /companies/{companyId}/projects' body.
type NewProject struct {
	Name      string                   `json:"name"`
	Workspace *domain.ProjectWorkspace `json:"workspace,omitempty"`
}

// CreateProject sends POST /companies/{companyId}/projects.
func (c *Client) CreateProject(ctx context.Context, companyID string, in NewProject) (domain.Project, error) {
	return send[domain.Project](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/projects", in)
}

// Environments reads GET /companies/{companyId}/environments, every page.
func (c *Client) Environments(ctx context.Context, companyID string) ([]domain.Environment, error) {
	return all[domain.Environment](ctx, c, "/companies/"+esc(companyID)+"/environments")
}

// NewEnvironment is POST /companies/{companyId}/environments' body.
type NewEnvironment struct {
	Name         string `json:"name"`
	Driver       string `json:"driver"`
	Provider     string `json:"provider,omitempty"`
	Status       string `json:"status,omitempty"`
	AllowNetwork bool   `json:"allowNetwork,omitempty"`
}

// CreateEnvironment sends POST /companies/{companyId}/environments.
func (c *Client) CreateEnvironment(ctx context.Context, companyID string, in NewEnvironment) (domain.Environment, error) {
	return send[domain.Environment](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/environments", in)
}

// Issues is GET /companies/{companyId}/issues (filters: status,
// assigneeAgentId, parentId, projectId, q, sort, …).
func (c *Client) Issues(companyID string) List[domain.Issue] {
	return newList[domain.Issue](c, "/companies/"+esc(companyID)+"/issues")
}

// IssueInput is the body of POST /companies/{companyId}/issues and PATCH
// /issues/{issueId}: nil fields are left as they are.
type IssueInput struct {
	Title           *string `json:"title,omitempty"`
	Description     *string `json:"description,omitempty"`
	Status          *string `json:"status,omitempty"`
	Priority        *string `json:"priority,omitempty"`
	AssigneeAgentID *string `json:"assigneeAgentId,omitempty"`
	ProjectID       *string `json:"projectId,omitempty"`
	ParentID        *string `json:"parentId,omitempty"`
}

// CreateIssue sends POST /companies/{companyId}/issues.
func (c *Client) CreateIssue(ctx context.Context, companyID string, in IssueInput) (domain.Issue, error) {
	return send[domain.Issue](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/issues", in)
}

// Issue reads GET /issues/{issueId}.
func (c *Client) Issue(ctx context.Context, issueID string) (domain.Issue, error) {
	return get[domain.Issue](ctx, c, "/issues/"+esc(issueID))
}

// PatchIssue sends PATCH /issues/{issueId}.
func (c *Client) PatchIssue(ctx context.Context, issueID string, in IssueInput) (domain.Issue, error) {
	return send[domain.Issue](ctx, c, http.MethodPatch, "/issues/"+esc(issueID), in)
}

// IssueCounts reads GET /companies/{companyId}/issue-counts.
func (c *Client) IssueCounts(ctx context.Context, companyID string) (api.IssueCounts, error) {
	return get[api.IssueCounts](ctx, c, "/companies/"+esc(companyID)+"/issue-counts")
}

// Comments is GET /issues/{issueId}/comments.
func (c *Client) Comments(issueID string) List[domain.Comment] {
	return newList[domain.Comment](c, "/issues/"+esc(issueID)+"/comments")
}

// CreateComment sends POST /issues/{issueId}/comments.
func (c *Client) CreateComment(ctx context.Context, issueID, body string) (domain.Comment, error) {
	return send[domain.Comment](ctx, c, http.MethodPost, "/issues/"+esc(issueID)+"/comments", struct {
		Body string `json:"body"`
	}{body})
}

// Attachments is GET /issues/{issueId}/attachments.
func (c *Client) Attachments(issueID string) List[domain.Attachment] {
	return newList[domain.Attachment](c, "/issues/"+esc(issueID)+"/attachments")
}

// Attachment reads GET /attachments/{attachmentId}.
func (c *Client) Attachment(ctx context.Context, attachmentID string) (domain.Attachment, error) {
	return get[domain.Attachment](ctx, c, "/attachments/"+esc(attachmentID))
}

// Runs is GET /companies/{companyId}/heartbeat-runs (filters: agentId,
// issueId, status).
func (c *Client) Runs(companyID string) List[domain.Run] {
	return newList[domain.Run](c, "/companies/"+esc(companyID)+"/heartbeat-runs")
}

// Run reads GET /heartbeat-runs/{runId}.
func (c *Client) Run(ctx context.Context, runID string) (domain.Run, error) {
	return get[domain.Run](ctx, c, "/heartbeat-runs/"+esc(runID))
}

// RunLog is GET /heartbeat-runs/{runId}/log's answer.
type RunLog struct {
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	Content   string `json:"content"`
	SizeBytes int64  `json:"sizeBytes"`
	Truncated bool   `json:"truncated"`
}

// RunLog reads GET /heartbeat-runs/{runId}/log.
func (c *Client) RunLog(ctx context.Context, runID string) (RunLog, error) {
	return get[RunLog](ctx, c, "/heartbeat-runs/"+esc(runID)+"/log")
}

// Activity is GET /companies/{companyId}/activity.
func (c *Client) Activity(companyID string) List[domain.Activity] {
	return newList[domain.Activity](c, "/companies/"+esc(companyID)+"/activity")
}

// SearchPage is GET /companies/{companyId}/search's answer.
type SearchPage = httpx.PageList[api.SearchResult]

// Search reads GET /companies/{companyId}/search with q (q, kind, limit,
// cursor).
func (c *Client) Search(ctx context.Context, companyID string, q url.Values) (SearchPage, error) {
	return get[SearchPage](ctx, c, with("/companies/"+esc(companyID)+"/search", q))
}

// Changes reads GET /companies/{companyId}/changes: the fingerprints of
// what the company's live views show.
func (c *Client) Changes(ctx context.Context, companyID string) (store.ChangeStamps, error) {
	return get[store.ChangeStamps](ctx, c, "/companies/"+esc(companyID)+"/changes")
}

// UploadAttachment sends POST /issues/{issueId}/attachments with a
// multipart/form-data body (contentType carries its boundary), read as
// it is sent.
func (c *Client) UploadAttachment(ctx context.Context, issueID, contentType string, body io.Reader) (domain.Attachment, error) {
	path := "/issues/" + esc(issueID) + "/attachments"
	res, err := c.request(ctx, http.MethodPost, path, contentType, body)
	if err != nil {
		return domain.Attachment{}, err
	}
	if res.Status >= 400 {
		return domain.Attachment{}, DecodeError(http.MethodPost, path, res)
	}
	var att domain.Attachment
	if err := json.Unmarshal(res.Body, &att); err != nil {
		return att, fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	return att, nil
}

// Retention is GET /companies/{companyId}/retention's answer: the
// company's retention settings and what its data uses.
type Retention struct {
	retention.Settings
	Usage retention.Usage `json:"usage"`
}

// Retention reads GET /companies/{companyId}/retention.
func (c *Client) Retention(ctx context.Context, companyID string) (Retention, error) {
	return get[Retention](ctx, c, "/companies/"+esc(companyID)+"/retention")
}

// PutRetention sends PUT /companies/{companyId}/retention (owners; a nil
// limit keeps that data for ever).
func (c *Client) PutRetention(ctx context.Context, companyID string, set retention.Settings) (retention.Settings, error) {
	return send[retention.Settings](ctx, c, http.MethodPut, "/companies/"+esc(companyID)+"/retention", set)
}

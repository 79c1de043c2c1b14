package api

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

var issueStatuses = []string{domain.IssueBacklog, domain.IssueTodo, domain.IssueInProgress, domain.IssueInReview,
	domain.IssueBlocked, domain.IssueDone, domain.IssueCancelled}

var issuePriorities = []string{"critical", "high", "medium", "low"}

type issueInput struct {
	Title           *string `json:"title"`
	Description     *string `json:"description"`
	Status          *string `json:"status"`
	Priority        *string `json:"priority"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	ProjectID       *string `json:"projectId"`
	ParentID        *string `json:"parentId"`
}

// applyIssueInput validates in and writes it onto i.
func (s *Server) applyIssueInput(ctx context.Context, q db.Querier, i *domain.Issue, in issueInput, isNew bool) error {
	if in.Title != nil || isNew {
		t, err := validName("title", deref(in.Title), 500)
		if err != nil {
			return err
		}
		i.Title = t
	}
	if in.Description != nil {
		if len(*in.Description) > 100_000 {
			return httpx.Errorf(http.StatusBadRequest, "description must be at most 100000 bytes")
		}
		i.Description = *in.Description
	}
	if in.Status != nil {
		if err := oneOf("status", *in.Status, issueStatuses); err != nil {
			return err
		}
		i.Status = *in.Status
	}
	if in.Priority != nil {
		if err := oneOf("priority", *in.Priority, issuePriorities); err != nil {
			return err
		}
		i.Priority = *in.Priority
	}
	if in.AssigneeAgentID != nil {
		err := companyRef("assigneeAgentId", *in.AssigneeAgentID, "agent", i.CompanyID, func(id string) (string, error) {
			ag, err := s.Store.GetAgent(ctx, q, id)
			return ag.CompanyID, err
		})
		if err != nil {
			return err
		}
		i.AssigneeAgentID = *in.AssigneeAgentID
	}
	if in.ProjectID != nil {
		err := companyRef("projectId", *in.ProjectID, "project", i.CompanyID, func(id string) (string, error) {
			p, err := s.Store.GetProject(ctx, q, id)
			return p.CompanyID, err
		})
		if err != nil {
			return err
		}
		i.ProjectID = *in.ProjectID
	}
	if in.ParentID != nil {
		if v := *in.ParentID; v != "" {
			v, err := s.bodyIssueRef(ctx, q, i.CompanyID, "parentId", v)
			if err != nil {
				return err
			}
			*in.ParentID = v
			if v == i.ID {
				return httpx.Errorf(http.StatusBadRequest, "parentId: a task cannot be its own parent")
			}
			p, err := s.Store.GetIssue(ctx, q, v)
			if err != nil || p.CompanyID != i.CompanyID {
				return httpx.Errorf(http.StatusBadRequest, "parentId: task not found in this company")
			}
			if i.ID != "" {
				anc, err := s.Store.IssueAncestors(ctx, q, v)
				if err != nil {
					return err
				}
				if slices.Contains(anc, i.ID) {
					return httpx.Errorf(http.StatusBadRequest, "parentId: would create a cycle")
				}
			}
		}
		i.ParentID = *in.ParentID
	}
	return nil
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	companyID, _, err := s.companyAccess(r, true)
	if err != nil {
		return err
	}
	var in issueInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	issue := domain.Issue{CompanyID: companyID, Status: domain.IssueTodo, Priority: "medium"}
	if a.Kind == authz.KindAgent {
		issue.CreatedByAgentID = a.AgentID()
	} else {
		issue.CreatedByUserID = a.UserID
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.applyIssueInput(r.Context(), tx, &issue, in, true); err != nil {
			return err
		}
		if a.Kind == authz.KindAgent {
			// Agents create only subtasks of a task they own.
			if issue.ParentID == "" {
				return httpx.Errorf(http.StatusForbidden, "agents may only create subtasks (parentId) of their assigned task")
			}
			parent, err := s.Store.GetIssue(r.Context(), tx, issue.ParentID)
			if err != nil {
				return err
			}
			if err := s.Authz.CanWriteIssue(r.Context(), tx, a, parent); err != nil {
				return err
			}
			// Only for itself or for nobody: an agent cannot hand work
			// (and the wakes that come with it) to another agent.
			if issue.AssigneeAgentID != "" && issue.AssigneeAgentID != a.AgentID() {
				return httpx.Errorf(http.StatusForbidden, "agents may create only unassigned subtasks or subtasks assigned to themselves")
			}
			if in.ProjectID == nil {
				issue.ProjectID = parent.ProjectID
			}
		}
		if _, err := s.Store.CreateIssue(r.Context(), tx, &issue); err != nil {
			return err
		}
		if a.Kind == authz.KindAgent {
			// Checked on the stored row (its ancestry included); the
			// transaction rolls back when it lies outside the boundary.
			ok, err := s.Authz.WithinBoundary(r.Context(), tx, *a.Agent, issue)
			if err != nil {
				return err
			}
			if !ok {
				return httpx.Errorf(http.StatusForbidden, "the subtask would lie outside the agent's trust boundary")
			}
		}
		return s.Audit(r.Context(), tx, a, companyID, "issue.created", "issue", issue.ID, map[string]string{"title": issue.Title})
	})
	return httpx.Respond(w, http.StatusCreated, issue, err)
}

func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	companyID, _, err := s.companyAccess(r, false)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Has("offset") {
		return httpx.Errorf(http.StatusBadRequest, "offset is not supported: follow the X-Next-Cursor header with ?cursor= (docs/api.md, \"Paging\")")
	}
	f := store.IssueFilter{Status: q.Get("status"), OriginKind: q.Get("originKind"), Origin: q.Get("origin"), Sort: q.Get("sort")}
	if f.AssigneeAgentID, err = queryID(r, "assigneeAgentId"); err != nil {
		return err
	}
	if f.ParentID, err = queryID(r, "parentId"); err != nil {
		return err
	}
	if f.EndpointID, err = queryID(r, "inboxId"); err != nil {
		return err
	}
	if f.Status != "" {
		if err := oneOf("status", f.Status, issueStatuses); err != nil {
			return err
		}
	}
	if f.Origin != "" {
		if err := oneOf("origin", f.Origin, []string{"email", "other"}); err != nil {
			return err
		}
	}
	if f.Sort == "" {
		f.Sort = "created"
	}
	if err := oneOf("sort", f.Sort, store.IssueSorts); err != nil {
		return err
	}
	page, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	if c := page.After; c != nil {
		// A cursor continues only the order it came from.
		if _, rerr := strconv.Atoi(c.Key); (f.Sort == "priority") != (rerr == nil) {
			return httpx.ErrBadCursor
		}
	}
	f.Limit, f.After = page.Limit+1, page.After
	out, err := s.Store.ListIssues(r.Context(), s.Store.DB, companyID, f)
	if err != nil {
		return err
	}
	out, next := httpx.TrimPage(out, page, func(i domain.Issue) store.Cursor { return store.IssueCursor(i, f.Sort) })
	if a.Kind == authz.KindAgent {
		// Filtered after the page is cut: the cursor still continues
		// after the page's last row, so an agent's page may be short but
		// paging never skips a row it may read.
		visible := []domain.Issue{}
		for _, is := range out {
			if s.Authz.CanReadIssue(r.Context(), s.Store.DB, a, is) == nil {
				visible = append(visible, is)
			}
		}
		out = visible
	}
	httpx.WritePage(w, r, out, next)
	return nil
}

// loadIssue reads the path's task and checks read or write authority.
func (s *Server) loadIssue(r *http.Request, q db.Querier, write bool) (domain.Issue, error) {
	var issue domain.Issue
	if v := r.PathValue("issueId"); store.IssueIdentifierPattern.MatchString(v) {
		// A short identifier (ACME-12): the task of that identifier the
		// caller may read (prefixes are unique per company, and nearly
		// always across companies).
		found, err := s.Store.IssuesByIdentifier(r.Context(), q, "", v)
		if err != nil {
			return issue, err
		}
		for _, is := range found {
			if s.Authz.CanReadIssue(r.Context(), q, httpx.Actor(r), is) == nil {
				issue = is
				break
			}
		}
		if issue.ID == "" {
			return issue, store.NotFound("get issue")
		}
	} else {
		id, err := httpx.PathID(r, "issueId")
		if err != nil {
			return issue, httpx.Errorf(http.StatusBadRequest, "invalid issueId: must be a UUID or a task identifier such as ACME-12")
		}
		if issue, err = s.Store.GetIssue(r.Context(), q, id); err != nil {
			return issue, err
		}
	}
	if write {
		return issue, s.Authz.CanWriteIssue(r.Context(), q, httpx.Actor(r), issue)
	}
	return issue, s.Authz.CanReadIssue(r.Context(), q, httpx.Actor(r), issue)
}

func (s *Server) getIssue(w http.ResponseWriter, r *http.Request) error {
	issue, err := s.loadIssue(r, s.Store.DB, false)
	return httpx.Respond(w, http.StatusOK, issue, err)
}

func (s *Server) patchIssue(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	var in issueInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if a.Kind == authz.KindAgent && (in.AssigneeAgentID != nil || in.ProjectID != nil || in.ParentID != nil) {
		return httpx.Errorf(http.StatusForbidden, "agents may not reassign or move tasks")
	}
	var issue domain.Issue
	err := s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if issue, err = s.loadIssue(r, tx, true); err != nil {
			return err
		}
		before := issue.Status
		if err := s.applyIssueInput(r.Context(), tx, &issue, in, false); err != nil {
			return err
		}
		if err := s.Store.UpdateIssue(r.Context(), tx, &issue); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, issue.CompanyID, "issue.updated", "issue", issue.ID,
			map[string]string{"statusBefore": before, "status": issue.Status})
	})
	return httpx.Respond(w, http.StatusOK, issue, err)
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	var body struct {
		Body string `json:"body"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Body) == "" {
		return httpx.Errorf(http.StatusBadRequest, "body is required")
	}
	if len(body.Body) > 100_000 {
		return httpx.Errorf(http.StatusBadRequest, "body must be at most 100000 bytes")
	}
	var c domain.Comment
	err := s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		issue, err := s.loadIssue(r, tx, true)
		if err != nil {
			return err
		}
		c = domain.Comment{CompanyID: issue.CompanyID, IssueID: issue.ID, Body: body.Body}
		if a.Kind == authz.KindAgent {
			c.AuthorKind, c.AuthorAgentID, c.RunID = "agent", a.AgentID(), a.RunID()
		} else {
			c.AuthorKind, c.AuthorUserID = "user", a.UserID
		}
		if err := s.Store.CreateComment(r.Context(), tx, &c); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, issue.CompanyID, "issue.comment_added", "comment", c.ID, map[string]string{"issueId": issue.ID})
	})
	return httpx.Respond(w, http.StatusCreated, c, err)
}

func (s *Server) uploadAttachment(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	issue, err := s.loadIssue(r, s.Store.DB, true)
	if err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.Attachments.MaxBytes+64<<10)
	mr, err := r.MultipartReader()
	if err != nil {
		return httpx.Errorf(http.StatusBadRequest, "attachments are uploaded as multipart/form-data with a \"file\" part")
	}
	var part interface {
		io.Reader
		FileName() string
		FormName() string
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return tooLarge(s.Attachments.MaxBytes)
			}
			return httpx.Errorf(http.StatusBadRequest, "malformed multipart body")
		}
		if p.FormName() == "file" {
			part = p
			ct := attachment.MediaType(p.Header.Get("Content-Type"))
			if !s.Attachments.Allows(ct) {
				return httpx.Errorf(http.StatusUnsupportedMediaType, "content type %q is not allowed for attachments", ct)
			}
			// Spooled to a temporary file while it is hashed and measured,
			// so an oversized upload is refused before anything reaches
			// the database and memory holds only a copy buffer.
			staged, err := s.Attachments.Stage(part)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) || errors.Is(err, attachment.ErrTooLarge) {
					return tooLarge(s.Attachments.MaxBytes)
				}
				return err
			}
			defer staged.Close()
			sha, size := staged.SHA256, staged.Size
			att := domain.Attachment{CompanyID: issue.CompanyID, IssueID: issue.ID, Filename: attachment.SanitizeFilename(part.FileName()),
				ContentType: ct, SizeBytes: size, SHA256: sha}
			if a.Kind == authz.KindAgent {
				att.CreatedByAgentID = a.AgentID()
			} else {
				att.CreatedByUserID = a.UserID
			}
			// The content and the row commit together: no row without its
			// bytes, on any replica.
			err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
				if err := s.Attachments.Save(r.Context(), tx, staged); err != nil {
					return err
				}
				if err := s.Store.CreateAttachment(r.Context(), tx, &att); err != nil {
					return err
				}
				return s.Audit(r.Context(), tx, a, issue.CompanyID, "issue.attachment_added", "attachment", att.ID,
					map[string]any{"issueId": issue.ID, "sizeBytes": size, "sha256": sha})
			})
			if err != nil {
				return err
			}
			httpx.WriteJSON(w, http.StatusCreated, att)
			return nil
		}
	}
	return httpx.Errorf(http.StatusBadRequest, "multipart body has no \"file\" part")
}

// readableAttachment loads the path's attachment when the actor may read
// its task.
func (s *Server) readableAttachment(r *http.Request) (domain.Attachment, error) {
	id, err := httpx.PathID(r, "attachmentId")
	if err != nil {
		return domain.Attachment{}, err
	}
	att, err := s.Store.GetAttachment(r.Context(), s.Store.DB, id)
	if err != nil {
		return att, err
	}
	issue, err := s.Store.GetIssue(r.Context(), s.Store.DB, att.IssueID)
	if err != nil {
		return att, err
	}
	return att, s.Authz.CanReadIssue(r.Context(), s.Store.DB, httpx.Actor(r), issue)
}

// getAttachment answers an attachment's metadata (its company and task
// included), so a client holding only the id can place it.
func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request) error {
	att, err := s.readableAttachment(r)
	return httpx.Respond(w, http.StatusOK, att, err)
}

func (s *Server) downloadAttachment(w http.ResponseWriter, r *http.Request) error {
	att, err := s.readableAttachment(r)
	if err != nil {
		return err
	}
	content, err := s.Attachments.Open(r.Context(), att.SHA256)
	if errors.Is(err, attachment.ErrContentMissing) || errors.Is(err, attachment.ErrCorrupt) {
		s.log.Warn("attachment content unavailable", "attachmentId", att.ID, "sha256", att.SHA256, "err", err)
		return &httpx.Error{Status: http.StatusNotFound, Code: "attachment_content_missing",
			Message: "attachment content not found: it was stored before content moved into the database and has not been backfilled"}
	}
	if err != nil {
		return err
	}
	if content.Size() != att.SizeBytes {
		s.log.Warn("attachment content size differs from its row", "attachmentId", att.ID, "sha256", att.SHA256,
			"rowBytes", att.SizeBytes, "contentBytes", content.Size())
	}
	w.Header().Set("Content-Type", att.ContentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": att.Filename}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("Content-Length", fmt.Sprint(content.Size()))
	if _, err := content.WriteTo(w); err != nil {
		// A client that went away needs nothing more. Otherwise the
		// status line is sent (Open fetched the first chunk before it),
		// and the only honest signal left is to cut the response short:
		// the client sees a truncated body, not a complete-looking one.
		if r.Context().Err() != nil {
			return nil
		}
		s.log.Error("attachment download failed", "attachmentId", att.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// tooLarge is the answer to an upload over the attachment size bound.
func tooLarge(max int64) error {
	return &httpx.Error{Status: http.StatusRequestEntityTooLarge, Code: "attachment_too_large",
		Message: fmt.Sprintf("attachment exceeds the %d-byte limit (PAPERCLIP_ATTACHMENT_MAX_BYTES)", max)}
}

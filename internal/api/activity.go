package api

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// actionPattern is the shape of an action name ("issue.created") or an
// action kind ("email.", every action of that kind).
var actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.?$`)

// activityFilter reads the activity filters of a listing or an export:
// action (comma-separated names or kinds ending in "."), actorKind,
// actor (a user or agent id, or a system actor's name), taskId, since
// (inclusive) and until (exclusive); a date alone (2026-12-04) is the
// start of that UTC day for since and the end of it for until.
func (s *Server) activityFilter(r *http.Request, companyID string) (store.ActivityFilter, error) {
	q := r.URL.Query()
	var f store.ActivityFilter
	if v := q.Get("action"); v != "" {
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if len(a) > 100 || !actionPattern.MatchString(a) {
				return f, httpx.Errorf(http.StatusBadRequest, "action must be a comma-separated list of action names (issue.created) or kinds (issue.)")
			}
			f.Actions = append(f.Actions, a)
		}
		if len(f.Actions) > 50 {
			return f, httpx.Errorf(http.StatusBadRequest, "action: at most 50 actions")
		}
	}
	if v := q.Get("actorKind"); v != "" {
		if err := oneOf("actorKind", v, []string{"user", "agent", "system"}); err != nil {
			return f, err
		}
		f.ActorKind = v
	}
	if v := q.Get("actor"); v != "" {
		if len(v) > 200 {
			return f, httpx.Errorf(http.StatusBadRequest, "actor must be at most 200 characters")
		}
		f.ActorID = v
	}
	var err error
	if f.IssueID, err = s.queryIssueRef(r, companyID, "taskId"); err != nil {
		return f, err
	}
	if f.Since, err = queryTime(q.Get("since"), "since", false); err != nil {
		return f, err
	}
	if f.Until, err = queryTime(q.Get("until"), "until", true); err != nil {
		return f, err
	}
	return f, nil
}

// queryTime parses an RFC 3339 time or a date; a date is the start of
// that UTC day, or with endOfDay the start of the next.
func queryTime(v, name string, endOfDay bool) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &t, nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return nil, httpx.Errorf(http.StatusBadRequest, "%s must be an RFC 3339 time (2026-12-04T09:30:00Z) or a date (2026-12-04)", name)
	}
	if endOfDay {
		t = t.AddDate(0, 0, 1)
	}
	return &t, nil
}

func (s *Server) listActivity(w http.ResponseWriter, r *http.Request) error {
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	f, err := s.activityFilter(r, companyID)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListActivityPage(r.Context(), s.Store.DB, companyID, f, p)
	if err != nil {
		return err
	}
	items, next := httpx.TrimPage(rows, p, func(a domain.Activity) store.Cursor { return store.Cursor{At: a.CreatedAt, ID: a.ID} })
	httpx.WritePage(w, r, items, next)
	return nil
}

// exportBatch is how many audit entries an export reads at a time.
const exportBatch = 500

// activityCSVHeader is the export's CSV header row.
var activityCSVHeader = []string{"id", "createdAt", "actorKind", "actorId", "agentId", "runId", "action", "entityType", "entityId", "details"}

// exportActivity streams exactly the filtered audit entries, newest
// first, as JSON Lines or CSV (GET …/activity/export?format=jsonl|csv).
func (s *Server) exportActivity(w http.ResponseWriter, r *http.Request) error {
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "jsonl"
	}
	if err := oneOf("format", format, []string{"jsonl", "csv"}); err != nil {
		return err
	}
	f, err := s.activityFilter(r, companyID)
	if err != nil {
		return err
	}
	name := "activity-" + time.Now().UTC().Format("20060102-150405") + "." + format
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	// Headers go out with the first row; an error after that can only
	// cut the stream short (the client sees a truncated file, and the
	// log has the error).
	n := 0
	var write func(domain.Activity) error
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		cw := csv.NewWriter(w)
		if err := cw.Write(activityCSVHeader); err != nil {
			return err
		}
		write = func(a domain.Activity) error {
			details := string(a.Details)
			if details == "" {
				details = "null"
			}
			row := []string{a.ID, a.CreatedAt.UTC().Format(time.RFC3339Nano), a.ActorKind, a.ActorID, a.AgentID, a.RunID,
				a.Action, a.EntityType, a.EntityID, details}
			for k := range row {
				row[k] = csvSafe(row[k])
			}
			if err := cw.Write(row); err != nil {
				return err
			}
			if n++; n%exportBatch == 0 {
				cw.Flush()
				flush()
			}
			return cw.Error()
		}
		defer cw.Flush()
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		write = func(a domain.Activity) error {
			if err := enc.Encode(a); err != nil {
				return err
			}
			if n++; n%exportBatch == 0 {
				flush()
			}
			return nil
		}
	}
	err = s.Store.EachActivity(r.Context(), s.Store.DB, companyID, f, exportBatch, write)
	if err != nil {
		s.log.Error("activity export cut short", "requestId", requestID(r), "err", err)
	}
	return nil
}

// csvSafe keeps a spreadsheet from running a cell as a formula: a value
// starting with =, +, - or @ gets a leading apostrophe.
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@", rune(v[0])) {
		return "'" + v
	}
	return v
}

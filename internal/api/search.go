package api

import (
	"errors"
	"html"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// SearchResult is one hit of GET /companies/:companyId/search.
type SearchResult struct {
	Kind       string `json:"kind"` // task, comment or email
	ID         string `json:"id"`   // the task's, comment's or email's id
	TaskID     string `json:"taskId"`
	TaskTitle  string `json:"taskTitle"`
	TaskStatus string `json:"taskStatus"`
	// Title is a task's title or an email's subject ("" for a comment).
	Title string `json:"title"`
	// Snippet is HTML: the text around the match, escaped, with each
	// match in <mark>…</mark>.
	Snippet        string    `json:"snippet"`
	At             time.Time `json:"at"`
	ConversationID string    `json:"conversationId,omitempty"`
	InboxID        string    `json:"inboxId,omitempty"`
}

// searchKindsAll is the order results of every kind are searched in.
var searchKindsAll = []string{store.SearchTask, store.SearchComment, store.SearchEmail}

// maxSearchQuery bounds q (bytes) and its terms.
const (
	maxSearchQuery = 500
	maxSearchTerms = 20
)

func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	qv := r.URL.Query()
	sq, err := s.parseSearch(r, companyID, qv.Get("q"))
	if err != nil {
		return err
	}
	if k := qv.Get("kind"); k != "" {
		if err := oneOf("kind", k, searchKindsAll); err != nil {
			return err
		}
		if k != store.SearchEmail && (len(sq.From) > 0 || len(sq.To) > 0 || len(sq.EndpointIDs) > 0) {
			return httpx.Errorf(http.StatusBadRequest, "from:, to: and inbox: search email only (kind=email)")
		}
		sq.Kinds = []string{k}
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	hits, err := s.Store.Search(r.Context(), s.Store.DB, sq, p)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		return httpx.ErrBadCursor
	case err != nil:
		return err
	}
	hits, next := httpx.TrimPage(hits, p, store.SearchCursor)
	out := make([]SearchResult, 0, len(hits))
	for _, h := range hits {
		res := SearchResult{Kind: h.Kind, ID: h.ID, TaskID: h.IssueID, TaskTitle: h.IssueTitle, TaskStatus: h.IssueStatus,
			Title: h.Title, Snippet: SnippetHTML(h.Snippet), At: h.At, ConversationID: h.ConversationID, InboxID: h.EndpointID}
		out = append(out, res)
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, httpx.NewPageList(out, next))
	return nil
}

// SnippetHTML escapes a snippet and turns its match markers into <mark>
// tags (balanced: a marker left open is closed at the end).
func SnippetHTML(raw string) string {
	var b strings.Builder
	open := false
	for _, part := range strings.SplitAfter(raw, "") {
		switch part {
		case store.MarkStart:
			if !open {
				b.WriteString("<mark>")
				open = true
			}
		case store.MarkEnd:
			if open {
				b.WriteString("</mark>")
				open = false
			}
		default:
			if r, _ := utf8.DecodeRuneInString(part); r < 0x20 && r != '\n' && r != '\t' {
				b.WriteByte(' ')
				continue
			}
			b.WriteString(html.EscapeString(part))
		}
	}
	if open {
		b.WriteString("</mark>")
	}
	return b.String()
}

// parseSearch reads a search: words and "quoted phrases" match any text;
// from:, to: (an email's sender and recipients), inbox: (an inbox's
// address or id), status: (of the task) and before:/after: (a date or an
// RFC 3339 time) filter. A filter's value may be quoted.
func (s *Server) parseSearch(r *http.Request, companyID, q string) (store.SearchQuery, error) {
	sq := store.SearchQuery{CompanyID: companyID, Kinds: searchKindsAll}
	if len(q) > maxSearchQuery {
		return sq, httpx.Errorf(http.StatusBadRequest, "q must be at most %d bytes", maxSearchQuery)
	}
	terms, err := searchTerms(q)
	if err != nil {
		return sq, err
	}
	if len(terms) > maxSearchTerms {
		return sq, httpx.Errorf(http.StatusBadRequest, "q: at most %d terms", maxSearchTerms)
	}
	emailOnly := false
	for _, t := range terms {
		words := store.SearchWords(t.value)
		switch t.key {
		case "":
			if t.quoted && len(words) > 1 {
				sq.Phrases = append(sq.Phrases, words)
			} else {
				sq.Words = append(sq.Words, words...)
			}
		case "from", "to":
			if len(words) == 0 {
				return sq, httpx.Errorf(http.StatusBadRequest, "q: %s: needs a name or an address", t.key)
			}
			if t.key == "from" {
				sq.From = append(sq.From, words)
			} else {
				sq.To = append(sq.To, words)
			}
			emailOnly = true
		case "inbox":
			ids, err := s.searchInboxes(r, companyID, t.value)
			if err != nil {
				return sq, err
			}
			sq.EndpointIDs = append(sq.EndpointIDs, ids...)
			emailOnly = true
		case "status":
			if err := oneOf("q: status:", t.value, issueStatuses); err != nil {
				return sq, err
			}
			sq.Status = t.value
		case "before", "after":
			tm, err := queryTime(t.value, "q: "+t.key+":", false)
			if err != nil {
				return sq, err
			}
			if t.key == "before" {
				sq.Before = tm
			} else {
				sq.After = tm
			}
		}
	}
	if emailOnly {
		sq.Kinds = []string{store.SearchEmail}
	}
	if sq.Empty() {
		return sq, httpx.Errorf(http.StatusBadRequest, "q: give a word to search for (filters such as status: narrow a search; from: or to: also search)")
	}
	return sq, nil
}

// searchInboxes resolves an inbox: filter, an address or an id, to the
// company's inbox ids.
func (s *Server) searchInboxes(r *http.Request, companyID, v string) ([]string, error) {
	eps, err := s.Store.ListAllEndpoints(r.Context(), s.Store.DB, companyID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ep := range eps {
		if ep.ID == v || (ep.Address != "" && strings.EqualFold(ep.Address, v)) {
			ids = append(ids, ep.ID)
		}
	}
	if len(ids) == 0 {
		return nil, httpx.Errorf(http.StatusBadRequest, "q: inbox: no inbox %q in this company", v)
	}
	return ids, nil
}

// searchTerm is one term of a search: a key ("" for text) and its value.
type searchTerm struct {
	key, value string
	quoted     bool
}

// searchFilterKeys are the filters a search term may start with.
var searchFilterKeys = []string{"from", "to", "inbox", "status", "before", "after"}

// searchTerms splits q into terms: words, "quoted phrases" and key:value
// filters (key:"quoted value").
func searchTerms(q string) ([]searchTerm, error) {
	var out []searchTerm
	rest := strings.TrimSpace(q)
	for rest != "" {
		t := searchTerm{}
		if k, v, ok := strings.Cut(rest, ":"); ok && slices.Contains(searchFilterKeys, strings.ToLower(k)) && !strings.ContainsAny(k, " \t\"") {
			t.key = strings.ToLower(k)
			rest = v
		}
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				return nil, httpx.Errorf(http.StatusBadRequest, "q: a quoted phrase is not closed")
			}
			t.value, t.quoted, rest = rest[1:1+end], true, rest[2+end:]
		} else {
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				end = len(rest)
			}
			t.value, rest = rest[:end], rest[end:]
		}
		if t.key != "" && strings.TrimSpace(t.value) == "" {
			return nil, httpx.Errorf(http.StatusBadRequest, "q: %s: needs a value", t.key)
		}
		out = append(out, t)
		rest = strings.TrimSpace(rest)
	}
	return out, nil
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Search kinds.
const (
	SearchTask    = "task"
	SearchComment = "comment"
	SearchEmail   = "email"
)

// Snippet markers: the text between them matched the search. Control
// characters, which stored text never holds, so the API can escape the
// snippet and then turn them into <mark> tags.
const (
	MarkStart = "\x02"
	MarkEnd   = "\x03"
)

// SearchQuery is a parsed search (migration 00030 builds the indexes).
// Every term is a list of words, as SearchWords splits text: all of them
// must match. Words and Phrases search every text of a row; From and To
// only an email's sender and recipients.
type SearchQuery struct {
	CompanyID string
	Kinds     []string
	Words     []string
	Phrases   [][]string
	From, To  [][]string
	// EndpointIDs keeps the email of these inboxes.
	EndpointIDs []string
	// Status keeps the tasks (and the comments and email of tasks) in it.
	Status string
	// After and Before bound the row's time (a task's creation, a
	// comment's, an email's date): After <= t < Before.
	After, Before *time.Time
}

// SearchHit is one search result. Score orders the results: lower is
// more relevant; Snippet holds MarkStart/MarkEnd around the matches.
type SearchHit struct {
	Kind           string
	ID             string
	IssueID        string
	IssueTitle     string
	IssueStatus    string
	Title          string
	Snippet        string
	Score          float64
	At             time.Time
	ConversationID string
	EndpointID     string
}

// SearchCursor is the cursor after hit h.
func SearchCursor(h SearchHit) Cursor {
	return Cursor{At: h.At, ID: h.ID, Key: strconv.FormatFloat(h.Score, 'g', -1, 64)}
}

// SearchWords splits text into the words the indexes hold: runs of
// letters and digits, lower-cased (SQLite's unicode61 tokenizer and the
// PostgreSQL columns of migration 00030 split the same way).
func SearchWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Empty reports whether the query has no term to match.
func (sq SearchQuery) Empty() bool {
	return len(sq.Words)+len(sq.Phrases)+len(sq.From)+len(sq.To) == 0
}

// matchSQLite renders the query as an FTS5 MATCH expression. Each word is
// quoted: it holds only letters and digits, so no FTS5 syntax gets in.
func (sq SearchQuery) matchSQLite() string {
	var parts []string
	quote := func(ws []string) string { return `"` + strings.Join(ws, " ") + `"` }
	for _, w := range sq.Words {
		parts = append(parts, quote([]string{w}))
	}
	for _, p := range sq.Phrases {
		parts = append(parts, quote(p))
	}
	for _, p := range sq.From {
		parts = append(parts, "sender : "+quote(p))
	}
	for _, p := range sq.To {
		parts = append(parts, "recipients : "+quote(p))
	}
	return strings.Join(parts, " AND ")
}

// tsquery renders the query for to_tsquery('simple', …): words joined by
// &, phrases by <->, the sender's words weighted C and the recipients' D
// (migration 00030). Words hold only letters and digits.
func (sq SearchQuery) tsquery() string {
	var parts []string
	phrase := func(ws []string, weight string) string {
		out := make([]string, len(ws))
		for i, w := range ws {
			out[i] = w + weight
		}
		return "(" + strings.Join(out, " <-> ") + ")"
	}
	parts = append(parts, sq.Words...)
	for _, p := range sq.Phrases {
		parts = append(parts, phrase(p, ""))
	}
	for _, p := range sq.From {
		parts = append(parts, phrase(p, ":C"))
	}
	for _, p := range sq.To {
		parts = append(parts, phrase(p, ":D"))
	}
	return strings.Join(parts, " & ")
}

// searchKind is what one kind's query reads: its table, its joins to the
// task, and its columns.
type searchKind struct {
	join                      string // after the searched table
	table, alias              string // the searched table (PostgreSQL)
	title, at, conv, endpoint string
	headline                  string // the text a PostgreSQL snippet is cut from
}

var searchKinds = map[string]searchKind{
	SearchTask: {table: "issues", alias: "x", join: ` JOIN issues i ON i.id = x.id`, title: "i.title", at: "x.created_at",
		conv: "''", endpoint: "''", headline: "x.title || ' — ' || x.description"},
	SearchComment: {table: "issue_comments", alias: "x", join: ` JOIN issues i ON i.id = x.issue_id`, title: "i.title",
		at: "x.created_at", conv: "''", endpoint: "''", headline: "x.body"},
	SearchEmail: {table: "email_messages", alias: "x",
		join:  ` JOIN email_conversations cv ON cv.id = x.conversation_id JOIN issues i ON i.id = cv.issue_id`,
		title: "", at: "x.timestamp", conv: "x.conversation_id", endpoint: "x.endpoint_id", headline: ""},
}

// Search returns a page of a company's rows matching sq, most relevant
// first (ties by id). Every kind's query is bounded by the company and
// driven by its full-text index: SQLite's FTS5 table, PostgreSQL's GIN
// indexes. Kinds are searched one by one and merged by score.
func (s *Store) Search(ctx context.Context, q db.Querier, sq SearchQuery, p Page) ([]SearchHit, error) {
	if sq.Empty() {
		return nil, fmt.Errorf("search: %w", ErrEmptySearch)
	}
	if s.DB.Dialect == db.Postgres {
		if _, inTx := q.(*sql.Tx); !inTx {
			var all []SearchHit
			err := s.DB.Tx(ctx, func(tx *sql.Tx) error {
				// Why: the planner prices a tsvector match (@@) at one
				// operator cost per row, so for a phrase or a common word it
				// often prefers a (parallel) scan of every retained email to
				// the GIN index: 90–160 ms instead of 20 ms at 100,000
				// emails (docs/benchmarks.md, "Search (issue 31)"). Search is always
				// driven by its index; these settings last for this
				// transaction only.
				for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL max_parallel_workers_per_gather = 0"} {
					if _, err := tx.ExecContext(ctx, set); err != nil {
						return fmt.Errorf("search: %w", err)
					}
				}
				var err error
				all, err = s.Search(ctx, tx, sq, p)
				return err
			})
			return all, err
		}
	}
	var all []SearchHit
	for _, k := range sq.Kinds {
		var hits []SearchHit
		var err error
		if s.DB.Dialect == db.Postgres {
			hits, err = s.searchPostgres(ctx, q, k, sq, p)
		} else {
			hits, err = s.searchSQLite(ctx, q, k, sq, p)
		}
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", k, err)
		}
		all = append(all, hits...)
	}
	sortHits(all)
	return all, nil
}

// ErrEmptySearch is a search without a word to match.
var ErrEmptySearch = errors.New("nothing to search for")

func sortHits(h []SearchHit) {
	less := func(a, b SearchHit) bool {
		if a.Score != b.Score {
			return a.Score < b.Score
		}
		return a.ID < b.ID
	}
	// Insertion sort keeps this dependency-free and the pages are small
	// (at most three kinds of limit+1 rows).
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && less(h[j], h[j-1]); j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// searchFilters renders the kind's filters (after the company and the
// match) and the keyset continuation, with args numbered after args.
func searchFilters(kind string, k searchKind, sq SearchQuery, p Page, args []any) (string, string, []any, error) {
	var where []string
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if sq.Status != "" {
		add("i.status = $%d", sq.Status)
	}
	if sq.After != nil {
		add(k.at+" >= $%d", sq.After.UTC())
	}
	if sq.Before != nil {
		add(k.at+" < $%d", sq.Before.UTC())
	}
	if len(sq.EndpointIDs) > 0 {
		if kind != SearchEmail {
			where = append(where, "1 = 0")
		} else {
			ph := make([]string, len(sq.EndpointIDs))
			for n, id := range sq.EndpointIDs {
				args = append(args, id)
				ph[n] = fmt.Sprintf("$%d", len(args))
			}
			where = append(where, "x.endpoint_id IN ("+strings.Join(ph, ", ")+")")
		}
	}
	cont := ""
	if p.After != nil {
		score, err := strconv.ParseFloat(p.After.Key, 64)
		if err != nil {
			return "", "", nil, ErrBadCursor
		}
		args = append(args, score, p.After.ID)
		// Keyset on (score, id), the results' order.
		cont = fmt.Sprintf(" WHERE (score > $%[1]d OR (score = $%[1]d AND id > $%[2]d))", len(args)-1, len(args))
	}
	filter := ""
	if len(where) > 0 {
		filter = " AND " + strings.Join(where, " AND ")
	}
	return filter, cont, args, nil
}

func (s *Store) searchSQLite(ctx context.Context, q db.Querier, kind string, sq SearchQuery, p Page) ([]SearchHit, error) {
	k := searchKinds[kind]
	title := k.title
	if kind == SearchEmail {
		title = "COALESCE(json_extract(x.envelope, '$.subject'), '')"
	}
	args := []any{sq.matchSQLite(), sq.CompanyID, kind}
	filter, cont, args, err := searchFilters(kind, k, sq, p, args)
	if err != nil {
		return nil, err
	}
	// Column weights of bm25: title, body, sender, recipients,
	// attachments. A title match outranks a body match.
	query := `SELECT kind, id, issue_id, issue_title, issue_status, title, snip, score, at, conv, ep FROM (
		SELECT d.kind AS kind, x.id AS id, i.id AS issue_id, i.title AS issue_title, i.status AS issue_status, ` + title + ` AS title,
			snippet(search_fts, -1, char(2), char(3), '…', 24) AS snip, bm25(search_fts, 10.0, 1.0, 2.0, 1.0, 2.0) AS score,
			` + k.at + ` AS at, ` + k.conv + ` AS conv, ` + k.endpoint + ` AS ep
		FROM search_fts JOIN search_docs d ON d.rid = search_fts.rowid JOIN ` + k.table + ` x ON x.id = d.doc_id` + k.join + `
		WHERE search_fts MATCH $1 AND d.company_id = $2 AND d.kind = $3 AND x.company_id = $2` + filter + `
	)` + cont + fmt.Sprintf(` ORDER BY score, id LIMIT %d`, p.limit()+1)
	return queryAll(ctx, q, "search", scanHit, query, args...)
}

func (s *Store) searchPostgres(ctx context.Context, q db.Querier, kind string, sq SearchQuery, p Page) ([]SearchHit, error) {
	k := searchKinds[kind]
	title, headline := k.title, k.headline
	if kind == SearchEmail {
		title = "COALESCE(x.envelope->>'subject', '')"
		headline = "COALESCE(x.envelope->>'subject', '') || ' — ' || x.text"
	}
	args := []any{sq.tsquery(), sq.CompanyID, kind,
		"StartSel=" + MarkStart + ", StopSel=" + MarkEnd + ", MaxWords=24, MinWords=8, MaxFragments=1, FragmentDelimiter=\" … \""}
	filter, cont, args, err := searchFilters(kind, k, sq, p, args)
	if err != nil {
		return nil, err
	}
	// The snippet is cut only for the page's rows (the outer query):
	// ts_headline reparses the whole text, which is too slow to do for
	// every match.
	query := `SELECT kind, id, issue_id, issue_title, issue_status, title,
			ts_headline('simple', doc, to_tsquery('simple', $1), $4) AS snip, score, at, conv, ep FROM (
		SELECT * FROM (
			SELECT $3::text AS kind, x.id AS id, i.id AS issue_id, i.title AS issue_title, i.status AS issue_status, ` + title + ` AS title,
				` + headline + ` AS doc, (-ts_rank(x.search_vector, to_tsquery('simple', $1)))::float8 AS score,
				` + k.at + ` AS at, ` + k.conv + ` AS conv, ` + k.endpoint + ` AS ep
			FROM ` + k.table + ` x` + k.join + `
			WHERE x.company_id = $2 AND x.search_vector @@ to_tsquery('simple', $1)` + filter + `
		) m` + cont + fmt.Sprintf(` ORDER BY score, id LIMIT %d`, p.limit()+1) + `
	) pg ORDER BY score, id`
	return queryAll(ctx, q, "search", scanHit, query, args...)
}

func scanHit(row rowScanner) (SearchHit, error) {
	var h SearchHit
	var at any
	err := row.Scan(&h.Kind, &h.ID, &h.IssueID, &h.IssueTitle, &h.IssueStatus, &h.Title, &h.Snippet, &h.Score, &at,
		&h.ConversationID, &h.EndpointID)
	if err != nil {
		return h, err
	}
	// Through a subquery SQLite may hand the time back as its stored
	// text (the declared type does not always follow the column).
	switch v := at.(type) {
	case time.Time:
		h.At = v.UTC()
	case string:
		t, perr := time.Parse("2006-01-02 15:04:05.999999999-07:00", v)
		if perr != nil {
			return h, fmt.Errorf("search: time %q: %w", v, perr)
		}
		h.At = t.UTC()
	default:
		return h, fmt.Errorf("search: unexpected time %T", at)
	}
	return h, nil
}

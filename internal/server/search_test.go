package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

type searchHit struct {
	Kind, ID, TaskID, Title, Snippet, InboxID string
}

// search runs GET …/search and returns the hits of every page, following
// nextCursor with limit per page.
func (e *env) search(t *testing.T, company, query string, limit int) []searchHit {
	t.Helper()
	var all []searchHit
	cursor := ""
	for range 100 {
		path := "/api/companies/" + company + "/search?" + query + "&limit=" + itoa(limit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		st, body := e.board.Do("GET", path, nil)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		var page struct {
			Items      []searchHit `json:"items"`
			NextCursor *string     `json:"nextCursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		all = append(all, page.Items...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
	t.Fatal("search paging does not end")
	return nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func hitIDs(hs []searchHit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// TestSearchRanksFiltersAndIsolates searches tasks, comments and
// retained email on both databases: relevance (a title match first),
// phrases, every filter, paging, the snippet's highlight, and company
// isolation (another company's identical text never shows).
func TestSearchRanksFiltersAndIsolates(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		ctx := context.Background()
		st := e.inst.Store
		a, b := e.company("Search A"), e.company("Search B")
		task := func(c, title, desc, status string) string {
			return testkit.ID(e.board.JSON("POST", "/api/companies/"+c+"/issues",
				map[string]any{"title": title, "description": desc, "status": status}, 201))
		}
		tTitle := task(a, "Invoice overdue for Globex", "Please chase it.", "todo")
		tDesc := task(a, "Quarterly review", "The overdue invoice from Globex is attached <b>here</b>.", "done")
		tOther := task(a, "Unrelated", "Nothing to see.", "todo")
		tB := task(b, "Invoice overdue for Globex", "Company B's copy of the words.", "todo")
		comment := testkit.ID(e.board.JSON("POST", "/api/issues/"+tOther+"/comments", map[string]any{"body": "Globex called about the invoice again"}, 201))

		agent := testkit.ID(e.board.JSON("POST", "/api/companies/"+a+"/agents", map[string]any{"name": "Mail",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		agentB := testkit.ID(e.board.JSON("POST", "/api/companies/"+b+"/agents", map[string]any{"name": "Mail",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		email := func(company, agentID, taskID, from, to, subject, text string, at time.Time) (string, string) {
			ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: company, AssignedAgentID: agentID, Status: domain.EndpointDraft,
				DisplayName: "Help", ReceiveMode: "websocket"}
			if _, err := st.InsertEndpoint(ctx, st.DB, &ep); err != nil {
				t.Fatal(err)
			}
			cv := domain.EmailConversation{CompanyID: company, EndpointID: ep.ID, IssueID: taskID, ExternalConversationID: store.NewID(),
				ExternalThreadID: store.NewID(), Subject: subject}
			if _, err := st.InsertConversation(ctx, st.DB, &cv); err != nil {
				t.Fatal(err)
			}
			m := domain.EmailMessage{CompanyID: company, EndpointID: ep.ID, ConversationID: cv.ID, ProviderMessageID: store.NewID(),
				Envelope: domain.EmailEnvelope{From: from, To: []string{to}, Subject: subject}, Text: text, Direction: "inbound",
				Timestamp: at}
			if _, err := st.InsertEmailMessage(ctx, st.DB, &m); err != nil {
				t.Fatal(err)
			}
			return m.ID, ep.ID
		}
		day := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
		mJane, inboxJane := email(a, agent, tOther, "Jane Doe <jane@customer.example>", "help@acme.example", "Refund request",
			"Hello, the marmalade arrived broken. Invoice 4471 attached.", day)
		mBob, _ := email(a, agent, tOther, "Bob <bob@vendor.example>", "billing@acme.example", "Marmalade order",
			"We shipped the marmalade on Monday.", day.AddDate(0, 0, 5))
		email(b, agentB, tB, "Jane Doe <jane@customer.example>", "help@b.example", "Refund request", "The marmalade of company B.", day)

		// Relevance: the title match first, then the description match.
		hits := e.search(t, a, "q=invoice+overdue&kind=task", 50)
		if got := hitIDs(hits); !slices.Equal(got, []string{tTitle, tDesc}) {
			t.Fatalf("task search: %v, want [%s %s]", got, tTitle, tDesc)
		}
		// Stored markup never comes back as markup (SQLite escapes it;
		// PostgreSQL's ts_headline drops tags).
		if !strings.Contains(hits[0].Snippet, "<mark>Invoice</mark>") || strings.Contains(hits[1].Snippet, "<b>") {
			t.Errorf("snippets not highlighted and escaped: %q / %q", hits[0].Snippet, hits[1].Snippet)
		}
		// Every kind: tasks, the comment and Jane's email (its body says invoice).
		all := e.search(t, a, "q=invoice", 1)
		for _, want := range []string{tTitle, tDesc, comment, mJane} {
			if !slices.Contains(hitIDs(all), want) {
				t.Errorf("q=invoice: %v lacks %s", hitIDs(all), want)
			}
		}
		if len(all) != 4 {
			t.Errorf("q=invoice paged one by one: %d hits %v, want 4 distinct", len(all), hitIDs(all))
		}
		// A phrase matches only the words in that order.
		if got := hitIDs(e.search(t, a, "q="+url.QueryEscape(`"overdue invoice"`), 50)); !slices.Equal(got, []string{tDesc}) {
			t.Errorf("phrase: %v, want [%s]", got, tDesc)
		}
		// kind= keeps one kind; an email's subject and its sender's name
		// are searched as well as its text.
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"q=globex&kind=comment", []string{comment}},
			{"q=globex&kind=email", nil},
			{"q=refund&kind=email", []string{mJane}},
			{"q=doe", []string{mJane}},
			{"q=shipped&kind=email", []string{mBob}},
		} {
			if got := hitIDs(e.search(t, a, c.query, 50)); !slices.Equal(got, c.want) && (len(got) != 0 || len(c.want) != 0) {
				t.Errorf("%s: %v, want %v", c.query, got, c.want)
			}
		}
		// Filters.
		for _, c := range []struct {
			q    string
			want []string
		}{
			{`marmalade from:jane`, []string{mJane}},
			{`marmalade from:"bob@vendor.example"`, []string{mBob}},
			{`from:jane@customer.example`, []string{mJane}},
			{`marmalade to:billing`, []string{mBob}},
			{`marmalade inbox:` + inboxJane, []string{mJane}},
			{`marmalade after:2026-11-22`, []string{mBob}},
			{`marmalade before:2026-11-22`, []string{mJane}},
			{`invoice status:done`, []string{tDesc}},
		} {
			got := hitIDs(e.search(t, a, "q="+url.QueryEscape(c.q), 50))
			if !slices.Equal(got, c.want) {
				t.Errorf("q=%s: %v, want %v", c.q, got, c.want)
			}
		}
		// Isolation: company B's rows never show in A, nor A's in B.
		for _, h := range e.search(t, a, "q=globex+invoice", 50) {
			if h.ID == tB {
				t.Errorf("company A's search shows company B's task")
			}
		}
		for _, h := range e.search(t, b, "q=marmalade", 50) {
			if h.ID == mJane || h.ID == mBob {
				t.Errorf("company B's search shows company A's email")
			}
		}
		if got := e.search(t, a, "q=company", 50); len(got) != 0 {
			t.Errorf("a word only company B holds: %v", hitIDs(got))
		}
		// Bad requests.
		for _, q := range []string{"q=", "q=status:done", "q=" + url.QueryEscape(`"open`), "q=x&kind=nope", "q=x+from:j&kind=task",
			"q=x&cursor=bad", "q=x+status:nope", "q=x+inbox:nobody@example.com"} {
			if st, body := e.board.Do("GET", "/api/companies/"+a+"/search?"+q, nil); st != 400 {
				t.Errorf("%s: %d %s, want 400", q, st, body)
			}
		}
	})
}

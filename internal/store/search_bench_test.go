package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// BenchmarkSearchEmails retains PAPERCLIP_BENCH_EMAILS emails (default
// 100,000) in one company, each with a few words of a small vocabulary and
// one word of its own, then times searches of a rare word, a common word
// with a sender filter and a phrase, reporting the p95 of each iteration's
// searches (docs/benchmarks.md, "Search (issue 31)").
func BenchmarkSearchEmails(b *testing.B) {
	n := 100_000
	if v := os.Getenv("PAPERCLIP_BENCH_EMAILS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("PAPERCLIP_BENCH_EMAILS=%q", v)
		}
	}
	dbtest.EachURLBench(b, func(b *testing.B, dialect db.Dialect, _ string) {
		var d *db.DB
		if dialect == db.Postgres {
			d = dbtest.OpenPostgres(b)
		} else {
			d = dbtest.OpenSQLite(b)
		}
		ctx := context.Background()
		st := store.New(d)
		company := seedSearchEmails(b, st, n)
		queries := []store.SearchQuery{
			{CompanyID: company, Kinds: []string{store.SearchEmail}, Words: []string{fmt.Sprintf("unique%d", n/2)}},
			{CompanyID: company, Kinds: []string{store.SearchEmail}, Words: []string{"refund"}, From: [][]string{{"customer7"}}},
			{CompanyID: company, Kinds: []string{store.SearchEmail}, Phrases: [][]string{{"broken", "parcel"}}},
		}
		names := []string{"rare", "from", "phrase"}
		var lat []time.Duration
		each := make([][]time.Duration, len(queries))
		b.ResetTimer()
		for b.Loop() {
			for n, q := range queries {
				start := time.Now()
				if _, err := st.Search(ctx, d, q, store.Page{Limit: 50}); err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				lat = append(lat, took)
				each[n] = append(each[n], took)
			}
		}
		b.StopTimer()
		p95 := func(l []time.Duration) float64 {
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			return float64(l[(len(l)*95)/100].Microseconds()) / 1000
		}
		b.ReportMetric(p95(lat), "p95-ms")
		for n, l := range each {
			b.ReportMetric(p95(l), names[n]+"-p95-ms")
		}
		b.ReportMetric(float64(n), "emails")
	})
}

// seedSearchEmails stores n retained emails of one inbox and conversation
// in transactions of 1,000.
func seedSearchEmails(b *testing.B, st *store.Store, n int) (company string) {
	var endpoint, conversation string
	ctx := context.Background()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		u, err := st.EnsureUser(ctx, tx, "bench@example.com", "Bench", false)
		if err != nil {
			return err
		}
		c, err := st.CreateCompany(ctx, tx, "Bench", u.ID)
		if err != nil {
			return err
		}
		company = c.ID
		ag := domain.Agent{CompanyID: company, Name: "Bench", AdapterType: "process"}
		if err := st.CreateAgent(ctx, tx, &ag); err != nil {
			return err
		}
		is := domain.Issue{CompanyID: company, Title: "Bench"}
		if _, err := st.CreateIssue(ctx, tx, &is); err != nil {
			return err
		}
		ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: company, AssignedAgentID: ag.ID, Status: domain.EndpointDraft,
			DisplayName: "Bench", ReceiveMode: "websocket"}
		if _, err := st.InsertEndpoint(ctx, tx, &ep); err != nil {
			return err
		}
		endpoint = ep.ID
		cv := domain.EmailConversation{CompanyID: company, EndpointID: endpoint, IssueID: is.ID, ExternalConversationID: "c",
			ExternalThreadID: "t", Subject: "Bench"}
		if _, err := st.InsertConversation(ctx, tx, &cv); err != nil {
			return err
		}
		conversation = cv.ID
		return nil
	})
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
	vocab := []string{"invoice", "parcel", "refund", "delivery", "broken", "thanks", "order", "question", "friday", "monday"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for start := 0; start < n; start += 1000 {
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			for i := start; i < min(start+1000, n); i++ {
				text := fmt.Sprintf("Hello, %s %s %s about my %s. unique%d", vocab[i%10], vocab[(i/10)%10], vocab[(i/100)%10], vocab[(i*7)%10], i)
				m := domain.EmailMessage{CompanyID: company, EndpointID: endpoint, ConversationID: conversation,
					ProviderMessageID: fmt.Sprintf("m%d", i), Direction: "inbound", Text: text, Timestamp: at.Add(time.Duration(i) * time.Minute),
					Envelope: domain.EmailEnvelope{From: fmt.Sprintf("Customer %d <customer%d@example.com>", i%50, i%50),
						To: []string{"help@acme.example"}, Subject: "Re: " + vocab[(i/3)%10]}}
				if _, err := st.InsertEmailMessage(ctx, tx, &m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("seed emails: %v", err)
		}
	}
	return company
}

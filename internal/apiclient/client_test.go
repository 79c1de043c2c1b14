package apiclient_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestClientTransports drives the same typed calls over HTTP (the CLI's
// and qualification's transport) and in-process (the UI's), against a real
// server, and checks that the API tells the two apart in its metrics and
// logs.
func TestClientTransports(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		inst := testkit.Start(t, testkit.Config(t, databaseURL))
		ctx := context.Background()

		// Over HTTP, as the local board (no credential, loopback).
		hc := apiclient.New(apiclient.Options{BaseURL: inst.URL() + "/api"})
		co, err := hc.CreateCompany(ctx, "Typed client")
		if err != nil {
			t.Fatalf("create company: %v", err)
		}
		if co.ID == "" || co.Name != "Typed client" {
			t.Fatalf("created company = %+v", co)
		}
		for _, tt := range []string{"first", "second", "third"} {
			if _, err := hc.CreateIssue(ctx, co.ID, apiclient.IssueInput{Title: &tt}); err != nil {
				t.Fatalf("create issue %s: %v", tt, err)
			}
		}
		page, next, err := hc.Issues(co.ID).Page(ctx, apiclient.Query("limit", "2"))
		if err != nil || len(page) != 2 || next == "" {
			t.Fatalf("first page: %d rows, next %q, err %v; want 2 rows and a cursor", len(page), next, err)
		}
		all, err := hc.Issues(co.ID).All(ctx, nil)
		if err != nil || len(all) != 3 {
			t.Fatalf("all issues: %d, %v; want 3", len(all), err)
		}
		done := "done"
		got, err := hc.PatchIssue(ctx, all[0].ID, apiclient.IssueInput{Status: &done})
		if err != nil || got.Status != "done" || got.Title == "" {
			t.Fatalf("patch issue: %+v, %v", got, err)
		}

		// A refusal is an *apiclient.Error with the API's status and message.
		_, err = hc.Issue(ctx, "not-a-uuid")
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Status < 400 || ae.Message == "" || ae.RequestID == "" {
			t.Fatalf("bad issue id: %v (%+v), want an *apiclient.Error with status, message and request id", err, ae)
		}

		// In-process, as the UI calls it: the actor comes preset on the
		// context, and the API authenticates nothing.
		board, err := inst.Store.GetUserByEmail(ctx, inst.Store.DB, store.LocalBoardEmail)
		if err != nil {
			t.Fatal(err)
		}
		actor := authz.Actor{Kind: authz.KindBoard, UserID: board.ID, IsInstanceAdmin: true, LocalBoard: true}
		ic := apiclient.InProcess(inst.API.Handler())
		ictx := api.WithPresetActor(ctx, actor)
		list, err := ic.Companies(ictx)
		if err != nil || len(list) != 1 || list[0].ID != co.ID {
			t.Fatalf("in-process companies: %+v, %v", list, err)
		}
		issues, err := ic.Issues(co.ID).All(ictx, apiclient.Query("status", "done"))
		if err != nil || len(issues) != 1 || issues[0].ID != all[0].ID {
			t.Fatalf("in-process done issues: %+v, %v", issues, err)
		}
		// Without a preset actor an in-process request is anonymous and
		// from no local Host: refused like any other.
		if _, err := ic.Companies(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("in-process without an actor: %v, want 401", err)
		}

		series := scrape(t, inst.URL()+"/metrics")
		for name, want := range map[string]string{
			`paperclip_http_requests_total{code="OK",method="GET",route="GET /api/companies",via="in_process"}`:  "1",
			`paperclip_http_requests_total{code="Created",method="POST",route="POST /api/companies",via="http"}`: "1",
			`paperclip_http_requests_total{code="OK",method="GET",route="GET /api/companies",via="http"}`:        "",
		} {
			if got := series[name]; got != want {
				t.Errorf("%s = %q, want %q (\"\": not counted)", name, got, want)
			}
		}
		var inProcessLines int
		for _, line := range strings.Split(inst.Logs.String(), "\n") {
			if !strings.Contains(line, `msg="http request"`) || !strings.Contains(line, "via=in_process") {
				continue
			}
			inProcessLines++
			if !strings.Contains(line, "level=DEBUG") && !strings.Contains(line, "status=5") {
				t.Errorf("in-process request logged above debug: %s", line)
			}
		}
		if inProcessLines == 0 {
			t.Errorf("no in-process request in the (debug) log:\n%s", inst.Logs.String())
		}
	})
}

// scrape reads the server's /metrics over HTTP: each series to its value.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// env is one started server with a board client.
type env struct {
	t     *testing.T
	inst  *testkit.Instance
	board *testkit.Client
	bin   string
}

func setup(t *testing.T, databaseURL string) *env {
	t.Helper()
	cfg := testkit.Config(t, databaseURL)
	inst := testkit.Start(t, cfg)
	return &env{t: t, inst: inst, board: testkit.NewClient(t, inst.URL()), bin: testkit.Binary(t)}
}

func (e *env) company(name string) string {
	return testkit.ID(e.board.JSON("POST", "/api/companies", map[string]any{"name": name}, 201))
}

// shellAgent creates a process agent running script with /bin/sh; the
// script can call the CLI as "$PC".
func (e *env) shellAgent(companyID, name, script string, extra map[string]any) string {
	body := map[string]any{"name": name, "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}, "env": map[string]string{"PC": e.bin}}}
	for k, v := range extra {
		body[k] = v
	}
	return testkit.ID(e.board.JSON("POST", "/api/companies/"+companyID+"/agents", body, 201))
}

func (e *env) task(companyID, agentID string) string {
	return testkit.ID(e.board.JSON("POST", "/api/companies/"+companyID+"/issues",
		map[string]any{"title": "Task for " + agentID[:8], "assigneeAgentId": agentID}, 201))
}

func (e *env) waitRun(runID string, statuses ...string) map[string]any {
	var run map[string]any
	testkit.Eventually(e.t, 30*time.Second, "run "+runID+" to reach "+strings.Join(statuses, "/"), func() bool {
		run = e.board.JSON("GET", "/api/heartbeat-runs/"+runID, nil, 200)
		for _, s := range statuses {
			if run["status"] == s {
				return true
			}
		}
		return false
	})
	return run
}

func count(t *testing.T, d *db.DB, table string) int {
	t.Helper()
	var n int
	if err := d.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestEndToEndProcessAgent(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Acme")
		tokenFile := filepath.Join(t.TempDir(), "token")
		script := `"$PC" api POST "/issues/$PAPERCLIP_TASK_ID/comments" --data '{"body":"hello from the agent"}' && printf %s "$PAPERCLIP_API_KEY" > ` + tokenFile
		aid := e.shellAgent(cid, "Worker", script, nil)
		iid := e.task(cid, aid)
		wake := map[string]any{"reason": "manual", "issueId": iid, "idempotencyKey": "wake-1"}
		r1 := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", wake, 202)
		r2 := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", wake, 202)
		if testkit.ID(r1) != testkit.ID(r2) {
			t.Fatalf("same idempotency key started two runs: %s and %s", testkit.ID(r1), testkit.ID(r2))
		}
		run := e.waitRun(testkit.ID(r1), "succeeded", "failed")
		if run["status"] != "succeeded" {
			log := e.board.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(r1)+"/log", nil, 200)
			t.Fatalf("run %v: %v", run["status"], log["content"])
		}
		if runs := e.board.List("/api/companies/" + cid + "/heartbeat-runs?agentId=" + aid); len(runs) != 1 {
			t.Fatalf("want exactly 1 run, got %d", len(runs))
		}
		comments := e.board.List("/api/issues/" + iid + "/comments")
		if len(comments) != 1 || comments[0]["authorKind"] != "agent" || comments[0]["authorAgentId"] != aid || comments[0]["runId"] != testkit.ID(r1) {
			t.Fatalf("agent comment not recorded as the agent's: %v", comments)
		}
		token, err := os.ReadFile(tokenFile)
		if err != nil || !strings.HasPrefix(string(token), "pcr_") {
			t.Fatalf("agent did not see a run token: %q %v", token, err)
		}
		agentClient := e.board.As(string(token), testkit.ID(r1))
		if st, body := agentClient.Do("GET", "/api/issues/"+iid, nil); st != http.StatusUnauthorized {
			t.Fatalf("finished run's token: status %d (%s), want 401", st, body)
		}
	})
}

// blockingAgent runs until release exists, after writing its token and run
// id to dir/<name>.token and dir/<name>.run.
func blockingScript(dir, name string) string {
	return fmt.Sprintf(`printf %%s "$PAPERCLIP_API_KEY" > %[1]s/%[2]s.tmp && mv %[1]s/%[2]s.tmp %[1]s/%[2]s.token && printf %%s "$PAPERCLIP_RUN_ID" > %[1]s/%[2]s.run; while [ ! -e %[1]s/release ]; do sleep 0.05; done`, dir, name)
}

func readWhenPresent(t *testing.T, path string) string {
	t.Helper()
	var v []byte
	testkit.Eventually(t, 30*time.Second, "file "+path, func() bool {
		b, err := os.ReadFile(path)
		v = b
		return err == nil && len(b) > 0
	})
	return string(v)
}

func TestAuthorizationMatrix(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		a := e.company("A")
		b := e.company("B")
		viewer := e.board.JSON("POST", "/api/companies/"+a+"/members", map[string]any{"email": "viewer@example.com", "role": "viewer"}, 201)
		vkey := e.board.JSON("POST", "/api/companies/"+a+"/board-keys", map[string]any{"userId": viewer["userId"]}, 201)
		vc := e.board.As(vkey["token"].(string), "")
		// Viewer reads its company, cannot write, cannot see another company.
		vc.JSON("GET", "/api/companies/"+a, nil, 200)
		if st, body := vc.Do("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "x"}); st != 403 {
			t.Fatalf("viewer write: %d %s, want 403", st, body)
		}
		if st, _ := vc.Do("GET", "/api/companies/"+b, nil); st != 404 {
			t.Fatalf("cross-company read: %d, want 404", st)
		}
		if st, _ := vc.Do("GET", "/api/companies/"+b+"/issues", nil); st != 404 {
			t.Fatalf("cross-company list: %d, want 404", st)
		}
		// Unknown credentials are 401.
		if st, _ := e.board.As("pcb_nonsense0000", "").Do("GET", "/api/companies", nil); st != 401 {
			t.Fatalf("bad board key: %d, want 401", st)
		}
		// Two agents, each with a task; agent 1 blocks while we use its token.
		dir := t.TempDir()
		a1 := e.shellAgent(a, "One", blockingScript(dir, "one"), nil)
		a2 := e.shellAgent(a, "Two", "true", nil)
		t1 := e.task(a, a1)
		t2 := e.task(a, a2)
		bIssueAgent := e.shellAgent(b, "Other", "true", nil)
		tb := e.task(b, bIssueAgent)
		run := e.board.JSON("POST", "/api/agents/"+a1+"/wakeup", map[string]any{"reason": "test", "issueId": t1}, 202)
		token := readWhenPresent(t, filepath.Join(dir, "one.token"))
		runID := testkit.ID(run)
		ac := e.board.As(token, runID)
		ac.JSON("POST", "/api/issues/"+t1+"/comments", map[string]any{"body": "mine"}, 201)
		if st, body := ac.Do("POST", "/api/issues/"+t2+"/comments", map[string]any{"body": "not mine"}); st != 403 {
			t.Fatalf("agent writing another agent's task: %d %s, want 403", st, body)
		}
		if st, body := e.board.As(token, "").Do("POST", "/api/issues/"+t1+"/comments", map[string]any{"body": "no run id"}); st != 403 {
			t.Fatalf("agent write without run id: %d %s, want 403", st, body)
		}
		if st, _ := e.board.As(token, store0).Do("POST", "/api/issues/"+t1+"/comments", map[string]any{"body": "wrong run id"}); st != 403 {
			t.Fatalf("agent write with another run id: %d, want 403", st)
		}
		if st, _ := ac.Do("GET", "/api/issues/"+tb, nil); st != 404 {
			t.Fatalf("agent reading another company's task: %d, want 404", st)
		}
		if st, _ := ac.Do("POST", "/api/companies", map[string]any{"name": "evil"}); st != 403 {
			t.Fatalf("agent creating a company: %d, want 403", st)
		}
		if st, _ := ac.Do("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}); st != 403 {
			t.Fatalf("agent changing settings: %d, want 403", st)
		}
		if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		e.waitRun(runID, "succeeded")
		if n := len(e.board.List("/api/issues/" + t2 + "/comments")); n != 0 {
			t.Fatalf("refused write left %d comments", n)
		}
	})
}

// store0 is a syntactically valid run id that belongs to no run.
const store0 = "00000000-0000-4000-8000-000000000000"

func TestBudgetRefusal(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Budget Co")
		aid := e.shellAgent(cid, "Spender", "true", map[string]any{"budgetMonthlyCents": 500})
		e.inst.SetSpend(t, aid, 500)
		run := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202)
		if run["status"] != "refused" || run["refusalReason"] != "budget_exceeded" {
			t.Fatalf("over-budget wake: %v", run)
		}
		runs := e.board.List("/api/companies/" + cid + "/heartbeat-runs?agentId=" + aid)
		if len(runs) != 1 || runs[0]["status"] != "refused" {
			t.Fatalf("refusal not visible in runs: %v", runs)
		}
		found := false
		for _, a := range e.board.List("/api/companies/" + cid + "/activity") {
			if a["action"] == "heartbeat.refused" && a["entityId"] == testkit.ID(run) {
				found = true
			}
		}
		if !found {
			t.Fatal("refusal not in the activity log")
		}
		// Paused agents are refused too; raising the budget lets it run.
		e.board.JSON("PATCH", "/api/agents/"+aid, map[string]any{"status": "paused"}, 200)
		if r := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202); r["refusalReason"] != "agent_paused" {
			t.Fatalf("paused agent wake: %v", r)
		}
		e.board.JSON("PATCH", "/api/agents/"+aid, map[string]any{"status": "active", "budgetMonthlyCents": 1000}, 200)
		r := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202)
		e.waitRun(testkit.ID(r), "succeeded")
	})
}

func TestBadInputIsRejectedWithoutPartialRows(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Strict")
		d := e.inst.DB
		before := map[string]int{}
		tables := []string{"companies", "agents", "issues", "issue_comments", "activity_log", "heartbeat_runs"}
		for _, tb := range tables {
			before[tb] = count(t, d, tb)
		}
		cases := []struct {
			method, path string
			body         any
			want         int
			msg          string
		}{
			{"POST", "/api/companies", `{"name": "x"`, 400, "malformed JSON"},
			{"POST", "/api/companies", `{"name":"x","extra":1}`, 400, "unknown field"},
			{"POST", "/api/companies", `{"name":"x"} {"name":"y"}`, 400, "unexpected data"},
			{"POST", "/api/companies", `{"name":42}`, 400, "must be string"},
			{"POST", "/api/companies", ``, 400, "body is required"},
			{"POST", "/api/companies", `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "exceeds"},
			{"POST", "/api/companies", `{"name":"  "}`, 400, "name is required"},
			{"GET", "/api/companies/not-a-uuid", nil, 400, "invalid companyId"},
			{"GET", "/api/issues/123", nil, 400, "invalid issueId"},
			{"GET", "/api/companies/" + store0, nil, 404, "not found"},
			{"POST", "/api/companies/" + cid + "/agents", `{"name":"a","adapterType":"process","adapterConfig":{}}`, 400, "command is required"},
			{"POST", "/api/companies/" + cid + "/agents", `{"name":"a","adapterType":"process","adapterConfig":{"command":"x","bogus":1}}`, 400, "unknown field"},
			{"POST", "/api/companies/" + cid + "/agents", `{"name":"a","adapterType":"ssh","adapterConfig":{}}`, 400, "adapterType"},
			{"POST", "/api/companies/" + cid + "/agents", `{"name":"a","adapterType":"process","adapterConfig":{"command":"x"},"permissions":{"trustPreset":"root"}}`, 400, "trustPreset"},
			{"POST", "/api/companies/" + cid + "/issues", `{"title":"t","assigneeAgentId":"` + store0 + `"}`, 400, "agent not found"},
			{"POST", "/api/companies/" + cid + "/issues", `{"title":"t","status":"nope"}`, 400, "status must be"},
			{"POST", "/api/companies/" + cid + "/issues", `{"title":"t","parentId":"zzz"}`, 400, "invalid parentId"},
			{"POST", "/api/agents/" + store0 + "/wakeup", `{"reason":"x"}`, 404, "not found"},
			{"GET", "/api/nope", nil, 404, "no such API route"},
		}
		for _, c := range cases {
			st, body := e.board.Do(c.method, c.path, c.body)
			if st != c.want || !strings.Contains(string(body), c.msg) {
				t.Errorf("%s %s (%s): got %d %s; want %d containing %q", c.method, c.path, c.msg, st, body, c.want, c.msg)
			}
			if !bytes.HasPrefix(body, []byte(`{"error":`)) {
				t.Errorf("%s %s: error body is not {error:…}: %s", c.method, c.path, body)
			}
		}
		for _, tb := range tables {
			if n := count(t, d, tb); n != before[tb] {
				t.Errorf("table %s changed from %d to %d rows after rejected requests", tb, before[tb], n)
			}
		}
	})
}

func TestSecretCanaryNeverLeaks(t *testing.T) {
	const canary = "CANARY-sk-7f3a9c1e5b-do-not-leak"
	t.Setenv("PAPERCLIP_SECRETS_MASTER_KEY", "")
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Vaulted")
		sec := e.board.JSON("POST", "/api/companies/"+cid+"/secrets", map[string]any{"name": "provider-key", "value": canary}, 201)
		e.board.List("/api/companies/" + cid + "/secrets")
		e.board.JSON("POST", "/api/secrets/"+testkit.ID(sec)+"/versions", map[string]any{"value": canary + "-v2"}, 200)
		// Server-side resolution works and registers the value for redaction.
		val, err := e.inst.Vault.Resolve(context.Background(), e.inst.DB, testkit.ID(sec), 0)
		if err != nil || string(val) != canary+"-v2" {
			t.Fatalf("resolve: %q %v", val, err)
		}
		e.inst.Logger.Info("provider call failed", "detail", "key "+canary+" rejected")
		aid := e.shellAgent(cid, "EnvDumper", "env", nil)
		run := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "dump"}, 202)
		e.waitRun(testkit.ID(run), "succeeded")
		log := e.board.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(run)+"/log", nil, 200)
		content := log["content"].(string)
		if !strings.Contains(content, "PAPERCLIP_RUN_ID=") {
			t.Fatalf("env dump missing run variables: %s", content)
		}
		e.board.List("/api/companies/" + cid + "/activity")
		for where, text := range map[string]string{"API responses": e.board.Seen.String(), "logs": e.inst.Logs.String(), "run environment": content} {
			if strings.Contains(text, canary) {
				t.Errorf("canary secret leaked into %s", where)
			}
		}
		if strings.Contains(content, "PAPERCLIP_SECRETS_MASTER_KEY") || strings.Contains(content, "PAPERCLIP_DATABASE_URL") {
			t.Errorf("server environment leaked into the run environment")
		}
		// The sealed value in the database is not the plaintext either.
		var sealed string
		if err := e.inst.DB.QueryRowContext(context.Background(), `SELECT sealed FROM company_secret_versions LIMIT 1`).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sealed, canary) {
			t.Error("secret stored in plaintext")
		}
	})
}

func TestAttachments(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Files")
		iid := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "with file"}, 201))
		upload := func(name, ctype string, data []byte) (int, []byte) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			h := map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="` + name + `"`}, "Content-Type": {ctype}}
			pw, _ := mw.CreatePart(h)
			pw.Write(data)
			mw.Close()
			req, _ := http.NewRequest("POST", e.inst.URL()+"/api/issues/"+iid+"/attachments", &buf)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out bytes.Buffer
			out.ReadFrom(resp.Body)
			return resp.StatusCode, out.Bytes()
		}
		if st, body := upload("../../etc/notes.txt", "text/plain", []byte("hello")); st != 201 || !strings.Contains(string(body), `"filename":"notes.txt"`) ||
			!strings.Contains(string(body), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824") {
			t.Fatalf("upload: %d %s", st, body)
		}
		if st, _ := upload("x.exe", "application/x-msdownload", []byte("MZ")); st != 415 {
			t.Fatalf("disallowed type: %d, want 415", st)
		}
		// Over the bound: a clear 413, and nothing half-written (no row,
		// no content, no staged file left in the home).
		blobs := count(t, e.inst.DB, "attachment_blobs")
		if st, body := upload("big.txt", "text/plain", bytes.Repeat([]byte("a"), 10<<20+1)); st != 413 ||
			!strings.Contains(string(body), `"code":"attachment_too_large"`) || !strings.Contains(string(body), "exceeds the 10485760-byte limit") {
			t.Fatalf("oversized: %d %s, want 413", st, body)
		}
		if n := count(t, e.inst.DB, "attachment_blobs"); n != blobs {
			t.Fatalf("an oversized upload stored content: %d → %d blobs", blobs, n)
		}
		if left, _ := filepath.Glob(filepath.Join(e.inst.Config.AttachmentsDir(), ".upload-*")); len(left) != 0 {
			t.Fatalf("staged files left: %v", left)
		}
		// Several chunks, with bytes of every value, round trip exactly.
		big := make([]byte, 700<<10)
		for i := range big {
			big[i] = byte(i * 7)
		}
		if st, body := upload("data.zip", "application/zip", big); st != 201 {
			t.Fatalf("upload of %d bytes: %d %s", len(big), st, body)
		}
		list := e.board.List("/api/issues/" + iid + "/attachments")
		if len(list) != 2 {
			t.Fatalf("want 2 attachments, got %d", len(list))
		}
		for _, a := range list {
			st, body, h := e.board.DoHeader("GET", "/api/attachments/"+testkit.ID(a)+"/content", nil)
			want := []byte("hello")
			if a["filename"] == "data.zip" {
				want = big
			}
			if st != 200 || !bytes.Equal(body, want) {
				t.Fatalf("download %s: %d, %d bytes", a["filename"], st, len(body))
			}
			if h.Get("Content-Disposition") != `attachment; filename=`+a["filename"].(string) || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("Content-Security-Policy") != "sandbox" || h.Get("Content-Type") != a["contentType"] ||
				h.Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Fatalf("download headers of %s: %v", a["filename"], h)
			}
		}
		// The metadata places the attachment in its company and task.
		for _, a := range list {
			meta := e.board.JSON("GET", "/api/attachments/"+testkit.ID(a), nil, 200)
			if meta["companyId"] != cid || meta["issueId"] != iid || meta["filename"] != a["filename"] {
				t.Fatalf("attachment metadata: %v", meta)
			}
		}
		if st, _ := e.board.Do("GET", "/api/attachments/"+testkit.NewUUID(), nil); st != 404 {
			t.Fatalf("unknown attachment: %d, want 404", st)
		}
		// The content is in the database, not in the home.
		if n := count(t, e.inst.DB, "attachment_blobs"); n != 2 {
			t.Fatalf("%d blobs, want 2", n)
		}
		files := 0
		_ = filepath.WalkDir(e.inst.Config.AttachmentsDir(), func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return nil
		})
		if files != 0 {
			t.Fatalf("%d files under the home's attachments directory", files)
		}
	})
}

// A home from before attachment content moved into the database: rows
// whose bytes are files in the home. The server moves them into the
// database at start (and a read moves what it needs at once); a row with
// neither content nor file answers a clear 404.
func TestAttachmentBackfillAtStart(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		ctx := context.Background()
		cfg := testkit.Config(t, url)
		d, err := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		st := store.New(d)
		co, err := st.CreateCompany(ctx, d, "Old home", "")
		if err != nil {
			t.Fatal(err)
		}
		issue := domain.Issue{CompanyID: co.ID, Title: "files from before"}
		if _, err := st.CreateIssue(ctx, d, &issue); err != nil {
			t.Fatal(err)
		}
		legacy := func(name string, data []byte, withFile bool) string {
			sum := sha256.Sum256(data)
			sha := hex.EncodeToString(sum[:])
			if withFile {
				p := filepath.Join(cfg.AttachmentsDir(), sha[:2], sha)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			a := domain.Attachment{CompanyID: co.ID, IssueID: issue.ID, Filename: name, ContentType: "text/plain", SizeBytes: int64(len(data)), SHA256: sha}
			if err := st.CreateAttachment(ctx, d, &a); err != nil {
				t.Fatal(err)
			}
			return a.ID
		}
		first, second := bytes.Repeat([]byte("first file "), 30000), []byte("second file")
		idFirst, idSecond := legacy("first.txt", first, true), legacy("second.txt", second, true)
		idGone := legacy("gone.txt", []byte("never kept"), false)
		d.Close()

		inst := testkit.Start(t, cfg)
		board := testkit.NewClient(t, inst.URL())
		// Read at once: served from the file, whether or not the start's
		// backfill got to it first.
		if st, body := board.Do("GET", "/api/attachments/"+idFirst+"/content", nil); st != 200 || !bytes.Equal(body, first) {
			t.Fatalf("download of a file from before: %d, %d bytes", st, len(body))
		}
		testkit.Eventually(t, 30*time.Second, "the backfill at start", func() bool {
			return strings.Contains(inst.Logs.String(), "attachment backfill")
		})
		if n := count(t, inst.DB, "attachment_blobs"); n != 2 {
			t.Fatalf("%d blobs after the backfill, want 2", n)
		}
		if !strings.Contains(inst.Logs.String(), "missing=1") {
			t.Fatalf("the backfill did not report the missing file:\n%s", inst.Logs.String())
		}
		// The files are no longer needed.
		if err := os.RemoveAll(cfg.AttachmentsDir()); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string][]byte{idFirst: first, idSecond: second} {
			if st, body := board.Do("GET", "/api/attachments/"+id+"/content", nil); st != 200 || !bytes.Equal(body, want) {
				t.Fatalf("download after the files were removed: %d, %d bytes", st, len(body))
			}
		}
		if st, body := board.Do("GET", "/api/attachments/"+idGone+"/content", nil); st != 404 || !strings.Contains(string(body), "attachment_content_missing") {
			t.Fatalf("download without content or file: %d %s", st, body)
		}
	})
}

package ui_test

import (
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// mailUI is an authenticated-mode server with an active inbox whose agent
// saves, on every run, the email thread it can read (to check what an
// agent sees); board, member and viewer browsers are signed in.
type mailUI struct {
	inst                  *testkit.Instance
	em                    *emulator.Server
	board                 *testkit.Client
	cid, aid, eid, dir    string
	admin, member, viewer *env
}

func startMailUI(t *testing.T, dbURL string) *mailUI {
	t.Helper()
	em := testkit.StartEmulator(t)
	cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
	cfg.DeploymentMode = config.ModeAuthenticated
	cfg.AgentMailTimeout = 2 * time.Second
	inst := testkit.Start(t, cfg)
	m := &mailUI{inst: inst, em: em, dir: t.TempDir()}
	base := &env{t: t, inst: inst, base: inst.URL(), api: testkit.NewClient(t, inst.URL())}
	adminKey, _ := base.boardUser("admin@example.com", "", "", true)
	m.board = testkit.NewClient(t, inst.URL()).As(adminKey, "")
	m.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	m.cid = testkit.ID(m.board.JSON("POST", "/api/companies", map[string]any{"name": "Mail Co"}, 201))
	script := `paperclipai email thread "$PAPERCLIP_TASK_ID" > ` + m.dir + `/"$PAPERCLIP_TASK_ID".tmp && mv ` + m.dir + `/"$PAPERCLIP_TASK_ID".tmp ` + m.dir + `/"$PAPERCLIP_TASK_ID".json`
	m.aid = testkit.ID(m.board.JSON("POST", "/api/companies/"+m.cid+"/agents", map[string]any{"name": "Mail Agent", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}}, 201))
	_, orgKey := em.CreateOrganization("Acme Mail")
	m.eid = testkit.ID(m.board.JSON("POST", "/api/companies/"+m.cid+"/email/inboxes", map[string]any{"assignedAgentId": m.aid,
		"apiKey": orgKey, "username": "help", "idempotencyKey": testkit.NewUUID()}, 201))
	testkit.Eventually(t, 30*time.Second, "the activation catch-up", func() bool {
		return m.board.JSON("GET", "/api/email/inboxes/"+m.eid, nil, 200)["lastSyncAt"] != nil
	})
	memberKey, _ := base.boardUser("member@example.com", m.cid, "member", false)
	viewerKey, _ := base.boardUser("viewer@example.com", m.cid, "viewer", false)
	m.admin, m.member, m.viewer = m.session(t, adminKey), m.session(t, memberKey), m.session(t, viewerKey)
	return m
}

// session is a signed-in browser-like client.
func (m *mailUI) session(t *testing.T, key string) *env {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	e := &env{t: t, inst: m.inst, base: m.inst.URL(), api: m.board,
		http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if p := e.login(key); p.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.status, p.body)
	}
	return e
}

// task waits for the task titled title and returns its id.
func (m *mailUI) task(t *testing.T, title string) string {
	t.Helper()
	var id string
	testkit.Eventually(t, 30*time.Second, "task "+title, func() bool {
		for _, is := range m.board.List("/api/companies/" + m.cid + "/issues") {
			if is["title"] == title {
				id = is["id"].(string)
			}
		}
		return id != ""
	})
	return id
}

func (m *mailUI) thread(t *testing.T, task string) map[string]any {
	t.Helper()
	return m.board.JSON("GET", "/api/companies/"+m.cid+"/email/tasks/"+task, nil, 200)
}

// between returns the part of s from the first start to the next end.
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}

var remoteRef = regexp.MustCompile(`(?i)<(img|iframe|object|embed|video|audio|source|link|script)\b[^>]*\b(src|href|data)\s*=\s*"?https?:`)

// The task email view as each member sees it: email cards with escaped
// text, Bcc only under Email details, attachments as downloads, no
// composer, and the resolve form for managers only.
func TestTaskEmailView(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		m := startMailUI(t, dbURL)
		c := "/c/" + m.cid
		const evilSubject = `<script>alert(1)</script> Order "><img src=x onerror=alert(2)>`
		const evilText = "Where is it? ![t](http://127.0.0.1:1/p.png) <img src=\"http://127.0.0.1:1/q.png\"> \"><svg onload=alert(3)>"
		res, err := m.em.Deliver("help@agentmail.to", emulator.DeliverRequest{From: `"<script>alert(5)</script>" <mallory@example.com>`,
			Cc: []string{"carol@example.com"}, Subject: evilSubject,
			Text: evilText + "\n\nOn Mon, Bob wrote:\n> Earlier thread text",
			HTML: `<p>Where is it?<img src="http://127.0.0.1:1/h.png"></p>`,
			Attachments: []emulator.DeliverAttachment{
				{Filename: "invoice.html", ContentType: "text/html", ContentBase64: base64.StdEncoding.EncodeToString([]byte(`<script>alert(4)</script>`))},
				{Filename: "photo.png", ContentType: "image/png", ContentBase64: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nnot really"))},
			}})
		if err != nil {
			t.Fatal(err)
		}
		task := m.task(t, evilSubject)
		testkit.Eventually(t, 30*time.Second, "the email and its attachments on the task", func() bool {
			th := m.thread(t, task)
			msgs, _ := th["messages"].([]any)
			return len(msgs) == 1 && len(msgs[0].(map[string]any)["attachmentIds"].([]any)) == 2
		})
		page := m.admin.get(c + "/tasks/" + task)
		if page.status != 200 {
			t.Fatalf("task page: %d %s", page.status, page.body)
		}
		body := page.body
		card := between(body, `<article class="email-card email-in"`, `</article>`)
		if card == "" || !strings.Contains(card, `aria-label="Email received"`) {
			t.Fatalf("no received email card: %s", body)
		}
		for _, want := range []string{"From:</span> &#34;&lt;script&gt;alert(5)&lt;/script&gt;&#34; &lt;mallory@example.com&gt;", `<span class="tag">External</span>`,
			"To:</span> help@agentmail.to", "Cc:</span> carol@example.com",
			"&lt;script&gt;alert(1)&lt;/script&gt; Order &#34;&gt;&lt;img src=x onerror=alert(2)&gt;",
			"Where is it? ![t](http://127.0.0.1:1/p.png) &lt;img src=&#34;http://127.0.0.1:1/q.png&#34;&gt; &#34;&gt;&lt;svg onload=alert(3)&gt;",
			`<details class="email-fulltext"`, "Show full email", "Earlier thread text", "Message ID:", html.EscapeString(res.MessageID),
			"invoice.html · text/html", "photo.png · image/png"} {
			if !strings.Contains(card, want) {
				t.Errorf("email card lacks %q", want)
			}
		}
		// The quoted history is only inside the closed full-text disclosure.
		if i, j := strings.Index(card, "Earlier thread text"), strings.Index(card, `<details class="email-fulltext"`); i < j {
			t.Errorf("quoted history outside Show full email")
		}
		// An email task reads as its conversation: no generated
		// Description, and the first email opens the timeline.
		if strings.Contains(body, `id="desc-h"`) || strings.Index(body, `id="task-timeline"`) > strings.Index(body, `class="email-card email-in"`) {
			t.Errorf("the email task shows a generated Description, or its first email is not the timeline's start")
		}
		// The system comment that carries the text for agents is replaced
		// by the card.
		if strings.Contains(body, "Email from") {
			t.Errorf("the message's system comment is shown besides its card")
		}
		for _, bad := range []string{"<script>alert", "<img", "<svg onload", "<iframe", "<object", "<embed", "onerror=alert(2)>", "mailto:"} {
			if strings.Contains(body, bad) {
				t.Errorf("task page contains %q", bad)
			}
		}
		if m := remoteRef.FindString(body); m != "" {
			t.Errorf("task page loads remote content: %s", m)
		}
		if inlineScript.MatchString(body) || eventAttr.MatchString(body) || strings.Contains(body, "style=") {
			t.Errorf("inline script, style or event handler on the email task page")
		}
		// Attachments are download links only, served as attachments in a
		// sandbox and never sniffed.
		links := regexp.MustCompile(`<a href="(/c/[^"]+/attachments/[^"]+)" download>`).FindAllStringSubmatch(card, -1)
		if len(links) != 2 {
			t.Fatalf("attachment links: %v", links)
		}
		for _, l := range links {
			p := m.admin.get(l[1])
			if p.status != 200 || !strings.HasPrefix(p.header.Get("Content-Disposition"), "attachment") ||
				p.header.Get("Content-Security-Policy") != "sandbox; default-src 'none'" || p.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("download %s: %d %v", l[1], p.status, p.header)
			}
		}

		// No composer: one text input (the comment), which says comments
		// stay internal, and no email buttons or fields.
		if n := strings.Count(body, "<textarea"); n != 1 || !strings.Contains(body, `id="comment-body"`) {
			t.Errorf("%d text areas on the email task page", n)
		}
		if !strings.Contains(body, "Comments are internal and are never sent as email. To email the sender, ask Mail Agent — it replies with an explicit, tracked email action.") {
			t.Errorf("the comment form does not say comments stay internal")
		}
		for _, bad := range []string{"Email reply", "Internal comment", "Start email child task", `name="to"`, `name="cc"`, `name="subject"`} {
			if strings.Contains(body, bad) {
				t.Errorf("composer element %q on the task page", bad)
			}
		}
		outbox := len(m.em.Outbox("", ""))
		if p := m.admin.post(c+"/tasks/"+task, c+"/tasks/"+task+"/comments", url.Values{"body": {"Internal note for the agent."}}); p.status != http.StatusSeeOther {
			t.Fatalf("comment: %d %s", p.status, p.body)
		}
		if pubs := m.thread(t, task)["publications"].([]any); len(pubs) != 0 || len(m.em.Outbox("", "")) != outbox {
			t.Fatalf("a comment became email: %d publications", len(pubs))
		}

		// The header box and the fragments.
		for _, want := range []string{`id="task-email"`, "Email conversation · ", "help@agentmail.to", "1 email · 0 sends"} {
			if !strings.Contains(m.admin.get(c+"/tasks/"+task+"?fragment=task-email").body, want) {
				t.Errorf("task-email fragment lacks %q", want)
			}
		}
		if f := m.admin.get(c + "/tasks/" + task + "?fragment=task-timeline"); !strings.Contains(f.body, `aria-label="Email received"`) ||
			!strings.Contains(f.body, "invoice.html") || strings.Contains(f.body, "<html") {
			t.Errorf("task-timeline fragment: %d %s", f.status, f.body)
		}

		// A board send with Bcc: the board sees Bcc only under Email
		// details; the agent reading the same thread gets no Bcc.
		key := testkit.NewUUID()
		m.board.JSON("POST", "/api/companies/"+m.cid+"/email/send", map[string]any{"endpointId": m.eid, "parentIssueId": task,
			"to": []string{"client@example.com"}, "bcc": []string{"secret-bcc@example.com"}, "subject": "Quote follow-up",
			"text": "Here is the quote.", "idempotencyKey": key}, 202)
		child := m.task(t, "Quote follow-up")
		testkit.Eventually(t, 30*time.Second, "the sent message on the child task", func() bool {
			msgs, _ := m.thread(t, child)["messages"].([]any)
			return len(msgs) == 1
		})
		cp := m.admin.get(c + "/tasks/" + child)
		checkPage(t, c+"/tasks/"+child, cp)
		sent := between(cp.body, `<article class="email-card email-out"`, `</article>`)
		if !strings.Contains(sent, `aria-label="Email sent"`) || !strings.Contains(sent, "data-outcome=") {
			t.Fatalf("sent email card: %s", cp.body)
		}
		details := between(sent, `<details class="email-details"`, `</details>`)
		if strings.Count(cp.body, "secret-bcc@example.com") != 1 || !strings.Contains(details, "Bcc:</span> secret-bcc@example.com") {
			t.Errorf("Bcc outside Email details (or missing): %s", sent)
		}
		if !strings.Contains(cp.body, "Started with an email to client@example.com") {
			t.Errorf("child task box lacks its origin")
		}
		m.board.JSON("POST", "/api/agents/"+m.aid+"/wakeup", map[string]any{"reason": "manual", "issueId": child}, 202)
		var agentView struct {
			Messages []struct {
				Bcc []string `json:"bcc"`
			} `json:"messages"`
		}
		testkit.Eventually(t, 30*time.Second, "the agent's view of the thread", func() bool {
			raw, err := os.ReadFile(filepath.Join(m.dir, child+".json"))
			return err == nil && json.Unmarshal(raw, &agentView) == nil && len(agentView.Messages) == 1
		})
		if len(agentView.Messages[0].Bcc) != 0 {
			t.Errorf("the agent sees Bcc: %v", agentView.Messages[0].Bcc)
		}

		// An uncertain send: the resolve form for managers, a note for
		// everyone else; a forged resolve by others is refused.
		m.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "send_message"}, Status: 503, Code: "service_unavailable"})
		ukey := testkit.NewUUID()
		m.board.JSON("POST", "/api/companies/"+m.cid+"/email/send", map[string]any{"endpointId": m.eid, "parentIssueId": task,
			"to": []string{"client@example.com"}, "subject": "Uncertain one", "text": "Did it go?", "idempotencyKey": ukey}, 202)
		utask := m.task(t, "Uncertain one")
		testkit.Eventually(t, 30*time.Second, "the send to become uncertain", func() bool {
			return m.board.JSON("GET", "/api/companies/"+m.cid+"/email/deliveries/"+ukey, nil, 200)["outcome"] == "uncertain"
		})
		upath := c + "/tasks/" + utask
		// While Paperclip retries with the same key the send says so and
		// offers nothing to resolve.
		ap := m.admin.get(upath).body
		intent := between(ap, `<article class="email-intent"`, `</article>`)
		if !strings.Contains(intent, "Retrying · attempt ") || strings.Contains(intent, "/resolve") || strings.Contains(intent, "Delivery uncertain") {
			t.Errorf("a retrying send: %s", intent)
		}
		// Retries stop (the confirmation window passes): now it is uncertain.
		testkit.ExpireSend(t, m.inst, ukey)
		ap = m.admin.get(upath).body
		intent = between(ap, `<article class="email-intent"`, `</article>`)
		for _, want := range []string{`data-publication-id="` + ukey + `"`, "Delivery uncertain", "Resolve delivery after checking AgentMail",
			`id="resolve-` + ukey + `-message-id"`, `id="resolve-` + ukey + `-sent"`, `id="resolve-` + ukey + `-failed"`,
			"I checked AgentMail: this email was not sent.", "Automatic retries stopped: the confirmation window has expired.", "Requested by admin@example.com"} {
			if !strings.Contains(intent, want) {
				t.Errorf("manager's intent card lacks %q", want)
			}
		}
		for name, who := range map[string]*env{"viewer": m.viewer, "member": m.member} {
			p := who.get(upath)
			if p.status != 200 || strings.Contains(p.body, "/resolve") || !strings.Contains(p.body, "A connection manager can resolve this delivery after checking AgentMail.") {
				t.Errorf("%s sees a resolve form or no note: %d", name, p.status)
			}
			forged := who.post(upath, upath+"/deliveries/"+ukey+"/resolve", url.Values{"outcome": {"failed"}, "checked": {"on"}})
			if forged.status != http.StatusForbidden {
				t.Errorf("%s's resolve: status %d", name, forged.status)
			}
		}
		// Another task's URL cannot resolve this send.
		if p := m.admin.post(upath, c+"/tasks/"+task+"/deliveries/"+ukey+"/resolve", url.Values{"outcome": {"failed"}, "checked": {"on"}}); p.status != http.StatusNotFound {
			t.Errorf("resolve through another task: %d", p.status)
		}
		// Not sent without the confirmation box: refused, shown next to the
		// form, and the region stops polling so the message stays.
		p := m.admin.post(upath, upath+"/deliveries/"+ukey+"/resolve", url.Values{"outcome": {"failed"}})
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, "to confirm that the email was not sent.") ||
			strings.Contains(p.body, `data-poll="`+upath+`?fragment=task-timeline"`) || !strings.Contains(between(p.body, `<details class="resolve"`, ">"), "open") {
			t.Errorf("resolve without confirmation: %d", p.status)
		}
		// Sent with a message that is not this send's.
		p = m.admin.post(upath, upath+"/deliveries/"+ukey+"/resolve", url.Values{"outcome": {"sent"}, "providerMessageId": {"not-a-real-id"}})
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, "The message does not match this send intent") ||
			!strings.Contains(p.body, `value="not-a-real-id"`) {
			t.Errorf("resolve with a wrong id: %d", p.status)
		}
		// The worker keeps retrying meanwhile (and holds the thread while it
		// does): a busy answer is retried.
		testkit.Eventually(t, 30*time.Second, "resolve not sent", func() bool {
			p = m.admin.post(upath, upath+"/deliveries/"+ukey+"/resolve", url.Values{"outcome": {"failed"}, "checked": {"on"}})
			return p.status != http.StatusConflict
		})
		if p.status != http.StatusSeeOther {
			t.Fatalf("resolve not sent: %d %s", p.status, p.body)
		}
		m.em.ClearFaults()
		after := m.admin.get(upath).body
		if !strings.Contains(after, "Delivery marked not sent. Ask the agent to send again if it is still needed.") ||
			!strings.Contains(after, "Operator confirmed that this email was not sent. A new explicit send is required.") ||
			!strings.Contains(after, `data-outcome="failed"`) || strings.Contains(after, "/resolve") {
			t.Errorf("after resolving: %s", between(after, `<div id="task-timeline"`, `</ol>`))
		}

		// Email turned off: the task says its history is hidden.
		m.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": false}}, 200)
		off := m.admin.get(c + "/tasks/" + task)
		if off.status != 200 || !strings.Contains(off.body, "Email connections are turned off; this task’s email history is hidden until an instance administrator turns them on.") ||
			strings.Contains(off.body, `class="email-card`) {
			t.Errorf("email task with email turned off: %d", off.status)
		}
	})
}

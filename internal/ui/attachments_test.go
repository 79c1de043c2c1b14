package ui_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// upload attaches a file to a task through the API as the board key.
func upload(t *testing.T, base, key, task, name, ctype, data string) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="` + name + `"`}, "Content-Type": {ctype}}
	part, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(part, data)
	mw.Close()
	req, _ := http.NewRequest("POST", base+"/api/issues/"+task+"/attachments", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %v", res.StatusCode, err)
	}
	return out.ID
}

// Attachments download at /c/{cid}/attachments/{aid}: only within their
// own company, only for people who may read the company, always as a
// sandboxed, unsniffed download; the old task-scoped URL redirects there.
func TestAttachmentDownloads(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, admin, cidA := startAuth(t, dbURL)
		cidB := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Other Co"}, 201))
		task := testkit.ID(e.api.JSON("POST", "/api/companies/"+cidA+"/issues", map[string]any{"title": "With a file"}, 201))
		body := "<html><script>alert(1)</script></html>"
		aid := upload(t, e.base, admin, task, "page.html", "text/html", body)
		dl := "/c/" + cidA + "/attachments/" + aid

		// An instance administrator sees both companies: the download works
		// under its own company and is not found under the other one.
		if p := e.login(admin); p.status != http.StatusSeeOther {
			t.Fatalf("admin login: %d", p.status)
		}
		tp := e.get("/c/" + cidA + "/tasks/" + task)
		if !strings.Contains(tp.body, `<a href="`+dl+`" download>page.html</a>`) {
			t.Errorf("the task page does not link the attachment at %s", dl)
		}
		p := e.get(dl)
		if p.status != http.StatusOK || p.body != body {
			t.Fatalf("download: %d %q", p.status, p.body)
		}
		for k, want := range map[string]string{"Content-Security-Policy": "sandbox; default-src 'none'", "X-Content-Type-Options": "nosniff",
			"Content-Disposition": `attachment; filename=page.html`} {
			if got := p.header.Get(k); got != want {
				t.Errorf("download header %s = %q, want %q", k, got, want)
			}
		}
		for _, path := range []string{"/c/" + cidB + "/attachments/" + aid, "/c/" + cidA + "/attachments/" + testkit.NewUUID(),
			"/c/" + cidA + "/attachments/not-a-uuid", "/c/" + testkit.NewUUID() + "/attachments/" + aid} {
			if p := e.get(path); p.status != http.StatusNotFound || p.body == body {
				t.Errorf("GET %s: %d, want 404", path, p.status)
			}
		}
		// The task-scoped URL of earlier versions redirects.
		old := e.get("/c/" + cidA + "/tasks/" + task + "/attachments/" + aid)
		if old.status != http.StatusMovedPermanently || old.header.Get("Location") != dl {
			t.Errorf("old URL: %d %s", old.status, old.header.Get("Location"))
		}

		// A viewer of the company may download; a member of another
		// company may not, under either company's URL.
		viewer, _ := e.boardUser("viewer@example.com", cidA, "viewer", false)
		e.http.Jar, _ = cookiejar.New(nil)
		e.login(viewer)
		if p := e.get(dl); p.status != http.StatusOK || p.body != body {
			t.Errorf("viewer download: %d", p.status)
		}
		outsider, _ := e.boardUser("outsider@example.com", cidB, "member", false)
		e.http.Jar, _ = cookiejar.New(nil)
		e.login(outsider)
		for _, path := range []string{dl, "/c/" + cidB + "/attachments/" + aid} {
			if p := e.get(path); p.status != http.StatusNotFound || p.body == body {
				t.Errorf("outsider GET %s: %d, want 404", path, p.status)
			}
		}
	})
}

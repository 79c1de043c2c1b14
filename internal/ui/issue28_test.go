package ui_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// multipartPost posts fields as multipart/form-data, as an HTML form with
// enctype="multipart/form-data" on another site would.
func (e *env) multipartPost(path string, fields map[string]string) page {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	req, err := http.NewRequest("POST", e.base+path, &buf)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: b.String()}
}

// Issue 28 item 3: a multipart body without a form token no longer slips
// past the CSRF check. Only the attachment upload route takes multipart
// (and checks the token inside it); every other UI POST refuses it.
func TestMultipartPostNeedsFormToken(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Acme")
		before := len(e.api.List("/api/companies"))
		if p := e.multipartPost("/companies", map[string]string{"name": "pwned"}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart company create: %d", p.status)
		}
		if p := e.multipartPost("/c/"+f.company+"/tasks", map[string]string{"title": "pwned task"}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart task create: %d", p.status)
		}
		// Even with a valid token, multipart is only for uploads.
		tok := e.csrf("/")
		if p := e.multipartPost("/companies", map[string]string{"name": "pwned", "csrf": tok}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart company create with token: %d", p.status)
		}
		if n := len(e.api.List("/api/companies")); n != before {
			t.Fatalf("companies: %d, want %d", n, before)
		}
		for _, is := range e.api.List("/api/companies/" + f.company + "/issues") {
			if strings.Contains(is["title"].(string), "pwned") {
				t.Fatalf("a task was created by a multipart post without a token: %v", is)
			}
		}
		// The upload route still refuses a multipart body without the token.
		if p := e.multipartPost("/c/"+f.company+"/tasks/"+f.task+"/attachments", map[string]string{"x": "y"}); p.status != http.StatusForbidden {
			t.Errorf("upload without token: %d", p.status)
		}
	})
}

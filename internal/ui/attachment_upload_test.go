package ui_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// A file uploaded on the task page is stored (in the database) and
// downloads back through the UI byte for byte, as an attachment in a
// sandboxed, never sniffed document; an oversized one is refused with the
// limit named.
func TestTaskAttachmentUploadDownload(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := startLocal(t, url)
		f := e.seed("Files")
		taskPage := "/c/" + f.company + "/tasks/" + f.task
		upload := func(data []byte) page {
			t.Helper()
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			_ = mw.WriteField("csrf", e.csrf(taskPage))
			pw, _ := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="notes.txt"`},
				"Content-Type": {"text/plain"}})
			pw.Write(data)
			mw.Close()
			req, _ := http.NewRequest("POST", e.base+taskPage+"/attachments", &buf)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			res, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var out bytes.Buffer
			out.ReadFrom(res.Body)
			return page{status: res.StatusCode, header: res.Header, body: out.String()}
		}
		data := bytes.Repeat([]byte("line of notes\n"), 30000)
		if p := upload(data); p.status != http.StatusSeeOther {
			t.Fatalf("upload: %d %s", p.status, p.body)
		}
		m := regexp.MustCompile(`href="(/c/` + f.company + `/attachments/[0-9a-f-]{36})"`).FindStringSubmatch(e.get(taskPage).body)
		if m == nil {
			t.Fatal("no download link on the task page")
		}
		p := e.get(m[1])
		if p.status != 200 || p.body != string(data) {
			t.Fatalf("download: %d, %d bytes", p.status, len(p.body))
		}
		if !strings.HasPrefix(p.header.Get("Content-Disposition"), "attachment") || p.header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(p.header.Get("Content-Security-Policy"), "sandbox") {
			t.Fatalf("download headers: %v", p.header)
		}
		if p := upload(bytes.Repeat([]byte("x"), 10<<20+1)); p.status != http.StatusRequestEntityTooLarge || !strings.Contains(p.body, "This file is larger than the 10.0 MB limit.") {
			t.Fatalf("oversized upload: %d %s", p.status, p.body)
		}
	})
}

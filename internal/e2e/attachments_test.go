package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"mime/multipart"
	"path/filepath"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// uploadTo uploads data as a task attachment through the replica at base.
func uploadTo(t *testing.T, base, issueID, name, contentType string, data []byte) domain.Attachment {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="` + name + `"`},
		"Content-Type": {contentType}})
	pw.Write(data)
	mw.Close()
	return testkit.Must(testkit.NewClient(t, base).API().UploadAttachment(context.Background(),
		issueID, mw.FormDataContentType(), &buf))(t, "upload through "+base)
}

// Attachments work across replicas without shared storage (PostgreSQL):
// replica A takes in an inbound email's attachment (retained by its
// inbound worker) and an upload; A stops; replica B, on its own home,
// serves both downloads with their safe headers and executes a reply that
// attaches both, and the provider receives the bytes.
func TestAttachmentsAcrossReplicas(t *testing.T) {
	url := dbtest.PostgresURL(t)
	f := newFleet(t, url, 2)
	// Only A runs while the inbox is set up (so A holds its socket), the
	// mail comes in and the file is uploaded.
	f.kill(1)
	w := fleetSeed(f, 1)
	a := f.client(0)
	emailed, uploaded := make([]byte, 300<<10), make([]byte, 70<<10)
	_, _ = rand.Read(emailed)
	_, _ = rand.Read(uploaded)
	if _, err := f.em.Deliver(w.addresses[0], emulator.DeliverRequest{From: "Customer <customer@example.com>", Subject: "Contract",
		Text: "The signed contract is attached.", Attachments: []emulator.DeliverAttachment{
			{Filename: "contract.pdf", ContentType: "application/pdf", ContentBase64: base64.StdEncoding.EncodeToString(emailed)}}}); err != nil {
		t.Fatal(err)
	}
	var issueID string
	var atts []map[string]any
	testkit.Eventually(t, 30*time.Second, "replica A to retain the email with its attachment", func() bool {
		for _, is := range a.List("/api/companies/" + w.companyID + "/issues?originKind=chat_channel") {
			if is["title"] == "Contract" {
				issueID = is["id"].(string)
			}
		}
		if issueID == "" {
			return false
		}
		atts = a.List("/api/issues/" + issueID + "/attachments")
		return len(atts) == 1
	})
	fromMail := testkit.ID(atts[0])
	fromUpload := uploadTo(t, a.Base, issueID, "notes.zip", "application/zip", uploaded).ID
	th := a.JSON("GET", "/api/companies/"+w.companyID+"/email/tasks/"+issueID, nil, 200)
	conversationID := th["conversationId"].(string)
	replyTo := th["messages"].([]any)[0].(map[string]any)["providerMessageId"].(string)
	f.kill(0)
	// No attachment bytes were ever written under A's home.
	_ = filepath.WalkDir(filepath.Join(f.homes[0], "instance", "attachments"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("a file in replica A's home: %s", p)
		}
		return nil
	})

	f.start(1)
	b := f.client(1)
	for id, want := range map[string][]byte{fromMail: emailed, fromUpload: uploaded} {
		st, body, h := b.DoHeader("GET", "/api/attachments/"+id+"/content", nil)
		if st != 200 || !bytes.Equal(body, want) {
			t.Fatalf("download %s from replica B: %d, %d bytes (want %d)", id, st, len(body), len(want))
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox" ||
			h.Get("Content-Disposition") == "" || h.Get("Content-Disposition")[:10] != "attachment" {
			t.Fatalf("download headers: %v", h)
		}
	}
	key := testkit.NewUUID()
	b.JSON("POST", "/api/companies/"+w.companyID+"/email/send", map[string]any{"endpointId": w.endpoints[0],
		"conversationId": conversationID, "replyToMessageId": replyTo, "text": "Both files, back to you.",
		"attachmentIds": []string{fromMail, fromUpload}, "idempotencyKey": key}, 202)
	var sent emulator.OutboxMessage
	testkit.Eventually(t, 30*time.Second, "replica B to send the reply", func() bool {
		for _, m := range f.em.Outbox("", "") {
			if m.IdempotencyKey == key {
				sent = m
				return true
			}
		}
		return false
	})
	got := map[string][]byte{}
	for _, att := range sent.Attachments {
		raw, err := base64.StdEncoding.DecodeString(att.ContentBase64)
		if err != nil {
			t.Fatal(err)
		}
		got[att.Filename] = raw
	}
	if len(got) != 2 || !bytes.Equal(got["contract.pdf"], emailed) || !bytes.Equal(got["notes.zip"], uploaded) {
		t.Fatalf("the provider received %d attachments: %v", len(sent.Attachments), func() map[string]int {
			m := map[string]int{}
			for k, v := range got {
				m[k] = len(v)
			}
			return m
		}())
	}
}

package inbound_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestControlCharactersInInboundMail: provider-supplied mail carrying NUL
// (which PostgreSQL text and jsonb refuse) and other control characters in
// its subject, bodies, addresses, headers and attachment names becomes one
// task and one wake on both databases, with the text retained sanitised:
// NUL removed, other controls replaced, tabs and line breaks of bodies
// kept; no delivery goes to retry.
func TestControlCharactersInInboundMail(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "ctl", nil)
		e.waitSocket()
		res := e.deliver(emulator.DeliverRequest{
			Subject: "Invoice\x00 42\x07 due\r\nnow",
			Text:    "Line\x00 one\x1b[31m\tred\nline two\r\n\x7fend\u0085",
			HTML:    "<p>Hi\x00 there\x01</p>",
			Cc:      []string{"c\x00c@example.com"},
			ReplyTo: []string{"reply\x0b@example.com"},
			Headers: map[string]string{"X-Odd\x00": "v\x00al\x02ue"},
			Attachments: []emulator.DeliverAttachment{{Filename: "no\x00te\x01.txt", ContentType: "text/plain\x00",
				ContentBase64: base64.StdEncoding.EncodeToString([]byte("attached"))}},
		})
		ds := e.settled(1)
		testkit.MustEqual(t, "delivery state", ds[0].State, domain.DeliveryProcessed)
		if n, _ := e.Store.CountDeliveriesInState(context.Background(), e.Store.DB, e.EpID, domain.DeliveryRetry); n != 0 || ds[0].Attempts > 1 {
			t.Fatalf("retries: %d, attempts %d", n, ds[0].Attempts)
		}
		tasks := e.tasks()
		if len(tasks) != 1 {
			t.Fatalf("tasks: %d", len(tasks))
		}
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
		testkit.MustEqual(t, "title", tasks[0].Title, "Invoice 42\uFFFD due  now")
		msgs := e.messages(tasks[0].ID)
		if len(msgs) != 1 {
			t.Fatalf("messages: %d", len(msgs))
		}
		m := msgs[0]
		testkit.MustEqual(t, "retained text", m.Text, "Line one\uFFFD[31m\tred\nline two\n\uFFFDend\uFFFD")
		testkit.MustEqual(t, "subject", m.Envelope.Subject, "Invoice 42\uFFFD due  now")
		testkit.MustEqual(t, "cc", m.Envelope.Cc[0], "cc@example.com")
		testkit.MustEqual(t, "reply-to", m.Envelope.ReplyTo[0], "reply\uFFFD@example.com")
		clean := func(what, s string) {
			t.Helper()
			for _, r := range s {
				if r == 0 || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || (r >= 0x7f && r <= 0x9f) {
					t.Fatalf("%s keeps control U+%04X: %q", what, r, s)
				}
			}
		}
		clean("full text", m.FullText)
		clean("headers", string(m.Headers))
		if !strings.Contains(string(m.Headers), "X-Odd") {
			t.Fatalf("headers: %s", m.Headers)
		}
		for _, c := range e.comments(tasks[0].ID) {
			clean("comment", c.Body)
		}
		atts, err := e.Store.ListAttachments(context.Background(), e.Store.DB, tasks[0].ID)
		if err != nil || len(atts) != 1 {
			t.Fatalf("attachments: %v %v", atts, err)
		}
		clean("attachment name", atts[0].Filename)
		clean("attachment type", atts[0].ContentType)

		// An event naming the same message with NUL in its event id and
		// labels is admitted (as the duplicate it is) without an error.
		body := []byte(`{"type":"message_received","event_id":"evt\u0000x","message":{"inbox_id":"` + e.Address +
			`","message_id":"` + res.MessageID + `","thread_id":"` + res.ThreadID + `","labels":["received\u0000","\u0007"]}}`)
		if _, err := e.Inbound.AdmitRaw(context.Background(), e.endpoint(), body, queue.SourceWebhook); err != nil {
			t.Fatalf("admit an event with control characters: %v", err)
		}
		testkit.MustEqual(t, "tasks after the duplicate", len(e.tasks()), 1)
	})
}

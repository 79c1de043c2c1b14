package inbound_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// WebSocket half: a message received over
// the live socket becomes one delivery, one task assigned to the inbox's
// agent with no creator, and one wake; the same message arriving again
// through the webhook-shaped path changes nothing; a second thread with the
// same subject is a second task; nothing is sent.
func TestWebSocketMessageCreatesOneTaskAndOneWake(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "inbox", nil)
		e.waitSocket()
		first := e.deliver(emulator.DeliverRequest{Subject: "Quarterly numbers", Text: "Can you send the figures?",
			Cc: []string{"cc@example.com"}})
		ds := e.settled(1)
		testkit.MustEqual(t, "delivery source", ds[0].Source, queue.SourceWebSocket)
		testkit.MustEqual(t, "dedup key", ds[0].DeduplicationKey, "message.received:"+first.MessageID)
		tasks := e.tasks()
		if len(tasks) != 1 {
			t.Fatalf("tasks: %d", len(tasks))
		}
		task := tasks[0]
		testkit.MustEqual(t, "title", task.Title, "Quarterly numbers")
		testkit.MustEqual(t, "assignee", task.AssigneeAgentID, e.AgentID)
		testkit.MustEqual(t, "createdByUserId", task.CreatedByUserID, "")
		testkit.MustEqual(t, "status", task.Status, domain.IssueTodo)
		wakes := e.wakes()
		if len(wakes) != 1 {
			t.Fatalf("wakes: %d", len(wakes))
		}
		w := wakes[0]
		testkit.MustEqual(t, "wake key", w.IdempotencyKey, "email:"+ds[0].ID)
		testkit.MustEqual(t, "wake issue", w.IssueID, task.ID)
		if w.IssueStateGuard == nil || !w.IssueStateGuard.RequireAssignment ||
			!slices.Equal(w.IssueStateGuard.Statuses, []string{"todo", "in_progress", "blocked", "in_review"}) {
			t.Fatalf("guard: %+v", w.IssueStateGuard)
		}
		var snap map[string]any
		_ = json.Unmarshal(w.ContextSnapshot, &snap)
		if snap["emailEndpointId"] != e.EpID || !strings.Contains(snap["emailInstructions"].(string), "external correspondence") {
			t.Fatalf("context snapshot: %v", snap)
		}
		if ds[0].AdmissionToWakeMs == nil {
			t.Fatal("admissionToWakeMs not recorded")
		}
		msgs := e.messages(task.ID)
		if len(msgs) != 1 || msgs[0].Envelope.Cc[0] != "cc@example.com" || msgs[0].Direction != "inbound" || msgs[0].Text != "Can you send the figures?" {
			t.Fatalf("retained: %+v", msgs)
		}

		// The same message through the webhook-shaped envelope: deduplicated.
		body := []byte(`{"type":"message_received","event_id":"evt_other","message":{"inbox_id":"` + e.Address +
			`","message_id":"` + first.MessageID + `","thread_id":"` + first.ThreadID + `"}}`)
		ok, err := e.Inbound.AdmitRaw(context.Background(), e.endpoint(), body, queue.SourceWebhook)
		if err != nil || ok {
			t.Fatalf("duplicate admission: admitted=%v err=%v", ok, err)
		}

		// A different thread with the same subject is a different task.
		e.deliver(emulator.DeliverRequest{Subject: "Quarterly numbers", Text: "Unrelated sender, same subject", From: "bob@example.com"})
		e.settled(2)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 2)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 2)
		testkit.MustEqual(t, "outbox", len(e.Em.Outbox("", "")), 0)
		if n, _ := e.Store.CountDeliveriesInState(context.Background(), e.Store.DB, e.EpID, domain.DeliveryRetry); n != 0 {
			t.Fatalf("retries: %d", n)
		}
		testkit.Eventually(t, wait, "health Connected after catch-up", func() bool {
			ep := e.endpoint()
			return ep.LastSyncAt != nil && ep.HealthMessage == "Connected"
		})
	})
}

package inbound_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound"
)

// Field lesson 20 (reopen rate limiter): replies may reopen a done task at
// most DefaultTiming.ReopenLimit times within DefaultTiming.ReopenWindow.
// Beyond that a reply is still retained, the task stays done, nobody is
// woken, and one system comment (not one per reply) says why.
func TestReopenRateIsCappedPerTask(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "reopens", nil)
		e.waitSocket()
		last := e.deliver(emulator.DeliverRequest{Subject: "Ping pong", Text: "Start"})
		e.settled(1)
		task := e.tasks()[0]
		limit := inbound.DefaultTiming.ReopenLimit
		delivered := 1
		reply := func(text string) {
			t.Helper()
			e.setStatus(task.ID, domain.IssueDone)
			last = e.deliver(emulator.DeliverRequest{Subject: "Re: Ping pong", Text: text, InReplyTo: last.MessageID})
			delivered++
			e.settled(delivered)
		}
		for i := range limit {
			reply("Reply within the limit")
			got, _ := e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
			mustEqual(t, "reopened status", got.Status, domain.IssueTodo)
			mustEqual(t, "wakes", len(e.wakes()), 2+i)
		}

		for range 2 {
			reply("One reply too many")
			got, _ := e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
			mustEqual(t, "status beyond the limit", got.Status, domain.IssueDone)
			mustEqual(t, "wakes beyond the limit", len(e.wakes()), 1+limit)
			mustEqual(t, "delivery beyond the limit", e.delivery(last.MessageID).State, domain.DeliveryProcessed)
		}
		mustEqual(t, "every reply retained", len(e.messages(task.ID)), delivered)
		notes := 0
		for _, c := range e.comments(task.ID) {
			if c.AuthorKind == "system" && strings.Contains(c.Body, "reopened by email replies") {
				notes++
			}
		}
		mustEqual(t, "limiter comments", notes, 1)
		mustEqual(t, "tasks", len(e.tasks()), 1)
	})
}

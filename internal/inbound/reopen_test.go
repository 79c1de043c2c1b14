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
	"github.com/paperclipai/paperclipai/internal/testkit"
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
			testkit.MustEqual(t, "reopened status", got.Status, domain.IssueTodo)
			testkit.MustEqual(t, "wakes", len(e.wakes()), 2+i)
		}

		for range 2 {
			reply("One reply too many")
			got, _ := e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
			testkit.MustEqual(t, "status beyond the limit", got.Status, domain.IssueDone)
			testkit.MustEqual(t, "wakes beyond the limit", len(e.wakes()), 1+limit)
			testkit.MustEqual(t, "delivery beyond the limit", e.delivery(last.MessageID).State, domain.DeliveryProcessed)
		}
		testkit.MustEqual(t, "every reply retained", len(e.messages(task.ID)), delivered)
		notes := 0
		for _, c := range e.comments(task.ID) {
			if c.AuthorKind == "system" && strings.Contains(c.Body, "reopened by email replies") {
				notes++
			}
		}
		testkit.MustEqual(t, "limiter comments", notes, 1)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
	})
}

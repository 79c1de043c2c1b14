package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The catch-up scan reads every page of the listing (the emulator's page
// is two messages here) and starts five minutes before its checkpoint:
// mail whose provider receipt time lies up to five minutes before the last
// scan (accepted earlier, visible later) is still caught up; mail older
// than the overlap is not re-read.
func TestCatchupPagesAndOverlap(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("pager", nil)
		ctx := context.Background()
		// Activation half an hour ago, so only the overlap bounds the scan.
		if _, err := e.DB.ExecContext(ctx, `UPDATE email_endpoints SET activation_at = $2 WHERE id = $1`,
			e.ep, time.Now().UTC().Add(-30*time.Minute)); err != nil {
			t.Fatal(err)
		}
		e.Control(t, e.ep, "pause")
		ep, err := e.Store.GetEndpoint(ctx, e.Store.DB, e.ep)
		if err != nil || ep.SyncCheckpoint == nil {
			t.Fatalf("checkpoint: %v %v", ep.SyncCheckpoint, err)
		}
		checkpoint := *ep.SyncCheckpoint

		e.Em.SetMaxPageSize(2)
		var subjects []string
		for i := range 5 {
			subjects = append(subjects, fmt.Sprintf("Backlog %d", i+1))
			e.deliver(emulator.DeliverRequest{Subject: subjects[i], Text: "while paused"})
		}
		// Receipt times before the checkpoint: 3 minutes (inside the
		// overlap) and 8 minutes (outside it).
		e.Em.SetClockOffset(checkpoint.Add(-3 * time.Minute).Sub(time.Now()))
		inside := e.deliver(emulator.DeliverRequest{Subject: "Late inside", Text: "accepted 3 minutes before the scan"})
		e.Em.SetClockOffset(checkpoint.Add(-8 * time.Minute).Sub(time.Now()))
		outside := e.deliver(emulator.DeliverRequest{Subject: "Late outside", Text: "accepted 8 minutes before the scan"})
		e.Em.SetClockOffset(0)
		subjects = append(subjects, "Late inside")

		time.Sleep(time.Second)
		testkit.MustEqual(t, "tasks while paused", len(e.Board.List("/api/companies/"+e.CompanyID+"/issues?originKind=chat_channel")), 0)

		pagesBefore := e.pagedListings()
		e.Control(t, e.ep, "resume")
		for _, s := range subjects {
			task := e.task(s)
			testkit.Eventually(t, wait, "the wake of "+s, func() bool { return len(e.wakes(task)) == 1 })
		}
		testkit.Eventually(t, wait, "the resumed inbox's scan", func() bool { return e.inbox()["lastSyncAt"] != nil })
		e.settled()
		d, ok := e.deliveryOf(inside.MessageID)
		if !ok || d.Source != "catchup" {
			t.Fatalf("late message inside the overlap: %+v %v", d, ok)
		}
		if _, ok := e.deliveryOf(outside.MessageID); ok || len(e.tasksTitled("Late outside")) != 0 {
			t.Fatal("a message older than the overlap was re-read")
		}
		if n := e.pagedListings() - pagesBefore; n < 3 {
			t.Fatalf("the scan read %d follow-up pages, want at least 3 for 7 messages in pages of 2", n)
		}
	})
}

// pagedListings counts the inbox's message listings that asked for a
// follow-up page.
func (e *env) pagedListings() int {
	n := 0
	for _, r := range e.Em.Requests("/v0/inboxes/" + e.addr + "/messages") {
		if r.Method == "GET" && strings.Contains(r.Query, "page_token=") {
			n++
		}
	}
	return n
}

package receive_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/receive"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The committer contract: oneByOne (the specification) and grouped (the
// optimisation) receive the same batches with the same outcome. Every case
// runs against both, on both databases.

const wait = 30 * time.Second

// contractEnv is a server with one WebSocket inbox, subscribed and caught up.
type contractEnv struct {
	*testkit.EmailEnv
	t       *testing.T
	epID    string
	address string
}

func newContractEnv(t *testing.T, url string) *contractEnv {
	t.Helper()
	e := &contractEnv{EmailEnv: testkit.NewEmailEnv(t, url), t: t}
	sum := e.Setup("contract", nil)
	e.epID, _ = sum["id"].(string)
	e.address, _ = sum["address"].(string)
	if e.epID == "" || e.address == "" {
		t.Fatalf("setup summary: %v", sum)
	}
	testkit.Eventually(t, wait, "a subscribed and caught-up WebSocket", func() bool {
		return e.Inbound.SocketCaughtUp(e.epID) && e.Em.WebSocketCount() == 1
	})
	return e
}

// settled waits until n deliveries exist and none is waiting.
func (e *contractEnv) settled(n int) []store.EmailDelivery {
	e.t.Helper()
	var ds []store.EmailDelivery
	testkit.Eventually(e.t, wait, fmt.Sprintf("%d settled deliveries", n), func() bool {
		ds = e.Deliveries(e.t, e.epID)
		return len(ds) == n && testkit.Settled(ds)
	})
	return ds
}

// wakes are the agent's email runs.
func (e *contractEnv) wakes() []domain.Run {
	e.t.Helper()
	rs, err := e.Store.ListRuns(context.Background(), e.Store.DB, e.CompanyID, e.AgentID, "", 500)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []domain.Run
	for _, r := range rs {
		if r.WakeReason == "email_received" {
			out = append(out, r)
		}
	}
	return out
}

func (e *contractEnv) tasks() []domain.Issue {
	e.t.Helper()
	is, err := e.Store.ListIssues(context.Background(), e.Store.DB, e.CompanyID, store.IssueFilter{OriginKind: "chat_channel"})
	if err != nil {
		e.t.Fatal(err)
	}
	return is
}

// eachCommitter runs fn once per committer, on both databases.
func eachCommitter(t *testing.T, fn func(t *testing.T, e *contractEnv)) {
	for _, c := range []struct {
		name     string
		oneByOne bool
	}{{"grouped", false}, {"oneByOne", true}} {
		t.Run(c.name, func(t *testing.T) {
			receive.UseOneByOne(c.oneByOne)
			t.Cleanup(func() { receive.UseOneByOne(false) })
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				fn(t, newContractEnv(t, url))
			})
		})
	}
}

// Independent threads each get one task and one wake per message, and a
// reply joins its thread's task, retained after the first message.
func TestCommitterThreadsAndReplies(t *testing.T) {
	eachCommitter(t, func(t *testing.T, e *contractEnv) {
		const n = 4
		var first []emulator.DeliverResult
		for i := range n {
			first = append(first, e.Deliver(t, e.address, emulator.DeliverRequest{
				From: fmt.Sprintf("sender%d@example.com", i), Subject: fmt.Sprintf("Thread %d", i), Text: "first"}))
		}
		e.settled(n)
		testkit.MustEqual(t, "tasks", len(e.tasks()), n)
		testkit.MustEqual(t, "wakes", len(e.wakes()), n)
		for i, f := range first {
			e.Deliver(t, e.address, emulator.DeliverRequest{From: fmt.Sprintf("sender%d@example.com", i),
				Subject: fmt.Sprintf("Re: Thread %d", i), Text: "second", InReplyTo: f.MessageID})
		}
		ds := e.settled(2 * n)
		for _, d := range ds {
			if d.State != domain.DeliveryProcessed || d.Attempts != 0 {
				t.Fatalf("delivery %s: %s after %d attempts, want processed at once", d.ID, d.State, d.Attempts)
			}
		}
		tasks := e.tasks()
		testkit.MustEqual(t, "tasks after the replies", len(tasks), n)
		for _, is := range tasks {
			c, err := e.Store.ConversationByIssue(context.Background(), e.Store.DB, is.ID)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := e.Store.ListEmailMessages(context.Background(), e.Store.DB, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			testkit.MustEqual(t, "messages of task "+is.Title, len(ms), 2)
		}
		keys := map[string]bool{}
		for _, r := range e.wakes() {
			if keys[r.IdempotencyKey] {
				t.Fatalf("two runs for wake %s", r.IdempotencyKey)
			}
			keys[r.IdempotencyKey] = true
		}
	})
}

// A receiving transaction that fails is the failure of its own delivery
// only: that delivery retries (at most once per injected failure) and
// ends processed, every other delivery is processed at its first attempt.
func TestCommitterFailureStaysWithItsDelivery(t *testing.T) {
	eachCommitter(t, func(t *testing.T, e *contractEnv) {
		var mu sync.Mutex
		var victim string
		calls := map[string]int{}
		failures := 0
		receive.SetReceiveFault(func(_ *sql.Tx, id string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[id]++
			if victim == "" && len(calls) == 2 {
				victim = id
			}
			if id == victim && calls[id] <= 2 {
				failures++
				return errors.New("injected receiving failure")
			}
			return nil
		})
		t.Cleanup(func() { receive.SetReceiveFault(nil) })
		const n = 5
		for i := range n {
			e.Deliver(t, e.address, emulator.DeliverRequest{From: fmt.Sprintf("sender%d@example.com", i), Subject: fmt.Sprintf("Thread %d", i)})
		}
		ds := e.settled(n)
		testkit.MustEqual(t, "tasks", len(e.tasks()), n)
		testkit.MustEqual(t, "wakes", len(e.wakes()), n)
		mu.Lock()
		defer mu.Unlock()
		for _, d := range ds {
			if d.State != domain.DeliveryProcessed {
				t.Fatalf("delivery %s: %s, want processed", d.ID, d.State)
			}
			if d.ID == victim {
				if d.Attempts < 1 || d.Attempts > failures {
					t.Fatalf("the failed delivery: %d attempts after %d failures", d.Attempts, failures)
				}
			} else if d.Attempts != 0 {
				t.Fatalf("delivery %s: %d attempts, want 0 (only the failed one retries)", d.ID, d.Attempts)
			}
		}
	})
}

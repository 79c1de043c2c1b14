package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// TestStore exercises, method by method, the SQL whose meaning could differ
// between the dialects (ON CONFLICT on several keys, conditional updates,
// RETURNING, leases and their fences, time round trips), once per database
// (the shape of River's riverdrivertest.Exercise). Each subtest gets a fresh
// company with an agent and an active inbox.
func TestStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		type bundle struct {
			ctx     context.Context
			company domain.Company
			agent   domain.Agent
			ep      domain.EmailEndpoint
			// advance moves the store's clock (expiry and ordering by time
			// are tested without sleeping).
			advance func(time.Duration)
		}
		var st *store.Store
		setup := func(t *testing.T) *bundle {
			t.Helper()
			ctx := context.Background()
			st = store.New(d)
			offset := time.Duration(0)
			st.SetClock(func() time.Time { return time.Now().Add(offset) })
			c, err := st.CreateCompany(ctx, d, "Suite", "")
			if err != nil {
				t.Fatal(err)
			}
			a := domain.Agent{CompanyID: c.ID, Name: "mailer", AdapterType: "process"}
			if err := st.CreateAgent(ctx, d, &a); err != nil {
				t.Fatal(err)
			}
			ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: c.ID, AssignedAgentID: a.ID, Status: domain.EndpointActive,
				ReceiveMode: domain.ReceiveWebSocket, DisplayName: "mailer"}
			if _, err := st.InsertEndpoint(ctx, d, &ep); err != nil {
				t.Fatal(err)
			}
			return &bundle{ctx: ctx, company: c, agent: a, ep: ep, advance: func(by time.Duration) { offset += by }}
		}
		delivery := func(b *bundle, eventID, key, thread string) *store.EmailDelivery {
			return &store.EmailDelivery{CompanyID: b.company.ID, EndpointID: b.ep.ID, ProviderEventID: eventID,
				DeduplicationKey: key, EventKind: "message", Source: "websocket", ProviderThreadID: thread, NormalizedEvent: []byte(`{}`)}
		}
		issue := func(t *testing.T, b *bundle, status string) domain.Issue {
			t.Helper()
			i := domain.Issue{CompanyID: b.company.ID, Title: "task", Status: status, Priority: "medium"}
			if _, err := st.CreateIssue(b.ctx, d, &i); err != nil {
				t.Fatal(err)
			}
			return i
		}

		// Which of a set of keys an endpoint already holds: one query per
		// 200 keys, other endpoints' rows never count.
		t.Run("ExistingDeduplicationKeys", func(t *testing.T) {
			b := setup(t)
			other := setup(t)
			var keys []string
			for i := range 450 {
				keys = append(keys, fmt.Sprintf("message.received:m%d", i))
			}
			for _, i := range []int{0, 199, 200, 449} {
				if _, err := st.InsertDelivery(b.ctx, d, delivery(b, fmt.Sprintf("ev%d", i), keys[i], "t1")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.InsertDelivery(b.ctx, d, delivery(other, "ev5", keys[5], "t1")); err != nil {
				t.Fatal(err)
			}
			got, err := st.ExistingDeduplicationKeys(b.ctx, d, b.ep.ID, append(keys, keys[0]))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{keys[0]: true, keys[199]: true, keys[200]: true, keys[449]: true}
			if len(got) != len(want) {
				t.Fatalf("existing keys: %v, want %v", got, want)
			}
			for k := range want {
				if !got[k] {
					t.Fatalf("existing keys: %v, want %v", got, want)
				}
			}
			if got, err := st.ExistingDeduplicationKeys(b.ctx, d, b.ep.ID, nil); err != nil || len(got) != 0 {
				t.Fatalf("no keys: %v %v", got, err)
			}
		})

		t.Run("InsertDelivery", func(t *testing.T) {
			t.Run("DeduplicatesByProviderEventID", func(t *testing.T) {
				b := setup(t)
				if ok, err := st.InsertDelivery(b.ctx, d, delivery(b, "ev1", "message.received:m1", "t1")); err != nil || !ok {
					t.Fatalf("first: %v %v", ok, err)
				}
				if ok, err := st.InsertDelivery(b.ctx, d, delivery(b, "ev1", "message.received:m2", "t1")); err != nil || ok {
					t.Fatalf("same event id: inserted=%v err=%v", ok, err)
				}
			})
			t.Run("DeduplicatesByKindAndMessageID", func(t *testing.T) {
				b := setup(t)
				if ok, err := st.InsertDelivery(b.ctx, d, delivery(b, "ev1", "message.received:m1", "t1")); err != nil || !ok {
					t.Fatalf("first: %v %v", ok, err)
				}
				if ok, err := st.InsertDelivery(b.ctx, d, delivery(b, "ev2", "message.received:m1", "t1")); err != nil || ok {
					t.Fatalf("same message from another transport: inserted=%v err=%v", ok, err)
				}
				ds, err := st.ListDeliveries(b.ctx, d, b.ep.ID)
				if err != nil || len(ds) != 1 || ds[0].State != domain.DeliveryReceived {
					t.Fatalf("deliveries: %+v %v", ds, err)
				}
			})
		})

		t.Run("DueDeliveries", func(t *testing.T) {
			t.Run("HoldsBackAThreadBehindARetry", func(t *testing.T) {
				b := setup(t)
				first, second, other := delivery(b, "e1", "k:1", "t1"), delivery(b, "e2", "k:2", "t1"), delivery(b, "e3", "k:3", "t2")
				for _, x := range []*store.EmailDelivery{first, second, other} {
					if _, err := st.InsertDelivery(b.ctx, d, x); err != nil {
						t.Fatal(err)
					}
				}
				later := st.Now().Add(time.Hour)
				first.State, first.NextAttemptAt, first.Attempts = domain.DeliveryRetry, &later, 1
				if err := st.UpdateDelivery(b.ctx, d, first); err != nil {
					t.Fatal(err)
				}
				due, err := st.DueDeliveries(b.ctx, d, b.ep.ID, st.Now(), 10)
				if err != nil || len(due) != 1 || due[0].ID != other.ID {
					t.Fatalf("due: %+v %v; want only the other thread", due, err)
				}
				next, err := st.NextDeliveryAttempt(b.ctx, d, b.ep.ID, st.Now())
				if err != nil || next == nil || !next.Before(later) {
					t.Fatalf("next attempt %v %v: the other thread is due now", next, err)
				}
				other.State = domain.DeliveryProcessed
				if err := st.UpdateDelivery(b.ctx, d, other); err != nil {
					t.Fatal(err)
				}
				if next, err := st.NextDeliveryAttempt(b.ctx, d, b.ep.ID, st.Now()); err != nil || next == nil || !next.Equal(later) {
					t.Fatalf("next attempt %v %v, want the retry at %v", next, err, later)
				}
				due, err = st.DueDeliveries(b.ctx, d, b.ep.ID, later, 10)
				if err != nil || len(due) != 2 || due[0].ID != first.ID || due[1].ID != second.ID {
					t.Fatalf("due at the retry time: %+v %v; want the thread in admission order", due, err)
				}
			})
		})

		t.Run("Lease", func(t *testing.T) {
			t.Run("SecondHolderWaitsUntilExpiry", func(t *testing.T) {
				b := setup(t)
				l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.LeaseKeySocket, "one", time.Minute)
				if err != nil || l == nil {
					t.Fatalf("first holder: %v %v", l, err)
				}
				other, until, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.LeaseKeySocket, "two", time.Minute)
				if err != nil || other != nil || until.Before(st.Now().Add(50*time.Second)) {
					t.Fatalf("second holder: %v until %v, %v", other, until, err)
				}
				if err := l.Release(b.ctx); err != nil {
					t.Fatal(err)
				}
				if other, _, err = st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.LeaseKeySocket, "two", time.Minute); err != nil || other == nil {
					t.Fatalf("after release: %v %v", other, err)
				}
			})
			// A release that fails (here: its transaction is gone; in
			// production: the database is unreachable) is retried in the
			// background, so the key is free again long before the TTL.
			t.Run("FailedReleaseIsRetried", func(t *testing.T) {
				b := setup(t)
				tx, err := d.BeginTx(b.ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				l, _, err := st.TryLease(b.ctx, tx, b.company.ID, b.ep.ID, store.ThreadLeaseKey("t0"), "one", time.Hour)
				if err != nil || l == nil {
					t.Fatalf("take: %v %v", l, err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := l.Release(b.ctx); err == nil {
					t.Fatal("release on a finished transaction succeeded")
				}
				deadline := time.Now().Add(30 * time.Second)
				for {
					other, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.ThreadLeaseKey("t0"), "two", time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					if other != nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the lease whose release failed was never given back")
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
			t.Run("FenceFailsAfterExpiry", func(t *testing.T) {
				b := setup(t)
				dl, dl2 := delivery(b, "ev1", "message.received:m1", "t1"), delivery(b, "ev2", "message.received:m2", "t1")
				for _, x := range []*store.EmailDelivery{dl, dl2} {
					if _, err := st.InsertDelivery(b.ctx, d, x); err != nil {
						t.Fatal(err)
					}
				}
				l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.ThreadLeaseKey("t1"), "one", time.Minute)
				if err != nil || l == nil {
					t.Fatalf("take: %v %v", l, err)
				}
				fence := func(lockKey string) error {
					return st.Tx(b.ctx, func(tx *sql.Tx) error {
						switch lockKey {
						case "":
							return l.Fence(b.ctx, tx)
						case "endpoint":
							// The fence with the inbox row (one statement
							// on PostgreSQL) gives the same answers.
							ep, err := l.FenceLockedEndpoint(b.ctx, tx, "email:lock")
							if err == nil && ep.ID != b.ep.ID {
								t.Fatalf("fenced inbox: %+v, want %s", ep, b.ep.ID)
							}
							return err
						case "delivery", "missing delivery":
							// The fence with the inbox and the delivery
							// row: the same answers, and the delivery
							// (missing: ErrNotFound once the fence holds).
							id := dl.ID
							if lockKey == "missing delivery" {
								id = store.NewID()
							}
							ep, got, err := l.FenceLockedEndpointDelivery(b.ctx, tx, "email:lock", id)
							if err == nil && (ep.ID != b.ep.ID || got.ID != dl.ID || got.DeduplicationKey != dl.DeduplicationKey ||
								got.ProviderThreadID != "t1") {
								t.Fatalf("fenced inbox and delivery: %+v %+v, want %s %+v", ep, got, b.ep.ID, dl)
							}
							return err
						case "deliveries", "deliveries with a missing one":
							// The fence with the inbox and several
							// delivery rows: the same answers, the
							// deliveries in the order asked for.
							ids := []string{dl2.ID, dl.ID}
							if lockKey != "deliveries" {
								ids = append(ids, store.NewID())
							}
							ep, got, err := l.FenceLockedEndpointDeliveries(b.ctx, tx, "email:lock", ids)
							if err == nil && (ep.ID != b.ep.ID || len(got) != 2 || got[0].ID != dl2.ID || got[1].ID != dl.ID ||
								got[0].DeduplicationKey != dl2.DeduplicationKey) {
								t.Fatalf("fenced inbox and deliveries: %+v %+v, want %s [%s %s]", ep, got, b.ep.ID, dl2.ID, dl.ID)
							}
							return err
						}
						return l.FenceLocked(b.ctx, tx, lockKey)
					})
				}
				if err := fence(""); err != nil {
					t.Fatalf("fence while held: %v", err)
				}
				if err := fence("email:lock"); err != nil {
					t.Fatalf("locked fence while held: %v", err)
				}
				if err := fence("endpoint"); err != nil {
					t.Fatalf("fence with the inbox while held: %v", err)
				}
				if err := fence("delivery"); err != nil {
					t.Fatalf("fence with the inbox and delivery while held: %v", err)
				}
				if err := fence("missing delivery"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("fence with a missing delivery: %v, want ErrNotFound", err)
				}
				if err := fence("deliveries"); err != nil {
					t.Fatalf("fence with the inbox and deliveries while held: %v", err)
				}
				if err := fence("deliveries with a missing one"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("fence with a missing one of several deliveries: %v, want ErrNotFound", err)
				}
				b.advance(2 * time.Minute) // past the TTL renewed by the fences
				if err := fence(""); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("fence after expiry: %v, want ErrLeaseLost", err)
				}
				if ok, err := l.Renew(b.ctx); err != nil || ok {
					t.Fatalf("renew after expiry: %v %v", ok, err)
				}
				succ, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.ThreadLeaseKey("t1"), "two", time.Minute)
				if err != nil || succ == nil {
					t.Fatalf("successor: %v %v", succ, err)
				}
				if err := fence("email:lock"); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("locked fence of the lost lease: %v", err)
				}
				if err := fence("endpoint"); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("fence with the inbox of the lost lease: %v", err)
				}
				if err := fence("delivery"); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("fence with the inbox and delivery of the lost lease: %v", err)
				}
				if err := fence("deliveries"); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("fence with the inbox and deliveries of the lost lease: %v", err)
				}
				// The old holder's release must not free the successor's lease.
				if err := l.Release(b.ctx); err != nil {
					t.Fatal(err)
				}
				if held, err := st.ThreadLeaseHeld(b.ctx, d, b.ep.ID); err != nil || !held {
					t.Fatalf("successor's lease after the old holder's release: %v %v", held, err)
				}
			})
			t.Run("SetTakesOnlyFreeKeys", func(t *testing.T) {
				b := setup(t)
				busy, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.ThreadLeaseKey("busy"), "other", time.Minute)
				if err != nil || busy == nil {
					t.Fatal(err)
				}
				keys := []string{store.ThreadLeaseKey("a"), store.ThreadLeaseKey("busy"), store.ThreadLeaseKey("b"), store.ThreadLeaseKey("a")}
				set, err := st.TryLeases(b.ctx, d, b.company.ID, b.ep.ID, keys, "me", time.Minute)
				if err != nil || set.Len() != 2 || set.Get(keys[0]) == nil || set.Get(keys[1]) != nil || set.Get(keys[2]) == nil {
					t.Fatalf("set: %v %v", set, err)
				}
				if err := st.Tx(b.ctx, func(tx *sql.Tx) error { return set.Get(keys[2]).Fence(b.ctx, tx) }); err != nil {
					t.Fatalf("fence a lease of the set: %v", err)
				}
				if err := set.Release(b.ctx); err != nil {
					t.Fatal(err)
				}
				if again, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, keys[0], "x", time.Minute); err != nil || again == nil {
					t.Fatalf("after the set's release: %v %v", again, err)
				}
				if again, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, keys[1], "x", time.Minute); err != nil || again != nil {
					t.Fatalf("the other holder's lease survives the set's release: %v %v", again, err)
				}
			})
			t.Run("DeleteReceivingLeasesKeepsWork", func(t *testing.T) {
				b := setup(t)
				for _, k := range []string{store.LeaseKeySocket, store.LeaseKeyCatchup, store.ThreadLeaseKey("t"), store.LeaseKeyWork} {
					if l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, k, "dead", time.Hour); err != nil || l == nil {
						t.Fatalf("take %s: %v", k, err)
					}
				}
				if err := st.DeleteReceivingLeases(b.ctx, d); err != nil {
					t.Fatal(err)
				}
				for k, free := range map[string]bool{store.LeaseKeySocket: true, store.LeaseKeyCatchup: true, store.ThreadLeaseKey("t"): true, store.LeaseKeyWork: false} {
					l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, k, "new", time.Minute)
					if err != nil || (l != nil) != free {
						t.Errorf("%s after cleanup: taken=%v err=%v, want free=%v", k, l != nil, err, free)
					}
				}
			})
			// The holder's batch renewal extends its socket and thread leases,
			// and on PostgreSQL it does not wait for a thread lease that an
			// open transaction's fence holds locked (the fence renews that
			// one itself): waiting would queue new fences behind the renewal
			// and deadlock with a transaction fencing two threads.
			t.Run("RenewalSkipsAFencedThread", func(t *testing.T) {
				b := setup(t)
				take := func(key string) *store.Lease {
					l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, key, "me", time.Minute)
					if err != nil || l == nil {
						t.Fatalf("take %s: %v %v", key, l, err)
					}
					return l
				}
				sock, fenced, free := take(store.LeaseKeySocket), take(store.ThreadLeaseKey("fenced")), take(store.ThreadLeaseKey("free"))
				expiry := func(l *store.Lease) time.Time { return leaseTime(t, b.ctx, d, b.ep.ID, l.Key, "expires_at") }
				b.advance(30 * time.Second)
				var tx *sql.Tx
				if d.Dialect == db.Postgres {
					var err error
					if tx, err = d.BeginTx(b.ctx, nil); err != nil {
						t.Fatal(err)
					}
					defer func() { _ = tx.Rollback() }()
					if err := fenced.FenceLocked(b.ctx, tx, "email:lock"); err != nil {
						t.Fatal(err)
					}
				}
				// A renewal that waited for the open fence would wait until
				// this deadline and fail the test.
				rctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
				defer cancel()
				got, err := st.RenewHolderLeases(rctx, d, "me", time.Minute, time.Minute, time.Second, false)
				if err != nil {
					t.Fatalf("renew beside an open fence: %v", err)
				}
				if !got.Sockets[sock.Token] {
					t.Fatalf("socket lease not renewed: %+v", got)
				}
				want := st.Now().Add(50 * time.Second)
				if at := expiry(free); at.Before(want) {
					t.Fatalf("free thread lease expires at %v, want after %v", at, want)
				}
				if tx != nil {
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
				if at := expiry(fenced); at.Before(want) {
					t.Fatalf("fenced thread lease expires at %v, want after %v (renewed by its fence)", at, want)
				}
			})
			// The batch renewal extends thread leases by their own, shorter
			// TTL: a socket lease may be long (so that one late renewal is not
			// a lost socket) while a dead replica still blocks a thread only
			// for the thread TTL.
			t.Run("RenewalGivesThreadsTheirOwnTTL", func(t *testing.T) {
				b := setup(t)
				take := func(key string, ttl time.Duration) *store.Lease {
					l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, key, "me", ttl)
					if err != nil || l == nil {
						t.Fatalf("take %s: %v %v", key, l, err)
					}
					return l
				}
				sock, thread := take(store.LeaseKeySocket, 10*time.Second), take(store.ThreadLeaseKey("t"), 3*time.Second)
				b.advance(2 * time.Second)
				if _, err := st.RenewHolderLeases(b.ctx, d, "me", 10*time.Second, 3*time.Second, time.Second, false); err != nil {
					t.Fatal(err)
				}
				now := st.Now()
				for _, c := range []struct {
					l    *store.Lease
					want time.Time
				}{{sock, now.Add(10 * time.Second)}, {thread, now.Add(3 * time.Second)}} {
					at := leaseTime(t, b.ctx, d, b.ep.ID, c.l.Key, "expires_at")
					if diff := at.Sub(c.want); diff > time.Millisecond || diff < -time.Millisecond {
						t.Errorf("%s expires at %v after the renewal, want %v", c.l.Key, at, c.want)
					}
				}
			})
			// A thread lease taken or fenced within the last half renewal
			// period is left alone by the batch renewal: on PostgreSQL the
			// renewal would hold it locked for as long as it takes to renew
			// every socket lease, and a new email's fence came right after
			// the take (docs/benchmarks.md, the tail beside 10,000 inboxes).
			// A period later it is renewed.
			t.Run("RenewalLeavesAFreshThreadLease", func(t *testing.T) {
				b := setup(t)
				l, _, err := st.TryLease(b.ctx, d, b.company.ID, b.ep.ID, store.ThreadLeaseKey("fresh"), "me", time.Minute)
				if err != nil || l == nil {
					t.Fatalf("take: %v %v", l, err)
				}
				written := func() time.Time { return leaseTime(t, b.ctx, d, b.ep.ID, l.Key, "updated_at") }
				taken := written()
				b.advance(400 * time.Millisecond)
				if _, err := st.RenewHolderLeases(b.ctx, d, "me", time.Minute, time.Minute, time.Second, false); err != nil {
					t.Fatal(err)
				}
				if at := written(); !at.Equal(taken) {
					t.Fatalf("a thread lease taken 400 ms ago was rewritten by the renewal (updated %v, taken %v)", at, taken)
				}
				b.advance(time.Second)
				if _, err := st.RenewHolderLeases(b.ctx, d, "me", time.Minute, time.Minute, time.Second, false); err != nil {
					t.Fatal(err)
				}
				if at := written(); !at.After(taken) {
					t.Fatalf("a thread lease taken 1.4 s ago was not renewed (updated %v)", at)
				}
			})
		})

		t.Run("Conversation", func(t *testing.T) {
			t.Run("OnePerThread", func(t *testing.T) {
				b := setup(t)
				i1, i2 := issue(t, b, domain.IssueTodo), issue(t, b, domain.IssueTodo)
				c1 := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i1.ID, ExternalThreadID: "t1", ExternalConversationID: "x"}
				if created, err := st.InsertConversation(b.ctx, d, &c1); err != nil || !created {
					t.Fatalf("first: %v %v", created, err)
				}
				c2 := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i2.ID, ExternalThreadID: "t1", ExternalConversationID: "x"}
				if created, err := st.InsertConversation(b.ctx, d, &c2); err != nil || created || c2.ID != c1.ID || c2.IssueID != i1.ID {
					t.Fatalf("second for the thread: created=%v %+v %v", created, c2, err)
				}
				conv, status, err := st.ConversationByThreadWithStatus(b.ctx, d, b.ep.ID, "t1")
				if err != nil || conv.ID != c1.ID || status != domain.IssueTodo {
					t.Fatalf("by thread: %+v %q %v", conv, status, err)
				}
				if _, _, err := st.ConversationByThreadWithStatus(b.ctx, d, b.ep.ID, "nope"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("unknown thread: %v", err)
				}
			})
		})

		// A new email conversation's task, audit entry and conversation:
		// all three when new; a taken key gives the existing task and no
		// entry; a thread with a conversation keeps it (one statement on
		// PostgreSQL, three on SQLite, the same rows).
		t.Run("CreateConversationTask", func(t *testing.T) {
			b := setup(t)
			audit := func(i domain.Issue) (*domain.Activity, error) {
				return store.AuditEntry(domain.SystemActor("suite", b.agent.ID), b.company.ID, "issue.created", "issue", i.ID, nil)
			}
			entries := func(issueID string) int {
				t.Helper()
				n, err := st.CountIssueActivity(b.ctx, d, b.company.ID, issueID, "suite", "issue.created", time.Now().Add(-time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			create := func(key, thread string) (domain.Issue, domain.EmailConversation, bool, bool) {
				t.Helper()
				i := domain.Issue{CompanyID: b.company.ID, Title: "mail", AssigneeAgentID: b.agent.ID, IdempotencyKey: key, OriginKind: "chat_channel"}
				c := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, ExternalConversationID: "x", ExternalThreadID: thread, Subject: "s"}
				ic, cc, err := st.CreateConversationTask(b.ctx, d, &i, audit, &c)
				if err != nil {
					t.Fatal(err)
				}
				return i, c, ic, cc
			}
			i1, c1, ic, cc := create("k1", "t1")
			if !ic || !cc || c1.IssueID != i1.ID || i1.Status != domain.IssueTodo || i1.Number != 0 || entries(i1.ID) != 1 {
				t.Fatalf("new: %v %v %+v %+v entries %d", ic, cc, i1, c1, entries(i1.ID))
			}
			if conv, status, err := st.ConversationByThreadWithStatus(b.ctx, d, b.ep.ID, "t1"); err != nil || conv.ID != c1.ID || conv.IssueID != i1.ID ||
				status != domain.IssueTodo || conv.Subject != "s" || conv.State != "active" {
				t.Fatalf("stored: %+v %q %v", conv, status, err)
			}
			// The key taken: the existing task, no second entry; the
			// thread's conversation as it is.
			i2, c2, ic, cc := create("k1", "t1")
			if ic || cc || i2.ID != i1.ID || c2.ID != c1.ID || entries(i1.ID) != 1 {
				t.Fatalf("repeat: %v %v %+v %+v", ic, cc, i2, c2)
			}
			// A new task for a thread that has a conversation: the task and
			// its entry are written, the conversation stays the old one.
			i3, c3, ic, cc := create("k3", "t1")
			if !ic || cc || i3.ID == i1.ID || c3.ID != c1.ID || c3.IssueID != i1.ID || entries(i3.ID) != 1 {
				t.Fatalf("thread taken: %v %v %+v %+v", ic, cc, i3, c3)
			}
			// The key taken, the thread new: the existing task gets the
			// conversation.
			i4, c4, ic, cc := create("k3", "t4")
			if ic || !cc || i4.ID != i3.ID || c4.IssueID != i3.ID || entries(i3.ID) != 1 {
				t.Fatalf("key taken, new thread: %v %v %+v %+v", ic, cc, i4, c4)
			}
		})

		// The receiving transaction's reads in one call: the same facts
		// from the one PostgreSQL statement as from SQLite's three.
		t.Run("ReadThreadFacts", func(t *testing.T) {
			b := setup(t)
			f, err := st.ReadThreadFacts(b.ctx, d, b.ep.ID, b.company.ID, "t1", "m1", true, []string{"m1", "m2"})
			if err != nil || f.Known || f.Published || len(f.Retained) != 0 {
				t.Fatalf("empty thread: %+v %v", f, err)
			}
			i := issue(t, b, domain.IssueBacklog)
			conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID, ExternalThreadID: "t1",
				ExternalConversationID: "x", Subject: "Hello"}
			if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
				t.Fatal(err)
			}
			msg := domain.EmailMessage{CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID, ProviderMessageID: "m1",
				ProviderThreadID: "t1", Direction: "inbound", Timestamp: time.Now()}
			if _, err := st.InsertEmailMessage(b.ctx, d, &msg); err != nil {
				t.Fatal(err)
			}
			pub := store.EmailPublication{ID: store.NewID(), CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID,
				IssueID: i.ID, Request: []byte(`{}`), Actor: []byte(`{}`), Digest: "d"}
			if err := st.InsertPublication(b.ctx, d, &pub); err != nil {
				t.Fatal(err)
			}
			if err := st.MarkPublished(b.ctx, d, pub.ID, "m2", "t1"); err != nil {
				t.Fatal(err)
			}
			f, err = st.ReadThreadFacts(b.ctx, d, b.ep.ID, b.company.ID, "t1", "m2", true, []string{"m1", "m2", "it's \"odd\", {x}"})
			if err != nil || !f.Known || f.Conversation.ID != conv.ID || f.Conversation.IssueID != i.ID || f.Conversation.Subject != "Hello" ||
				f.Status != domain.IssueBacklog || !f.Published || len(f.Retained) != 1 || !f.Retained["m1"] {
				t.Fatalf("known thread: %+v %v", f, err)
			}
			if f, err := st.ReadThreadFacts(b.ctx, d, b.ep.ID, b.company.ID, "t1", "m2", false, nil); err != nil || f.Published || len(f.Retained) != 0 {
				t.Fatalf("without the publication check: %+v %v", f, err)
			}
			if f, err := st.ReadThreadFacts(b.ctx, d, b.ep.ID, b.company.ID, "t1", "m3", true, nil); err != nil || f.Published {
				t.Fatalf("a message no send produced: %+v %v", f, err)
			}
			// Another company's send of the same provider id is not ours.
			other := setup(t)
			if f, err := st.ReadThreadFacts(b.ctx, d, other.ep.ID, other.company.ID, "t1", "m2", true, []string{"m1"}); err != nil ||
				f.Known || f.Published || len(f.Retained) != 0 {
				t.Fatalf("another company's inbox: %+v %v", f, err)
			}
		})

		t.Run("MessageLink", func(t *testing.T) {
			t.Run("ClaimedByOneDelivery", func(t *testing.T) {
				b := setup(t)
				i := issue(t, b, domain.IssueTodo)
				conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID, ExternalThreadID: "t1", ExternalConversationID: "x"}
				if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
					t.Fatal(err)
				}
				d1, d2 := delivery(b, "e1", "k:1", "t1"), delivery(b, "e2", "k:2", "t1")
				for _, x := range []*store.EmailDelivery{d1, d2} {
					if _, err := st.InsertDelivery(b.ctx, d, x); err != nil {
						t.Fatal(err)
					}
				}
				link := store.EmailMessageLink{CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID,
					ProviderMessageID: "m1", Direction: "inbound"}
				if ok, err := st.InsertMessageLink(b.ctx, d, &link); err != nil || !ok {
					t.Fatalf("link: %v %v", ok, err)
				}
				dup := link
				if ok, err := st.InsertMessageLink(b.ctx, d, &dup); err != nil || ok {
					t.Fatalf("duplicate link: %v %v", ok, err)
				}
				if _, claimed, err := st.ClaimMessageLinkFor(b.ctx, d, b.ep.ID, conv.ID, "m1", d1.ID); err != nil || !claimed {
					t.Fatalf("first claim: %v %v", claimed, err)
				}
				if _, claimed, err := st.ClaimMessageLinkFor(b.ctx, d, b.ep.ID, conv.ID, "m1", d1.ID); err != nil || !claimed {
					t.Fatalf("the holder's claim again: %v %v", claimed, err)
				}
				if _, claimed, err := st.ClaimMessageLinkFor(b.ctx, d, b.ep.ID, conv.ID, "m1", d2.ID); err != nil || claimed {
					t.Fatalf("another delivery's claim: %v %v", claimed, err)
				}
				if _, claimed, err := st.ClaimMessageLinkFor(b.ctx, d, b.ep.ID, conv.ID, "missing", d2.ID); err != nil || claimed {
					t.Fatalf("missing link: %v %v", claimed, err)
				}
			})
		})

		t.Run("ReopenDoneIssue", func(t *testing.T) {
			t.Run("OnlyFromDone", func(t *testing.T) {
				b := setup(t)
				done, todo := issue(t, b, domain.IssueDone), issue(t, b, domain.IssueInProgress)
				if ok, err := st.ReopenDoneIssue(b.ctx, d, done.ID); err != nil || !ok {
					t.Fatalf("reopen done: %v %v", ok, err)
				}
				if s, err := st.IssueStatus(b.ctx, d, done.ID); err != nil || s != domain.IssueTodo {
					t.Fatalf("status after reopen: %q %v", s, err)
				}
				if ok, err := st.ReopenDoneIssue(b.ctx, d, todo.ID); err != nil || ok {
					t.Fatalf("reopen a task that is not done: %v %v", ok, err)
				}
			})
		})

		t.Run("Activity", func(t *testing.T) {
			t.Run("CountsAndEpisodes", func(t *testing.T) {
				b := setup(t)
				i := issue(t, b, domain.IssueTodo)
				since := st.Now().Add(-time.Minute)
				add := func(action string) {
					t.Helper()
					b.advance(time.Millisecond) // distinct created_at, the order the queries rely on
					if err := st.InsertActivity(b.ctx, d, &domain.Activity{CompanyID: b.company.ID, ActorKind: "system", ActorID: "agentmail",
						Action: action, EntityType: "issue", EntityID: i.ID, Details: []byte(`{}`)}); err != nil {
						t.Fatal(err)
					}
				}
				add("issue.reopened")
				add("issue.reopened")
				if n, err := st.CountIssueActivity(b.ctx, d, b.company.ID, i.ID, "agentmail", "issue.reopened", since); err != nil || n != 2 {
					t.Fatalf("count: %d %v", n, err)
				}
				if n, err := st.CountIssueActivity(b.ctx, d, b.company.ID, i.ID, "agentmail", "issue.reopened", st.Now().Add(time.Minute)); err != nil || n != 0 {
					t.Fatalf("count outside the window: %d %v", n, err)
				}
				noted := func() bool {
					t.Helper()
					ok, err := st.IssueActivitySinceLast(b.ctx, d, b.company.ID, i.ID, "agentmail", "issue.reopen_limited", "issue.reopened", since)
					if err != nil {
						t.Fatal(err)
					}
					return ok
				}
				if noted() {
					t.Fatal("no limited entry yet")
				}
				add("issue.reopen_limited")
				if !noted() {
					t.Fatal("limited after the last reopen")
				}
				add("issue.reopened")
				if noted() {
					t.Fatal("a reopen ends the limited episode")
				}
			})
		})

		t.Run("SetSendOutcome", func(t *testing.T) {
			t.Run("NeverDowngradesDelivered", func(t *testing.T) {
				b := setup(t)
				i := issue(t, b, domain.IssueTodo)
				conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID, ExternalThreadID: "pending:x", ExternalConversationID: "x"}
				if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
					t.Fatal(err)
				}
				pub := store.EmailPublication{ID: store.NewID(), CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID,
					IssueID: i.ID, Request: []byte(`{}`), Actor: []byte(`{}`), Digest: "d"}
				if err := st.InsertPublication(b.ctx, d, &pub); err != nil {
					t.Fatal(err)
				}
				if err := st.InsertPublication(b.ctx, d, &pub); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("second intent with the key: %v, want ErrConflict", err)
				}
				steps := []struct {
					outcome domain.SendOutcome
					from    []domain.SendOutcome
					changed bool
				}{
					{domain.OutcomeSent, []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeUncertain}, true},
					{domain.OutcomeDelivered, []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeSent, domain.OutcomeUncertain}, true},
					{domain.OutcomeSent, []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeUncertain}, false}, // a late sent receipt
					{domain.OutcomeUncertain, []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeUncertain}, false},
					{domain.OutcomeFailed, nil, true}, // a bounce after delivery is final
				}
				for _, s := range steps {
					ok, err := st.SetSendOutcome(b.ctx, d, pub.ID, s.outcome, s.from...)
					if err != nil || ok != s.changed {
						t.Fatalf("SetSendOutcome(%s from %v) = %v, %v; want %v", s.outcome, s.from, ok, err, s.changed)
					}
				}
				got, err := st.GetPublication(b.ctx, d, pub.ID)
				if err != nil || got.Outcome != "failed" || got.State != "pending" {
					t.Fatalf("publication: %+v %v", got, err)
				}
			})
		})

		t.Run("SettleDisconnectedSends", func(t *testing.T) {
			// A disconnect fails the never-attempted send and parks the
			// attempted one as uncertain; an attempt racing the settlement
			// waits for it and then refuses to start (no provider call).
			t.Run("NoAttemptStartsAfterward", func(t *testing.T) {
				b := setup(t)
				i := issue(t, b, domain.IssueTodo)
				pubs := make([]store.EmailPublication, 3)
				for k := range pubs {
					conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID,
						ExternalThreadID: "pending:" + store.NewID(), ExternalConversationID: store.NewID()}
					if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
						t.Fatal(err)
					}
					pubs[k] = store.EmailPublication{ID: store.NewID(), CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID,
						IssueID: i.ID, Request: []byte(`{}`), Actor: []byte(`{}`), Digest: "d"}
					if err := st.InsertPublication(b.ctx, d, &pubs[k]); err != nil {
						t.Fatal(err)
					}
				}
				never, attempted, racing := pubs[0].ID, pubs[1].ID, pubs[2].ID
				if err := st.StartAttempt(b.ctx, d, attempted); err != nil {
					t.Fatal(err)
				}
				tx, err := d.BeginTx(b.ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				settled, err := st.SettleDisconnectedSends(b.ctx, tx, b.ep.ID, "never", "in doubt")
				if err != nil || len(settled) != 3 {
					t.Fatalf("settled %v, %v", settled, err)
				}
				started := make(chan error, 1)
				go func() { started <- st.StartAttempt(b.ctx, d, racing) }()
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := <-started; !errors.Is(err, store.ErrSendSettled) {
					t.Fatalf("attempt racing the settlement: %v, want ErrSendSettled", err)
				}
				want := map[string][2]string{never: {"failed", "failed"}, attempted: {"delivery_unknown", "uncertain"},
					racing: {"failed", "failed"}}
				for id, w := range want {
					got, err := st.GetPublication(b.ctx, d, id)
					if err != nil || string(got.State) != w[0] || string(got.Outcome) != w[1] || got.NextAttemptAt != nil {
						t.Fatalf("publication %s: %s/%s %v, want %v", id, got.State, got.Outcome, err, w)
					}
				}
				if again, err := st.SettleDisconnectedSends(b.ctx, d, b.ep.ID, "never", "in doubt"); err != nil || len(again) != 0 {
					t.Fatalf("settling twice: %v %v", again, err)
				}
			})
		})

		t.Run("Suppression", func(t *testing.T) {
			b := setup(t)
			if err := st.Suppress(b.ctx, d, b.company.ID, b.ep.ID, "gone@example.com", "message.bounced"); err != nil {
				t.Fatal(err)
			}
			if err := st.Suppress(b.ctx, d, b.company.ID, b.ep.ID, "gone@example.com", "message.complained"); err != nil {
				t.Fatalf("suppress twice: %v", err)
			}
			got, err := st.SuppressedAmong(b.ctx, d, b.ep.ID, []string{"ok@example.com", "gone@example.com"})
			if err != nil || len(got) != 1 || got[0] != "gone@example.com" {
				t.Fatalf("suppressed: %v %v", got, err)
			}
		})

		t.Run("EndpointRegistration", func(t *testing.T) {
			b := setup(t)
			if err := st.SetEndpointWebhook(b.ctx, d, b.ep.ID, "wh_1"); err != nil {
				t.Fatal(err)
			}
			if err := st.SetEndpointOwnedKey(b.ctx, d, b.ep.ID, "key_1"); err != nil {
				t.Fatal(err)
			}
			if err := st.SetEndpointCredential(b.ctx, d, b.ep.ID, ""); err != nil {
				t.Fatal(err)
			}
			got, err := st.GetEndpoint(b.ctx, d, b.ep.ID)
			if err != nil || got.WebhookID != "wh_1" || got.OwnedAPIKeyID != "key_1" || got.CredentialConnectionID != "" || !got.UpdatedAt.After(b.ep.CreatedAt) && !got.UpdatedAt.Equal(b.ep.CreatedAt) {
				t.Fatalf("endpoint: %+v %v", got, err)
			}
		})
		// A delivery's update that also records conversation activity
		// (one statement on PostgreSQL, two on SQLite): both rows change,
		// "" keeps the conversation's state, no conversation touches none.
		t.Run("UpdateDeliveryTouching", func(t *testing.T) {
			b := setup(t)
			i := issue(t, b, domain.IssueTodo)
			conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID, ExternalThreadID: "t1",
				ExternalConversationID: "x", Subject: "Hello", State: "waiting"}
			if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
				t.Fatal(err)
			}
			before, err := st.GetConversation(b.ctx, d, conv.ID)
			if err != nil {
				t.Fatal(err)
			}
			dl := delivery(b, "ev1", "message.received:m1", "t1")
			if _, err := st.InsertDelivery(b.ctx, d, dl); err != nil {
				t.Fatal(err)
			}
			step := func(state domain.DeliveryState, convID, convState, wantConvState string) {
				t.Helper()
				b.advance(time.Minute)
				dl.State, dl.ConversationID = state, conv.ID
				if err := st.UpdateDeliveryTouching(b.ctx, d, dl, convID, convState); err != nil {
					t.Fatal(err)
				}
				got, err := st.GetDelivery(b.ctx, d, dl.ID, false)
				if err != nil || got.State != state || got.ConversationID != conv.ID {
					t.Fatalf("delivery: %+v %v", got, err)
				}
				c, err := st.GetConversation(b.ctx, d, conv.ID)
				if err != nil || c.State != wantConvState {
					t.Fatalf("conversation state %q, want %q (%v)", c.State, wantConvState, err)
				}
				moved := c.LastActivityAt.After(before.LastActivityAt)
				if moved != (convID != "") {
					t.Fatalf("last activity %v -> %v with convID %q", before.LastActivityAt, c.LastActivityAt, convID)
				}
				before = c
			}
			step(domain.DeliveryProcessing, conv.ID, "", "waiting")
			step(domain.DeliveryProcessed, conv.ID, "active", "active")
			step(domain.DeliveryProcessed, "", "", "active")
		})
		t.Run("EndpointProblemThrottleAndClear", func(t *testing.T) {
			b := setup(t)
			facts := func() store.EndpointHealthFacts {
				t.Helper()
				m, err := st.EndpointHealthFacts(b.ctx, d, []string{b.ep.ID}, "email_endpoint", "credentials.apiKey", "credentials.webhookSecret")
				if err != nil {
					t.Fatal(err)
				}
				return m[b.ep.ID]
			}
			if err := st.RecordEndpointProblem(b.ctx, d, b.ep.ID, "webhook_signature", "bad"); err != nil {
				t.Fatal(err)
			}
			first := facts()
			if first.ProblemCode != "webhook_signature" || first.ProblemMessage != "bad" || first.ProblemAt == nil {
				t.Fatalf("recorded: %+v", first)
			}
			// The same problem again within a minute is not rewritten; after
			// a minute, or with another message, it is.
			b.advance(30 * time.Second)
			_ = st.RecordEndpointProblem(b.ctx, d, b.ep.ID, "webhook_signature", "bad")
			if got := facts(); !got.ProblemAt.Equal(*first.ProblemAt) {
				t.Fatalf("rewritten within the minute: %v then %v", first.ProblemAt, got.ProblemAt)
			}
			b.advance(31 * time.Second)
			_ = st.RecordEndpointProblem(b.ctx, d, b.ep.ID, "webhook_signature", "bad")
			if got := facts(); !got.ProblemAt.After(*first.ProblemAt) {
				t.Fatal("not refreshed after a minute")
			}
			_ = st.RecordEndpointProblem(b.ctx, d, b.ep.ID, "setup_failed", "other")
			if got := facts(); got.ProblemCode != "setup_failed" {
				t.Fatalf("another problem: %+v", got)
			}
			// Clearing another code leaves it; its own code (or any) clears it.
			if err := st.ClearEndpointProblem(b.ctx, d, b.ep.ID, "webhook_signature"); err != nil || facts().ProblemCode != "setup_failed" {
				t.Fatalf("cleared by another code: %v %+v", err, facts())
			}
			if err := st.ClearEndpointProblem(b.ctx, d, b.ep.ID, ""); err != nil || facts().ProblemCode != "" || facts().ProblemAt != nil {
				t.Fatalf("not cleared: %v %+v", err, facts())
			}
		})
		t.Run("KeyCheckHasOneCreator", func(t *testing.T) {
			b := setup(t)
			if _, err := st.GetKeyCheck(b.ctx, d); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("before the first start: %v", err)
			}
			created, err := st.InsertKeyCheck(b.ctx, d, store.KeyCheck{KeyID: "aaaa", Sealed: "one"})
			if err != nil || !created {
				t.Fatalf("first: %v %v", created, err)
			}
			if created, err := st.InsertKeyCheck(b.ctx, d, store.KeyCheck{KeyID: "bbbb", Sealed: "two"}); err != nil || created {
				t.Fatalf("second: %v %v", created, err)
			}
			if k, err := st.GetKeyCheck(b.ctx, d); err != nil || k.KeyID != "aaaa" || k.Sealed != "one" {
				t.Fatalf("stored: %+v %v", k, err)
			}
		})
		t.Run("RunCancel", func(t *testing.T) {
			t.Run("QueuedAtOnceRunningByRequest", func(t *testing.T) {
				b := setup(t)
				queued := domain.Run{CompanyID: b.company.ID, AgentID: b.agent.ID, Status: domain.RunQueued}
				running := domain.Run{CompanyID: b.company.ID, AgentID: b.agent.ID, Status: domain.RunQueued}
				for _, r := range []*domain.Run{&queued, &running} {
					if _, err := st.InsertRun(b.ctx, d, r); err != nil {
						t.Fatal(err)
					}
				}
				if ok, err := st.StartRun(b.ctx, d, running.ID, "r1", "hash-1", time.Now().Add(time.Minute)); err != nil || !ok {
					t.Fatalf("start: %v %v", ok, err)
				}
				if ok, err := st.CancelQueuedRun(b.ctx, d, queued.ID, "run cancelled: x"); err != nil || !ok {
					t.Fatalf("cancel queued: %v %v", ok, err)
				}
				if ok, err := st.CancelQueuedRun(b.ctx, d, running.ID, "no"); err != nil || ok {
					t.Fatalf("cancel queued on a running run: %v %v", ok, err)
				}
				if ok, err := st.RequestRunCancel(b.ctx, d, running.ID, "first"); err != nil || !ok {
					t.Fatalf("request: %v %v", ok, err)
				}
				if ok, err := st.RequestRunCancel(b.ctx, d, running.ID, "second"); err != nil || !ok {
					t.Fatalf("repeated request: %v %v", ok, err)
				}
				if _, err := st.RunByTokenHash(b.ctx, d, "hash-1"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("token after the request: %v", err)
				}
				rs, err := st.CancelRequestedRuns(b.ctx, d, "r1")
				if err != nil || len(rs) != 1 || rs[0].CancelReason != "first" || rs[0].CancelRequestedAt == nil {
					t.Fatalf("cancel-requested runs: %+v %v", rs, err)
				}
				if ok, err := st.FailOrphanedRun(b.ctx, d, running.ID, "runner lost"); err != nil || !ok {
					t.Fatalf("orphan: %v %v", ok, err)
				}
				got, _ := st.GetRun(b.ctx, d, running.ID)
				if got.Status != domain.RunCancelled || got.Error != "first" {
					t.Fatalf("orphaned cancel-requested run: %s %q", got.Status, got.Error)
				}
				if got, _ := st.GetRun(b.ctx, d, queued.ID); got.Status != domain.RunCancelled || got.FinishedAt == nil {
					t.Fatalf("queued run: %+v", got)
				}
			})
			t.Run("HostExecutionApprovalRoundTrips", func(t *testing.T) {
				b := setup(t)
				b.agent.HostExecutionApproved = true
				if err := st.UpdateAgent(b.ctx, d, &b.agent); err != nil {
					t.Fatal(err)
				}
				if got, _ := st.GetAgent(b.ctx, d, b.agent.ID); !got.HostExecutionApproved {
					t.Fatal("approval not stored")
				}
			})
		})

		// The remaining methods with a PostgreSQL statement or lock suffix
		// beside the portable one (docs/architecture.md, "Two databases,
		// one SQL"), each read back on its own database.
		t.Run("SharedRowReads", func(t *testing.T) {
			b := setup(t)
			err := st.Tx(b.ctx, func(tx *sql.Tx) error {
				if a, err := st.AgentShared(b.ctx, tx, b.agent.ID); err != nil || a.ID != b.agent.ID || a.Name != "mailer" {
					t.Errorf("agent: %+v %v", a, err)
				}
				if _, err := st.AgentShared(b.ctx, tx, store.NewID()); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("unknown agent: %v, want ErrNotFound", err)
				}
				if ep, err := st.EndpointShared(b.ctx, tx, b.ep.ID); err != nil || ep.ID != b.ep.ID || ep.AssignedAgentID != b.agent.ID ||
					ep.Status != domain.EndpointActive {
					t.Errorf("inbox: %+v %v", ep, err)
				}
				if _, err := st.EndpointShared(b.ctx, tx, store.NewID()); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("unknown inbox: %v, want ErrNotFound", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		t.Run("TouchEndpointEvent", func(t *testing.T) {
			b := setup(t)
			lastEvent := func() time.Time {
				t.Helper()
				ep, err := st.GetEndpoint(b.ctx, d, b.ep.ID)
				if err != nil || ep.LastEventAt == nil {
					t.Fatalf("last event: %+v %v", ep.LastEventAt, err)
				}
				return *ep.LastEventAt
			}
			if err := st.TouchEndpointEvent(b.ctx, d, b.ep.ID); err != nil {
				t.Fatal(err)
			}
			first := lastEvent()
			// Within a second of the last: left as it is.
			b.advance(500 * time.Millisecond)
			if err := st.TouchEndpointEvent(b.ctx, d, b.ep.ID); err != nil {
				t.Fatal(err)
			}
			if got := lastEvent(); !got.Equal(first) {
				t.Fatalf("touched again within the second: %v, was %v", got, first)
			}
			b.advance(time.Second)
			if err := st.TouchEndpointEvent(b.ctx, d, b.ep.ID); err != nil {
				t.Fatal(err)
			}
			if got := lastEvent(); got.Sub(first) < 1500*time.Millisecond {
				t.Fatalf("after 1.5 s: %v, was %v", got, first)
			}
		})
		t.Run("NumberIssues", func(t *testing.T) {
			b := setup(t)
			numbered := issue(t, b, domain.IssueTodo)
			prefix, ok := strings.CutSuffix(numbered.Identifier, "-1")
			if numbered.Number != 1 || !ok {
				t.Fatalf("first task: %d %q", numbered.Number, numbered.Identifier)
			}
			var ids []string
			for range 3 {
				i := domain.Issue{CompanyID: b.company.ID, Title: "unnumbered"}
				if _, err := st.CreateIssueUnnumbered(b.ctx, d, &i); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, i.ID)
			}
			// Numbered in the order given, not of creation.
			order := []string{ids[2], ids[0], ids[1]}
			if err := st.NumberIssues(b.ctx, d, b.company.ID, order); err != nil {
				t.Fatal(err)
			}
			for k, id := range order {
				got, err := st.GetIssue(b.ctx, d, id)
				want := int64(k + 2)
				if err != nil || int64(got.Number) != want || got.Identifier != fmt.Sprintf("%s-%d", prefix, want) {
					t.Errorf("task %d of the call: %d %q %v, want %d", k, got.Number, got.Identifier, err, want)
				}
			}
			if next := issue(t, b, domain.IssueTodo); next.Number != 5 {
				t.Errorf("the next task: number %d, want 5", next.Number)
			}
		})
		t.Run("RetainEmail", func(t *testing.T) {
			b := setup(t)
			i := issue(t, b, domain.IssueTodo)
			conv := domain.EmailConversation{CompanyID: b.company.ID, EndpointID: b.ep.ID, IssueID: i.ID, ExternalThreadID: "t1", ExternalConversationID: "x"}
			if _, err := st.InsertConversation(b.ctx, d, &conv); err != nil {
				t.Fatal(err)
			}
			retain := func(body string) (domain.Comment, bool, bool) {
				t.Helper()
				c := domain.Comment{CompanyID: b.company.ID, IssueID: i.ID, AuthorKind: "system", Body: body}
				m := domain.EmailMessage{CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID, ProviderMessageID: "m1",
					ProviderThreadID: "t1", Direction: "inbound", Text: body, Timestamp: time.Now()}
				l := store.EmailMessageLink{CompanyID: b.company.ID, EndpointID: b.ep.ID, ConversationID: conv.ID,
					ProviderMessageID: "m1", Direction: "inbound"}
				inserted, linked, err := st.RetainEmail(b.ctx, d, &c, &m, &l)
				if err != nil {
					t.Fatal(err)
				}
				if m.CommentID != c.ID || l.CommentID != c.ID {
					t.Fatalf("message and link point at %q and %q, not the comment %q", m.CommentID, l.CommentID, c.ID)
				}
				return c, inserted, linked
			}
			c1, inserted, linked := retain("first")
			if !inserted || !linked {
				t.Fatalf("first retention: inserted %v linked %v", inserted, linked)
			}
			// The same provider message again: a comment, but neither a
			// second message row nor a second link.
			if _, inserted, linked := retain("again"); inserted || linked {
				t.Fatalf("repeat: inserted %v linked %v", inserted, linked)
			}
			msgs, err := st.ListEmailMessages(b.ctx, d, conv.ID)
			if err != nil || len(msgs) != 1 || msgs[0].CommentID != c1.ID || msgs[0].Text != "first" {
				t.Fatalf("messages: %+v %v", msgs, err)
			}
			comments, err := st.ListComments(b.ctx, d, i.ID)
			if err != nil || len(comments) != 2 || comments[0].ID != c1.ID || comments[0].Body != "first" {
				t.Fatalf("comments: %+v %v", comments, err)
			}
		})
	})
}

// leaseTime reads column (expires_at or updated_at) of the lease row
// (endpointID, key).
func leaseTime(t *testing.T, ctx context.Context, q db.Querier, endpointID, key, column string) time.Time {
	t.Helper()
	var at time.Time
	if err := q.QueryRowContext(ctx, `SELECT `+column+` FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2`,
		endpointID, key).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

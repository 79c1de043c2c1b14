package inbound_test

import (
	"fmt"
	"testing"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Runs and sends, which replicas share through the database, spread over
// three replicas: no replica starves. Nine agents each answer their own
// inbox with the example agent (a run that replies through the CLI);
// after two new threads per inbox, every mail got one reply, runs and
// sends add up, and every replica did work (started runs or executed
// sends). Counted per replica from its own metrics (runs started,
// accepted → sent observations), and logged as the spread report.
//
// Why not "every replica started runs": a wake is recorded by the
// replica whose socket admitted the mail, which starts the run at once
// when the agent is free, but an agent's second run waits for its first
// and is then started by the replica that ran the first (its finish
// signals its own scheduler), so a replica with few sockets may by chance
// start none.
// Sends go through the replica that runs the agent and are executed by
// whichever worker takes the thread lease first.
func TestRunsAndSendsSpreadOverReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const inboxes, threads = 9, 2
	c := newCluster(t, dbtest.PostgresURL(t))
	procs := []*runProc{c.start(""), c.start(""), c.start("")}
	b := testkit.NewClient(t, procs[0].url)
	b.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	companyID := testkit.ID(b.JSON("POST", "/api/companies", map[string]any{"name": "Work Spread Co"}, 201))
	_, key := c.em.CreateOrganization("Work Spread Mail")
	addresses := make([]string, inboxes)
	eightAtATime(inboxes, func(i int) {
		agentID := testkit.ID(b.JSON("POST", "/api/companies/"+companyID+"/agents", map[string]any{"name": fmt.Sprintf("Agent %d", i),
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh",
				"args": []string{"-c", `exec "$0" example-agent autoreply`, testkit.Binary(t)}, "timeoutSec": 60}}, 201))
		sum := b.JSON("POST", "/api/companies/"+companyID+"/email/inboxes", map[string]any{"assignedAgentId": agentID,
			"apiKey": key, "username": fmt.Sprintf("work%02d", i), "idempotencyKey": testkit.NewUUID()}, 201)
		addresses[i] = sum["address"].(string)
	})
	st := c.openDB("")
	pid := map[int]*runProc{}
	for _, p := range procs {
		pid[p.cmd.Process.Pid] = p
	}
	sockets := func() map[*runProc]int {
		per := map[*runProc]int{}
		for _, o := range socketOwnersByLease(t, st) {
			per[pid[o.pid]]++
		}
		return per
	}
	testkit.Eventually(t, wait, "every inbox subscribed, each replica holding sockets", func() bool {
		for _, a := range addresses {
			if c.em.SubscribedCount(a) != 1 {
				return false
			}
		}
		per := sockets()
		return len(socketOwnersByLease(t, st)) == inboxes && per[procs[0]] > 0 && per[procs[1]] > 0 && per[procs[2]] > 0
	})
	held := sockets()
	runs0, sends0 := map[*runProc]float64{}, map[*runProc]float64{}
	for _, p := range procs {
		runs0[p] = scrapeMetric(t, p, "paperclip_heartbeat_runs_started_total")
		sends0[p] = scrapeMetric(t, p, "paperclip_email_send_accepted_to_sent_seconds_count")
	}
	for th := range threads {
		for i, a := range addresses {
			if _, err := c.em.Deliver(a, emulator.DeliverRequest{From: fmt.Sprintf("customer%d-%d@example.com", i, th),
				Subject: fmt.Sprintf("Question %d of inbox %d", th, i), Text: "Please answer."}); err != nil {
				t.Fatal(err)
			}
		}
	}
	testkit.Eventually(t, 2*wait, "every mail answered", func() bool {
		for i := range inboxes {
			for th := range threads {
				if len(c.em.Outbox(fmt.Sprintf("customer%d-%d@example.com", i, th), "")) == 0 {
					return false
				}
			}
		}
		return true
	})
	// A send's metric is observed after the provider's answer, which may
	// come after the emulator's outbox shows the message: wait for the
	// counts to add up (or the bound) before judging them.
	total := float64(inboxes * threads)
	r, s := map[*runProc]float64{}, map[*runProc]float64{}
	var runs, sends float64
	testkit.Eventually(t, wait, "every send counted", func() bool {
		runs, sends = 0, 0
		for _, p := range procs {
			r[p] = scrapeMetric(t, p, "paperclip_heartbeat_runs_started_total") - runs0[p]
			s[p] = scrapeMetric(t, p, "paperclip_email_send_accepted_to_sent_seconds_count") - sends0[p]
			runs, sends = runs+r[p], sends+s[p]
		}
		return runs >= total && sends >= total
	})
	for i, p := range procs {
		r, s := r[p], s[p]
		t.Logf("replica %d (pid %d): %d sockets, %v runs started, %v sends executed", i, p.cmd.Process.Pid, held[p], r, s)
		if r+s == 0 {
			t.Errorf("replica %d holds %d of the sockets but started no run and executed no send: it starves", i, held[p])
		}
	}
	if runs < total || sends != total {
		t.Errorf("%v runs started and %v sends executed for %v mails, want a run each and one send each", runs, sends, total)
	}
	for i := range inboxes {
		for th := range threads {
			if n := len(c.em.Outbox(fmt.Sprintf("customer%d-%d@example.com", i, th), "")); n != 1 {
				t.Errorf("customer %d-%d got %d replies, want 1", i, th, n)
			}
		}
	}
}

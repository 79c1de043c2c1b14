package inbound_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Sockets spread over the replicas: with three replicas and twelve
// inboxes none holds more than its share plus the slack (4 + 1); after a
// kill the two survivors take every socket; after a fresh replica joins,
// sockets move to it until the shares hold again.
func TestSocketsSpreadOverReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const inboxes = 12
	c := newCluster(t, dbtest.PostgresURL(t))
	procs := []*runProc{c.start(""), c.start(""), c.start("")}
	b := testkit.NewClient(t, procs[0].url)
	b.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	companyID := testkit.ID(b.JSON("POST", "/api/companies", map[string]any{"name": "Spread Co"}, 201))
	agentID := testkit.ID(b.JSON("POST", "/api/companies/"+companyID+"/agents", map[string]any{"name": "Mail Agent",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, key := c.em.CreateOrganization("Spread Mail")
	var addresses []string
	for i := range inboxes {
		sum := b.JSON("POST", "/api/companies/"+companyID+"/email/inboxes", map[string]any{"assignedAgentId": agentID,
			"apiKey": key, "username": fmt.Sprintf("spread%02d", i), "idempotencyKey": testkit.NewUUID()}, 201)
		addresses = append(addresses, sum["address"].(string))
	}
	st := c.openDB("")
	// spread reports whether every inbox has one subscribed socket, held
	// by a live replica, with at most max per replica (and, with need, at
	// least one on that replica).
	spread := func(live []*runProc, max int, need *runProc) bool {
		for _, a := range addresses {
			if c.em.SubscribedCount(a) != 1 {
				return false
			}
		}
		per := socketsPerHolder(t, st)
		total := 0
		for _, p := range live {
			n := per[p.cmd.Process.Pid]
			if n > max {
				return false
			}
			total += n
		}
		return total == inboxes && (need == nil || per[need.cmd.Process.Pid] > 0)
	}
	testkit.Eventually(t, wait, "12 sockets over 3 replicas, at most 5 each", func() bool { return spread(procs, 5, nil) })
	procs[0].kill()
	testkit.Eventually(t, wait, "12 sockets over the 2 survivors", func() bool { return spread(procs[1:], 7, nil) })
	fresh := c.start("")
	procs = []*runProc{procs[1], procs[2], fresh}
	testkit.Eventually(t, wait, "sockets moved to the fresh replica", func() bool { return spread(procs, 5, fresh) })
}

// socketsPerHolder counts the live socket leases per holder process id.
func socketsPerHolder(t *testing.T, st *store.Store) map[int]int {
	t.Helper()
	rows, err := st.DB.QueryContext(context.Background(), `SELECT holder FROM email_leases WHERE lease_key = $1 AND expires_at > $2`,
		store.LeaseKeySocket, st.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		var pid int
		if parts := strings.Split(h, ":"); len(parts) >= 3 {
			_, _ = fmt.Sscan(parts[len(parts)-2], &pid)
		}
		out[pid]++
	}
	return out
}

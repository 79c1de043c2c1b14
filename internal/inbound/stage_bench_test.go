package inbound_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
)

// stageProfile reports whether a benchmark should also break each
// delivery's admission → commit down by the worker's stages
// (PAPERCLIP_BENCH_STAGES=1). A diagnosis, not a measurement: the trace
// itself costs a little per stage.
func stageProfile() bool { return os.Getenv("PAPERCLIP_BENCH_STAGES") == "1" }

// stageClock records when each delivery first passed each stage of the
// worker's trace (queue.Trace), and how many scheduling rounds ran.
type stageClock struct {
	mu     sync.Mutex
	at     map[string]map[string]time.Time
	rounds map[string]int
}

// startStages installs the trace; the returned clock's stop removes it.
func startStages() *stageClock {
	c := &stageClock{at: map[string]map[string]time.Time{}, rounds: map[string]int{}}
	inbound.SetStageTrace(func(stage, id string) {
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		if strings.HasPrefix(stage, "round:") {
			c.rounds[stage]++
			return
		}
		m := c.at[id]
		if m == nil {
			m = map[string]time.Time{}
			c.at[id] = m
		}
		if _, ok := m[stage]; !ok {
			m[stage] = now
		}
	})
	return c
}

func (c *stageClock) stop() { inbound.SetStageTrace(nil) }

// log logs, for the deliveries of endpoint epID admitted since since, the
// p50 / p99 / max in ms of each gap between consecutive stages, from the
// admission (received_at) to the commit.
func (c *stageClock) log(b *testing.B, bi *benchInbox, since time.Time) {
	rows, err := bi.ee.DB.QueryContext(context.Background(), `SELECT id, received_at FROM email_deliveries
		WHERE endpoint_id = $1 AND received_at >= $2`, bi.epID, since.UTC())
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	order := []string{"admitted", queue.StagePicked, queue.StagePrepared, queue.StageTxBegin, queue.StageFenced,
		queue.StageWoken, queue.StageCommitted}
	gaps := make([][]float64, len(order))
	c.mu.Lock()
	defer c.mu.Unlock()
	for rows.Next() {
		var id string
		var recv time.Time
		if err := rows.Scan(&id, &recv); err != nil {
			b.Fatal(err)
		}
		m := c.at[id]
		if m == nil {
			continue
		}
		prev := recv
		for i, st := range order[1:] {
			t, ok := m[st]
			if !ok {
				break
			}
			gaps[i+1] = append(gaps[i+1], float64(t.Sub(prev).Microseconds())/1000)
			prev = t
		}
		if t, ok := m[queue.StageCommitted]; ok {
			gaps[0] = append(gaps[0], float64(t.Sub(recv).Microseconds())/1000)
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	q := func(v []float64) string {
		if len(v) == 0 {
			return "-"
		}
		slices.Sort(v)
		return fmt.Sprintf("%.1f / %.1f / %.1f", v[len(v)/2], v[min(len(v)-1, len(v)*99/100)], v[len(v)-1])
	}
	lines := []string{fmt.Sprintf("%-22s %s", "admitted → committed", q(gaps[0]))}
	for i := 1; i < len(order); i++ {
		lines = append(lines, fmt.Sprintf("%-22s %s", order[i-1]+" → "+order[i], q(gaps[i])))
	}
	b.Logf("stages, p50 / p99 / max ms (%d deliveries; rounds %v):\n%s", len(gaps[0]), c.rounds, strings.Join(lines, "\n"))
}

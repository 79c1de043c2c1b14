package ui

import (
	"fmt"
	"net/http"
	"time"
)

// Live updates by Server-Sent Events: GET /c/{cid}/events streams an event
// named "tasks", "runs" or "conversations" when that kind of company data
// changes, so open pages refresh the matching regions within a second
// instead of at their next poll. Polling stays: it is the fallback when
// the stream is unavailable (no EventSource, a proxy that buffers), and
// the regions still carry their data-poll intervals.

// Event stream timing: how often the stream compares the company's change
// fingerprints, how often an idle stream sends a keep-alive comment, and
// how long one stream lives (the browser reconnects by itself; a bounded
// stream re-checks the session on every reconnect).
const (
	eventsCheckEvery = 400 * time.Millisecond
	eventsKeepAlive  = 15 * time.Second
	eventsLifetime   = 2 * time.Minute
)

// Stop ends every open event stream (registered with the HTTP server's
// shutdown, which does not cancel request contexts by itself: an open
// tab must not hold a shutdown up for its grace period).
func (u *UI) Stop() { u.stopOnce.Do(func() { close(u.stopped) }) }

func (u *UI) events(c *rc) {
	rc := http.NewResponseController(c.w)
	last, err := c.cl().Changes(c.ctx(), c.cid)
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	// retry: the browser reconnects one second after the stream ends.
	if _, err := fmt.Fprint(c.w, "retry: 1000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ctx := c.r.Context()
	tick := time.NewTicker(eventsCheckEvery)
	defer tick.Stop()
	end := time.NewTimer(eventsLifetime)
	defer end.Stop()
	quiet := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.stopped:
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		now, err := c.cl().Changes(c.ctx(), c.cid)
		if err != nil {
			return // access ended (or the database is away): the client falls back to polling and reconnects
		}
		var out string
		for _, k := range []struct{ name, old, cur string }{{"tasks", last.Tasks, now.Tasks}, {"runs", last.Runs, now.Runs},
			{"conversations", last.Conversations, now.Conversations}} {
			if k.old != k.cur {
				out += "event: " + k.name + "\ndata: " + k.cur + "\n\n"
			}
		}
		last = now
		if out == "" && time.Since(quiet) >= eventsKeepAlive {
			out = ": keep-alive\n\n"
		}
		if out == "" {
			continue
		}
		quiet = time.Now()
		if _, err := fmt.Fprint(c.w, out); err != nil || rc.Flush() != nil {
			return
		}
	}
}

package ui_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// TestEventStreamNamesWhatChanged: /c/{id}/events is a text/event-stream
// that names the kind of data that changed (a new task: "tasks"; a run:
// "runs"), on both databases.
func TestEventStreamNamesWhatChanged(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Live")
		res, err := http.Get(e.base + "/c/" + f.company + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		wait := func(want string) {
			t.Helper()
			deadline := time.After(30 * time.Second)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("the stream ended before %q", want)
					}
					if l == want {
						return
					}
				case <-deadline:
					t.Fatalf("no %q on the event stream", want)
				}
			}
		}
		wait("retry: 1000")
		e.api.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": "Pushed"}, 201)
		wait("event: tasks")
		e.api.JSON("POST", "/api/agents/"+f.agent+"/wakeup", map[string]string{"reason": "manual", "issueId": f.task}, 202)
		wait("event: runs")
	})
}

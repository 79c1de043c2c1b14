package api_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestBoardKeyLastUsed: the key list shows when each key last
// authenticated, written at most once a minute per key (a script's every
// request must not become a write).
func TestBoardKeyLastUsed(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		var skew atomic.Int64
		e.inst.Store.SetClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
		k := e.alice.JSON("POST", e.path("/board-keys"), map[string]any{"name": "script"}, 201)
		script := e.anon.As(k["token"].(string), "")
		usedAt := func() any {
			for _, key := range e.alice.List(e.path("/board-keys")) {
				if key["id"] == k["id"] {
					return key["lastUsedAt"]
				}
			}
			t.Fatalf("key %s not listed", k["id"])
			return nil
		}
		if got := usedAt(); got != nil {
			t.Fatalf("a fresh key has lastUsedAt %v", got)
		}
		script.JSON("GET", e.path(""), nil, 200)
		first := usedAt()
		if first == nil {
			t.Fatal("a used key has no lastUsedAt")
		}
		created := testkit.ParseTime(t, k["createdAt"])
		if used := testkit.ParseTime(t, first); used.Before(created) {
			t.Fatalf("lastUsedAt %v before createdAt %v", used, created)
		}
		script.JSON("GET", e.path(""), nil, 200)
		if again := usedAt(); again != first {
			t.Fatalf("a second use within the minute wrote lastUsedAt again: %v then %v", first, again)
		}
		skew.Store(int64(2 * time.Minute))
		script.JSON("GET", e.path(""), nil, 200)
		if later := usedAt(); !testkit.ParseTime(t, later).After(testkit.ParseTime(t, first)) {
			t.Fatalf("a use two minutes later did not move lastUsedAt: %v then %v", first, later)
		}
	})
}

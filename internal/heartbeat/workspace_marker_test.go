package heartbeat

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestMarkerWrittenByConcurrentRuns: runs that prepare one task directory
// at once (two agents on a task) all accept its marker; none fails on the
// other's file or reads it half-written, and no temporary file is left.
// Two runs racing here failed one of them with "write marker: file
// exists" (seen in TestRunsPage).
func TestMarkerWrittenByConcurrentRuns(t *testing.T) {
	owner := workspaceMarker{CompanyID: "c1", TaskID: "t1", Mode: "task"}
	for round := 0; round < 50; round++ {
		dir := t.TempDir()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = checkMarker(dir, owner)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, run %d: %v", round, i, err)
			}
		}
		left, err := os.ReadDir(filepath.Join(dir, filepath.Dir(markerPath)))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0].Name() != filepath.Base(markerPath) {
			t.Fatalf("round %d: marker directory holds %v", round, left)
		}
	}
	// Another owner is still refused, whoever wrote the marker first.
	dir := t.TempDir()
	if err := checkMarker(dir, owner); err != nil {
		t.Fatal(err)
	}
	other := owner
	other.TaskID = "t2"
	if err := checkMarker(dir, other); !errors.Is(err, errMismatchedWorkspace) {
		t.Fatalf("another task's run: %v", err)
	}
}

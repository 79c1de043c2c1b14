// Package golden compares test output with checked-in golden files (the
// caddy and standard-library style): where the shape of an output matters
// to others (the agents' skill file, the MCP catalog, API error bodies,
// the emulator's wire JSON), a change to it must show up as a reviewed
// diff of testdata. Run the tests with -update to rewrite the files after
// an intended change.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Check compares got with the file at path (usually under testdata/),
// failing the test on a difference, or rewrites the file under -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v (run the test with -update to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update after an intended change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

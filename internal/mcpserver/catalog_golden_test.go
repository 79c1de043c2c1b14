package mcpserver

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/paperclipai/paperclipai/internal/golden"
)

// The runtime API catalog is what agents discover through search_api and
// call through call_api: a changed operation must be a reviewed diff.
func TestCatalogGolden(t *testing.T) {
	got, err := json.MarshalIndent(Catalog, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "catalog.golden.json"), append(got, '\n'))
}

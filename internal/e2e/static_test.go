package e2e_test

import (
	"debug/elf"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestStaticBuild builds the binary as releases are built (CGO_ENABLED=0,
// version, commit and date stamped), checks that the result is a static
// executable (no program interpreter, no shared libraries) and that it
// runs `version` and `version --json` with the stamped values.
func TestStaticBuild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ELF check is for Linux builds")
	}
	out := filepath.Join(t.TempDir(), "paperclipai")
	const pkg = "github.com/paperclipai/paperclipai/internal/buildinfo"
	ldflags := "-X " + pkg + ".Version=9.8.7-test -X " + pkg + ".commit=0123456789abcdef -X " + pkg + ".date=2026-01-02T03:04:05Z"
	if err := testkit.BuildStatic(out, "-ldflags", ldflags); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatalf("open the binary as ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary has a program interpreter (PT_INTERP): it is dynamically linked")
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a dynamic section (PT_DYNAMIC)")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("read DT_NEEDED: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	b, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, b)
	}
	want := "paperclipai 9.8.7-test (commit 0123456789abcdef, built 2026-01-02T03:04:05Z, "
	if got := string(b); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("version printed %q, want it to start with %q", got, want)
	}
	b, err = exec.Command(out, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var bi buildinfo.Info
	if err := json.Unmarshal(b, &bi); err != nil {
		t.Fatalf("version --json printed %q: %v", b, err)
	}
	if bi.Version != "9.8.7-test" || bi.Commit != "0123456789abcdef" || bi.Date != "2026-01-02T03:04:05Z" || bi.CGO ||
		bi.OS != "linux" || bi.Arch != runtime.GOARCH {
		t.Errorf("version --json = %+v", bi)
	}
}

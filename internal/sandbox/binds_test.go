package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Extra binds land only under the control directory or inside the task
// directory, never over the system or elsewhere; their sources may not be
// symlinks; read-only directories never expose the Paperclip home.
func TestExtraBindsAreConfined(t *testing.T) {
	testkit.RequireBwrap(t)
	bwrap, _ := sandbox.LookBwrap()
	root := t.TempDir()
	work, run, home := filepath.Join(root, "task"), filepath.Join(root, "run"), filepath.Join(root, "home")
	for _, d := range []string{work, run, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(run, "mcp.json")
	_ = os.WriteFile(file, []byte("{}"), 0o600)
	link := filepath.Join(run, "link")
	_ = os.Symlink(file, link)
	spec := func(binds []sandbox.Bind, ro ...string) sandbox.Spec {
		return sandbox.Spec{Workdir: work, Command: "/bin/true", Binds: binds, ReadOnlyDirs: ro, Hidden: []string{home}}
	}
	ok := []sandbox.Bind{{Src: file, Dest: sandbox.MCPConfigPath}, {Src: run, Dest: filepath.Join(work, ".claude", "skills", "agentmail")}}
	if _, err := sandbox.Command(bwrap, spec(ok)); err != nil {
		t.Fatalf("allowed binds: %v", err)
	}
	for _, bad := range []struct {
		spec sandbox.Spec
		want string
	}{
		{spec([]sandbox.Bind{{Src: file, Dest: "/usr/bin/env"}}), "must lie under"},
		{spec([]sandbox.Bind{{Src: file, Dest: sandbox.ControlDir}}), "must lie under"},
		{spec([]sandbox.Bind{{Src: file, Dest: work}}), "must lie under"},
		{spec([]sandbox.Bind{{Src: link, Dest: sandbox.MCPConfigPath}}), "symlink"},
		{spec([]sandbox.Bind{{Src: "relative", Dest: sandbox.MCPConfigPath}}), "absolute"},
		{spec(nil, home), "overlaps the Paperclip home"},
		{spec(nil, filepath.Join(home, "sub")), "overlaps the Paperclip home"},
		{spec(nil, root), "contains the task directory"},
	} {
		if _, err := sandbox.Command(bwrap, bad.spec); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v %v: got %v, want %q", bad.spec.Binds, bad.spec.ReadOnlyDirs, err, bad.want)
		}
	}
}

package sandbox_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// privilegeProbe runs inside the sandbox and reports what it could do, one
// "key: value" line per check; the test judges the answers.
const privilegeProbe = `
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status
echo "uid: $(id -u) gid: $(id -g)"
if mount -o remount,bind,rw /usr 2>/dev/null; then echo "remount: allowed"; else echo "remount: denied"; fi
if touch /usr/escape 2>/dev/null; then echo "usr write: allowed"; else echo "usr write: denied"; fi
if (echo 1 > /proc/sys/kernel/printk_ratelimit) 2>/dev/null; then echo "sysctl: allowed"; else echo "sysctl: denied"; fi
if [ -w /proc/sysrq-trigger ]; then echo "sysrq: writable"; else echo "sysrq: not writable"; fi
if cat "$PROBE_KEY" >/dev/null 2>&1; then echo "master key: readable"; else echo "master key: unreadable"; fi
if unshare -U true 2>/dev/null; then echo "userns: allowed"; else echo "userns: denied"; fi
echo "inside" > "/tmp/$PROBE_TMP_NAME" && echo "tmp: ok"
echo "work" > "$PWD/created-inside" && echo "workdir: ok"
paperclipai version >/dev/null 2>&1 && echo "paperclipai: ok"
if touch /escape /etc/escape 2>/dev/null; then echo "root write: allowed"; else echo "root write: denied"; fi
: > ready
i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o ! -type l -writable -print 2>/dev/null | sed 's/^/writable: /'
echo "done"
`

// TestSandboxHoldsNoPrivilege is the root escape regression: started by a
// root server, a sandboxed process runs as the unprivileged sandbox
// identity with no capabilities; it cannot remount the read-only system,
// write a host sysctl or the sysrq trigger, create user namespaces, read
// the master key or write anything outside its task directory and its
// private /tmp and /run. Its environment reaches it through neither
// bubblewrap's command line nor its environment. The test runs as root in
// CI, like a server started as root.
func TestSandboxHoldsNoPrivilege(t *testing.T) {
	testkit.RequireBwrap(t)
	id, err := sandbox.HostIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && (!id.Switch || id.UID == 0 || id.GID == 0) {
		t.Fatalf("a root server's sandbox identity is %+v, want an unprivileged one", id)
	}
	bwrap, err := sandbox.LookBwrap()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	key := filepath.Join(home, "instance", "secrets", "master.key")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("canary-master-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	workdir := filepath.Join(home, "workspaces", "company", "task")
	skills := filepath.Join(home, "instance", "runs", "run", "skills")
	for _, d := range []string{workdir, skills} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(skills, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := id.Own(workdir); err != nil {
		t.Fatal(err)
	}
	sysctl := "/proc/sys/kernel/printk_ratelimit"
	before, _ := os.ReadFile(sysctl)
	tmpName := "paperclip-probe-" + testkit.NewUUID()
	secret := "canary-env-" + testkit.NewUUID()
	cmd, err := sandbox.Command(bwrap, sandbox.Spec{Workdir: workdir, SkillsDir: skills, Binary: testkit.Binary(t),
		Command: "/bin/sh", Args: []string{"-c", privilegeProbe}, User: id,
		Env: map[string]string{"PATH": sandbox.BinDir + ":/usr/bin:/bin", "PROBE_KEY": key, "PROBE_TMP_NAME": tmpName,
			"API_TOKEN": secret, "LD_PRELOAD": "/nonexistent/preload.so"},
		Hidden: []string{filepath.Join(home, "workspaces"), filepath.Join(home, "instance"), key}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // sandbox.Cmd.Wait
	// While the sandbox runs, bubblewrap's own command line and
	// environment (readable by every host user, and acted on by the
	// dynamic loader) carry none of the run's environment. The probe
	// signals readiness before its scan of the whole file system, whose
	// duration grows with the host's file count and load (it once took
	// more than 30 s on a busy 2-core machine); the test waits for the
	// probe's end without a deadline of its own.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(workdir, "ready")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("probe ended early: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe never got ready:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("LD_PRELOAD")) {
			t.Fatalf("bubblewrap's %s carries the run environment: %q", f, b)
		}
	}
	if err := os.WriteFile(filepath.Join(workdir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("probe: %v\n%s", err, out.String())
	}
	report := out.String()
	t.Log(report)
	for _, line := range strings.Split(report, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(k, "Cap"):
			if strings.Trim(v, "0") != "" {
				t.Errorf("capability set %s = %s, want none", k, v)
			}
		case k == "writable":
			if !sandbox.Within(v, workdir) && !sandbox.Within(v, "/tmp") && !sandbox.Within(v, "/run") {
				t.Errorf("writable outside the task directory and the private /tmp and /run: %s", v)
			}
		}
	}
	for _, want := range []string{"remount: denied", "usr write: denied", "sysctl: denied", "sysrq: not writable",
		"master key: unreadable", "userns: denied", "root write: denied", "tmp: ok", "workdir: ok", "paperclipai: ok", "done"} {
		if !strings.Contains(report, want+"\n") {
			t.Errorf("probe did not report %q", want)
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(report, "uid: "+strconv.Itoa(id.UID)+" gid: "+strconv.Itoa(id.GID)+"\n") {
		t.Errorf("the sandbox did not run as %+v", id)
	}
	if after, _ := os.ReadFile(sysctl); !bytes.Equal(before, after) {
		t.Errorf("host sysctl changed: %q -> %q", before, after)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), tmpName)); err == nil {
		t.Error("the sandbox's /tmp is the host's")
	}
	fi, err := os.Stat(filepath.Join(workdir, "created-inside"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != id.UID {
		t.Errorf("a file created in the sandbox belongs to uid %d, want %d", st.Uid, id.UID)
	}
}

package e2e_test

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseSnapshot runs `scripts/release --snapshot` for linux/amd64 as
// a release would, checks SHA256SUMS against the artifacts and unpacks the
// .deb into a scratch root (dpkg -x) to check what it installs: the static
// binary (which runs and names the snapshot version), the systemd unit,
// the environment file, and the maintainer script that creates the
// paperclip system user.
func TestReleaseSnapshot(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the snapshot test builds for linux/amd64 on a linux/amd64 machine")
	}
	for _, tool := range []string{"git", "dpkg", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to build and check the release (apt-get install %s)", tool, tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("./scripts/release", "--snapshot", "--targets", "linux/amd64", "--out", out)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GO="+filepath.Join(runtime.GOROOT(), "bin", "go"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var deb, rpm, tgz string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".deb"):
			deb = name
		case strings.HasSuffix(name, ".rpm"):
			rpm = name
		case strings.HasSuffix(name, "_linux_amd64.tar.gz"):
			tgz = name
		}
	}
	if deb == "" || rpm == "" || tgz == "" {
		t.Fatalf("artifacts %v: want a .deb, a .rpm and a linux_amd64 .tar.gz", entries)
	}

	// SHA256SUMS names every artifact with its right sum.
	f, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	summed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(out, fields[1]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != fields[0] {
			t.Errorf("SHA256SUMS: wrong sum for %s", fields[1])
		}
		summed[fields[1]] = true
	}
	for _, a := range []string{deb, rpm, tgz} {
		if !summed[a] {
			t.Errorf("SHA256SUMS lacks %s", a)
		}
	}

	root := t.TempDir()
	if b, err := exec.Command("dpkg", "-x", filepath.Join(out, deb), root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x: %v\n%s", err, b)
	}
	bin := filepath.Join(root, "usr", "bin", "paperclipai")
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the package's binary: %v", err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the packaged binary is dynamically linked")
		}
	}
	ef.Close()
	v, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "-snapshot.") {
		t.Fatalf("packaged binary version: %v\n%s", err, v)
	}
	for path, want := range map[string]string{
		"usr/lib/systemd/system/paperclip.service": "Type=notify",
		"etc/paperclip/paperclip.env":              "PAPERCLIP_DEPLOYMENT_MODE=authenticated",
		"usr/share/doc/paperclipai/CHANGELOG.md":   "Keep a Changelog",
	} {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("the package lacks /%s: %v", path, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("/%s does not contain %q", path, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "var", "lib", "paperclip")); err != nil || !fi.IsDir() {
		t.Errorf("the package lacks /var/lib/paperclip: %v", err)
	}
	ctl := t.TempDir()
	if b, err := exec.Command("dpkg", "-e", filepath.Join(out, deb), ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -e: %v\n%s", err, b)
	}
	post, err := os.ReadFile(filepath.Join(ctl, "postinst"))
	if err != nil || !strings.Contains(string(post), "useradd --system") || !strings.Contains(string(post), "paperclip") {
		t.Errorf("postinst does not create the paperclip system user: %v\n%s", err, post)
	}
	conf, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
	if err != nil || !strings.Contains(string(conf), "/etc/paperclip/paperclip.env") {
		t.Errorf("/etc/paperclip/paperclip.env is not a conffile: %v %s", err, conf)
	}
}

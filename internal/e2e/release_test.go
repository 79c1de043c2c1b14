package e2e_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/buildinfo"
)

// releaseTarget is one target of scripts/release, with the names its
// binary format and its packages give the architecture.
type releaseTarget struct {
	os, arch string
	elf      elf.Machine // linux
	macho    macho.Cpu   // darwin
	rpmArch  string      // linux: the .rpm's architecture
}

// releaseTargets are the targets scripts/release builds by default.
var releaseTargets = []releaseTarget{
	{os: "linux", arch: "amd64", elf: elf.EM_X86_64, rpmArch: "x86_64"},
	{os: "linux", arch: "arm64", elf: elf.EM_AARCH64, rpmArch: "aarch64"},
	{os: "darwin", arch: "arm64", macho: macho.CpuArm64},
}

// TestReleaseSnapshot runs `scripts/release --snapshot` once for every
// release target, as a release would, and checks every artifact without
// running a foreign binary: the archives of linux amd64 and arm64 and
// darwin arm64 (each binary checked by its ELF or Mach-O header: the
// target's architecture, an executable, static on Linux (no program
// interpreter, no dynamic section), only system libraries on macOS,
// trimmed (-s -w) and stamped with the snapshot version and commit);
// SHA256SUMS, naming exactly the artifacts with their right sums; the .deb
// of each Linux architecture, unpacked into a scratch root (dpkg -x) to
// check what it installs (the archive's binary, the systemd unit, the
// environment file as a conffile, the maintainer script that creates the
// paperclip system user); and the .rpm of each, read from its header (the
// architecture, the same files, the binary by its digest, the
// environment file as a noreplace config file, the same user in the
// post-install script). The binary native to this machine also runs
// `version` and `version --json`.
//
// The cross builds are the test's cost (each target compiles the whole
// module), so the script runs once and the subtests share its output.
func TestReleaseSnapshot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the snapshot test runs the release script and dpkg on Linux")
	}
	for _, tool := range []string{"git", "dpkg", "dpkg-deb", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to build and check the release (apt-get install dpkg tar coreutils git)", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("./scripts/release", "--snapshot", "--out", out)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GO="+filepath.Join(runtime.GOROOT(), "bin", "go"))
	started := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	t.Logf("scripts/release --snapshot (%d targets) took %s", len(releaseTargets), time.Since(started).Round(time.Second))

	git := func(args ...string) string {
		c := exec.Command("git", args...)
		c.Dir = "../.."
		b, err := c.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(b))
	}
	commit := git("rev-parse", "HEAD")
	base, _, _ := strings.Cut(buildinfo.Version, "-")
	version := base + "-snapshot." + commit[:12]

	// Exactly the expected artifacts, each found by its target.
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	find := func(what string, match func(string) bool) string {
		t.Helper()
		var found []string
		for _, n := range names {
			if match(n) {
				found = append(found, n)
			}
		}
		if len(found) != 1 {
			t.Fatalf("artifacts %q: want one %s, found %q", names, what, found)
		}
		return found[0]
	}
	archives, debs, rpms := map[string]string{}, map[string]string{}, map[string]string{}
	var artifacts []string
	for _, tg := range releaseTargets {
		key := tg.os + "_" + tg.arch
		name := "paperclipai_" + version + "_" + key + ".tar.gz"
		archives[key] = find(name, func(n string) bool { return n == name })
		artifacts = append(artifacts, name)
		if tg.os == "linux" {
			// The names docs/deployment.md gives: nFPM's, with the
			// snapshot's "-" as "~" (so it sorts before the release).
			pkgVersion := strings.Replace(version, "-", "~", 1)
			deb := "paperclipai_" + pkgVersion + "_" + tg.arch + ".deb"
			rpm := "paperclipai-" + pkgVersion + "-1." + tg.rpmArch + ".rpm"
			debs[key] = find(deb, func(n string) bool { return n == deb })
			rpms[key] = find(rpm, func(n string) bool { return n == rpm })
			artifacts = append(artifacts, debs[key], rpms[key])
		}
	}
	if want := append(slices.Clone(artifacts), "SHA256SUMS"); len(names) != len(want) {
		t.Errorf("artifacts %q, want only %q", names, want)
	}

	t.Run("SHA256SUMS", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		summed := map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 2 {
				t.Fatalf("SHA256SUMS line %q", sc.Text())
			}
			if got := fileSHA256(t, filepath.Join(out, fields[1])); got != fields[0] {
				t.Errorf("SHA256SUMS: %s is listed with %s, its sum is %s", fields[1], fields[0], got)
			}
			summed[fields[1]]++
		}
		for _, a := range artifacts {
			if summed[a] != 1 {
				t.Errorf("SHA256SUMS names %s %d times, want once", a, summed[a])
			}
		}
		if len(summed) != len(artifacts) {
			t.Errorf("SHA256SUMS names %d files, want the %d artifacts", len(summed), len(artifacts))
		}
	})

	for _, tg := range releaseTargets {
		key := tg.os + "_" + tg.arch
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			untar(t, filepath.Join(out, archives[key]), dir)
			top := filepath.Join(dir, strings.TrimSuffix(archives[key], ".tar.gz"))
			for _, f := range []string{"paperclipai", "README.md", "CHANGELOG.md", "packaging/paperclip.service", "packaging/paperclip.env"} {
				if _, err := os.Stat(filepath.Join(top, f)); err != nil {
					t.Errorf("the archive lacks %s: %v", f, err)
				}
			}
			bin := filepath.Join(top, "paperclipai")
			if tg.os == "linux" {
				checkReleaseELF(t, bin, tg.elf)
			} else {
				checkReleaseMachO(t, bin, tg.macho)
			}
			raw, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, stamp := range []string{version, commit} {
				if !bytes.Contains(raw, []byte(stamp)) {
					t.Errorf("the binary is not stamped with %s", stamp)
				}
			}
			if tg.os == runtime.GOOS && tg.arch == runtime.GOARCH {
				checkReleaseVersion(t, bin, version, commit)
			}
			if tg.os != "linux" {
				return
			}
			binSum := fileSHA256(t, bin)
			t.Run("deb", func(t *testing.T) { checkReleaseDeb(t, filepath.Join(out, debs[key]), tg.arch, binSum) })
			t.Run("rpm", func(t *testing.T) { checkReleaseRPM(t, filepath.Join(out, rpms[key]), tg.rpmArch, base, binSum) })
		})
	}
}

// fileSHA256 is the hex SHA-256 of a file.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// untar unpacks a .tar.gz of regular files and directories into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q leaves the archive's directory", archive, h.Name)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s is owned by %d:%d, want 0:0 (reproducible archives)", archive, h.Name, h.Uid, h.Gid)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: %s is of type %q; the archive holds only files and directories", archive, h.Name, h.Typeflag)
		}
	}
}

// checkReleaseELF checks a Linux release binary by its header: a static
// executable for machine, without symbol table or DWARF (-s -w).
func checkReleaseELF(t *testing.T, bin string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("open the binary as ELF: %v", err)
	}
	defer f.Close()
	if f.Machine != machine || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		t.Errorf("the binary is %s %s %s, want a 64-bit %s executable", f.Class, f.Type, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug") || strings.HasPrefix(s.Name, ".zdebug") {
			t.Errorf("the binary has a %s section: releases are built with -ldflags \"-s -w\"", s.Name)
		}
	}
}

// checkReleaseMachO checks a macOS release binary by its header: an
// executable for cpu that loads only the system's libraries (Go on macOS
// calls the kernel through libSystem, so no macOS binary is static) and
// carries no DWARF (-w).
func checkReleaseMachO(t *testing.T, bin string, cpu macho.Cpu) {
	t.Helper()
	f, err := macho.Open(bin)
	if err != nil {
		t.Fatalf("open the binary as Mach-O: %v", err)
	}
	defer f.Close()
	if f.Cpu != cpu || f.Type != macho.TypeExec || f.Magic != macho.Magic64 {
		t.Errorf("the binary is %s type %v magic %#x, want a 64-bit %s executable", f.Cpu, f.Type, f.Magic, cpu)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("read the binary's libraries: %v", err)
	}
	for _, l := range libs {
		if !strings.HasPrefix(l, "/usr/lib/") && !strings.HasPrefix(l, "/System/Library/") {
			t.Errorf("the binary loads %s, not a system library (a cgo build?)", l)
		}
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, "__debug_") || strings.HasPrefix(s.Name, "__zdebug_") {
			t.Errorf("the binary has a %s section: releases are built with -ldflags \"-s -w\"", s.Name)
		}
	}
}

// checkReleaseVersion runs the native release binary's version command.
func checkReleaseVersion(t *testing.T, bin, version, commit string) {
	t.Helper()
	b, err := exec.Command(bin, "version").CombinedOutput()
	if want := "paperclipai " + version + " (commit " + commit + ", built "; err != nil || !strings.HasPrefix(string(b), want) {
		t.Errorf("version: %v: printed %q, want it to start with %q", err, b, want)
	}
	b, err = exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var bi buildinfo.Info
	if err := json.Unmarshal(b, &bi); err != nil {
		t.Fatalf("version --json printed %q: %v", b, err)
	}
	if bi.Version != version || bi.Commit != commit || bi.Date == "" || bi.CGO {
		t.Errorf("version --json = %+v, want version %s, commit %s, a date, no cgo", bi, version, commit)
	}
}

// checkReleaseDeb unpacks a .deb into a scratch root and checks what it
// installs and its maintainer scripts.
func checkReleaseDeb(t *testing.T, deb, arch, binSum string) {
	t.Helper()
	b, err := exec.Command("dpkg-deb", "--field", deb, "Package", "Architecture").CombinedOutput()
	if err != nil || !strings.Contains(string(b), "Package: paperclipai") || !strings.Contains(string(b), "Architecture: "+arch+"\n") {
		t.Errorf("dpkg-deb --field: %v\n%s\nwant package paperclipai for %s", err, b, arch)
	}
	root := t.TempDir()
	if b, err := exec.Command("dpkg", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -x: %v\n%s", err, b)
	}
	if got := fileSHA256(t, filepath.Join(root, "usr", "bin", "paperclipai")); got != binSum {
		t.Errorf("/usr/bin/paperclipai is not the archive's binary for %s", arch)
	}
	for path, want := range releaseFiles {
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
	if b, err := exec.Command("dpkg", "-e", deb, ctl).CombinedOutput(); err != nil {
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

// releaseFiles are files both packages install (without the leading /),
// each with a line it must contain.
var releaseFiles = map[string]string{
	"usr/lib/systemd/system/paperclip.service": "Type=notify",
	"etc/paperclip/paperclip.env":              "PAPERCLIP_DEPLOYMENT_MODE=authenticated",
	"usr/share/doc/paperclipai/CHANGELOG.md":   "Keep a Changelog",
}

// checkReleaseRPM reads an .rpm's header (no rpm tool needed) and checks
// its name, architecture, files, the binary's digest, the configuration
// file's flags and the post-install script.
func checkReleaseRPM(t *testing.T, path, arch, baseVersion, binSum string) {
	t.Helper()
	h, err := readRPMHeader(path)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	if name := h.str(rpmTagName); name != "paperclipai" {
		t.Errorf("rpm name %q", name)
	}
	if got := h.str(rpmTagArch); got != arch {
		t.Errorf("rpm architecture %q, want %q", got, arch)
	}
	if v := h.str(rpmTagVersion); !strings.HasPrefix(v, baseVersion) {
		t.Errorf("rpm version %q, want %s…", v, baseVersion)
	}
	dirs, bases, dirIdx := h.strs(rpmTagDirNames), h.strs(rpmTagBaseNames), h.ints(rpmTagDirIndexes)
	digests, flags := h.strs(rpmTagFileDigests), h.ints(rpmTagFileFlags)
	if len(bases) == 0 || len(dirIdx) != len(bases) || len(digests) != len(bases) || len(flags) != len(bases) {
		t.Fatalf("rpm file list: %d names, %d dir indexes, %d digests, %d flags", len(bases), len(dirIdx), len(digests), len(flags))
	}
	files := map[string]int{}
	for i, b := range bases {
		if int(dirIdx[i]) >= len(dirs) {
			t.Fatalf("rpm file %s: dir index %d of %d", b, dirIdx[i], len(dirs))
		}
		files[dirs[dirIdx[i]]+b] = i
	}
	want := []string{"/usr/bin/paperclipai", "/var/lib/paperclip"}
	for p := range releaseFiles {
		want = append(want, "/"+p)
	}
	for _, p := range want {
		if _, ok := files[p]; !ok {
			t.Errorf("the rpm lacks %s (it has %v)", p, bases)
		}
	}
	if i, ok := files["/usr/bin/paperclipai"]; ok {
		if algo := h.ints(rpmTagFileDigestAlgo); len(algo) == 1 && algo[0] != rpmDigestSHA256 {
			t.Errorf("rpm file digests use algorithm %d, want SHA-256 (%d)", algo[0], rpmDigestSHA256)
		} else if digests[i] != binSum {
			t.Errorf("the rpm's /usr/bin/paperclipai (digest %s) is not the archive's binary for %s", digests[i], arch)
		}
	}
	if i, ok := files["/etc/paperclip/paperclip.env"]; ok && flags[i]&(rpmFileConfig|rpmFileNoReplace) != rpmFileConfig|rpmFileNoReplace {
		t.Errorf("/etc/paperclip/paperclip.env has rpm file flags %#x, want config and noreplace", flags[i])
	}
	if post := h.str(rpmTagPostIn); !strings.Contains(post, "useradd --system") {
		t.Errorf("the rpm's post-install script does not create the paperclip system user:\n%s", post)
	}
}

// The RPM header tags, file flags and digest algorithm the test reads
// (rpm's rpmtag.h and rpmfiles.h, the RPM v4 package format).
const (
	rpmTagName           = 1000
	rpmTagVersion        = 1001
	rpmTagArch           = 1022
	rpmTagPostIn         = 1024
	rpmTagFileDigests    = 1035
	rpmTagFileFlags      = 1037
	rpmTagDirIndexes     = 1116
	rpmTagBaseNames      = 1117
	rpmTagDirNames       = 1118
	rpmTagFileDigestAlgo = 5011

	rpmFileConfig    = 1 << 0
	rpmFileNoReplace = 1 << 4
	rpmDigestSHA256  = 8
)

// rpmHeader is an RPM header's entries, by tag: the raw value of each and
// its count.
type rpmHeader struct {
	entries map[int32]rpmEntry
}

type rpmEntry struct {
	typ   int32
	count int
	data  []byte // from the entry's offset to the end of the store
}

func (h rpmHeader) str(tag int32) string {
	s := h.strs(tag)
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// strs reads a STRING (6), STRING_ARRAY (8) or I18NSTRING (9) entry.
func (h rpmHeader) strs(tag int32) []string {
	e, ok := h.entries[tag]
	if !ok || (e.typ != 6 && e.typ != 8 && e.typ != 9) {
		return nil
	}
	var out []string
	rest := e.data
	for range e.count {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return out
		}
		out = append(out, string(rest[:i]))
		rest = rest[i+1:]
	}
	return out
}

// ints reads an INT32 (4) entry.
func (h rpmHeader) ints(tag int32) []int32 {
	e, ok := h.entries[tag]
	if !ok || e.typ != 4 || len(e.data) < 4*e.count {
		return nil
	}
	out := make([]int32, e.count)
	for i := range out {
		out[i] = int32(binary.BigEndian.Uint32(e.data[4*i:]))
	}
	return out
}

// readRPMHeader reads the main header of an RPM v4 package: after the
// 96-byte lead comes the signature header, padded to 8 bytes, then the
// main header; each is a magic, an entry count and a store size, the
// 16-byte index entries and the store.
func readRPMHeader(path string) (rpmHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return rpmHeader{}, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	lead := make([]byte, 96)
	if _, err := io.ReadFull(r, lead); err != nil {
		return rpmHeader{}, fmt.Errorf("read the lead: %w", err)
	}
	if !bytes.Equal(lead[:4], []byte{0xed, 0xab, 0xee, 0xdb}) {
		return rpmHeader{}, errors.New("not an RPM package (no lead magic)")
	}
	readOne := func(pad bool) (rpmHeader, error) {
		intro := make([]byte, 16)
		if _, err := io.ReadFull(r, intro); err != nil {
			return rpmHeader{}, fmt.Errorf("read a header: %w", err)
		}
		if !bytes.Equal(intro[:4], []byte{0x8e, 0xad, 0xe8, 0x01}) {
			return rpmHeader{}, errors.New("no header magic")
		}
		n, size := binary.BigEndian.Uint32(intro[8:]), binary.BigEndian.Uint32(intro[12:])
		if n > 1<<16 || size > 64<<20 {
			return rpmHeader{}, fmt.Errorf("implausible header: %d entries, %d bytes", n, size)
		}
		index := make([]byte, 16*n)
		if _, err := io.ReadFull(r, index); err != nil {
			return rpmHeader{}, fmt.Errorf("read the header index: %w", err)
		}
		store := make([]byte, size)
		if _, err := io.ReadFull(r, store); err != nil {
			return rpmHeader{}, fmt.Errorf("read the header store: %w", err)
		}
		if pad {
			if rem := size % 8; rem != 0 {
				if _, err := r.Discard(int(8 - rem)); err != nil {
					return rpmHeader{}, err
				}
			}
		}
		h := rpmHeader{entries: map[int32]rpmEntry{}}
		for i := range n {
			e := index[16*i:]
			tag := int32(binary.BigEndian.Uint32(e))
			typ := int32(binary.BigEndian.Uint32(e[4:]))
			off := binary.BigEndian.Uint32(e[8:])
			count := binary.BigEndian.Uint32(e[12:])
			if off > size || count > size {
				return rpmHeader{}, fmt.Errorf("tag %d: offset %d, count %d beyond the %d-byte store", tag, off, count, size)
			}
			h.entries[tag] = rpmEntry{typ: typ, count: int(count), data: store[off:]}
		}
		return h, nil
	}
	if _, err := readOne(true); err != nil {
		return rpmHeader{}, fmt.Errorf("signature header: %w", err)
	}
	h, err := readOne(false)
	if err != nil {
		return rpmHeader{}, fmt.Errorf("main header: %w", err)
	}
	return h, nil
}

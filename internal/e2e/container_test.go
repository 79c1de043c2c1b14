package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/testkit"
)

// containerStage is one stage of the Containerfile: its FROM line and its
// instructions, each with continuation lines joined and its keyword upper
// case.
type containerStage struct {
	name, from string
	lines      []string
}

// instructions returns the stage's instructions of one keyword, without
// the keyword.
func (s containerStage) instructions(keyword string) []string {
	var out []string
	for _, l := range s.lines {
		if k, rest, _ := strings.Cut(l, " "); strings.EqualFold(k, keyword) {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	return out
}

// parseContainerfile reads the repository's Containerfile into its stages.
func parseContainerfile(t *testing.T) []containerStage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []containerStage
	var cur strings.Builder
	flush := func() {
		l := strings.Join(strings.Fields(cur.String()), " ")
		cur.Reset()
		if l == "" {
			return
		}
		k, rest, _ := strings.Cut(l, " ")
		if strings.EqualFold(k, "FROM") {
			f := strings.Fields(rest)
			s := containerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			if !strings.EqualFold(k, "ARG") {
				t.Fatalf("Containerfile: %q before the first FROM", l)
			}
			return
		}
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, strings.ToUpper(k)+" "+rest)
	}
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

// TestContainerfile checks the Containerfile's shape, which the image
// test below cannot build in full without pulling base images: a static
// build stage (CGO_ENABLED=0, trimmed as releases are) and two run
// targets, distroless (the default, last) and debian (with bubblewrap),
// each running the binary as a non-root user with its data in the
// /var/lib/paperclip volume, listening on 0.0.0.0:3100 in authenticated
// mode, stopped by SIGTERM.
func TestContainerfile(t *testing.T) {
	stages := parseContainerfile(t)
	var names []string
	byName := map[string]containerStage{}
	for _, s := range stages {
		names = append(names, s.name)
		byName[s.name] = s
	}
	if !slices.Equal(names, []string{"build", "debian", "distroless"}) {
		t.Fatalf("Containerfile stages %q, want build, debian, distroless (the default target last)", names)
	}
	build := strings.Join(byName["build"].instructions("RUN"), "\n")
	for _, want := range []string{"CGO_ENABLED=0 go build -trimpath", `-ldflags "-s -w `, "./cmd/paperclipai", "/out/paperclipai version"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build stage does not run %q", want)
		}
	}
	if !strings.Contains(strings.Join(byName["debian"].instructions("RUN"), "\n"), "bubblewrap") {
		t.Error("the debian target does not install bubblewrap")
	}
	for _, name := range []string{"debian", "distroless"} {
		s := byName[name]
		user := s.instructions("USER")
		if len(user) != 1 || strings.HasPrefix(user[0], "root") || strings.HasPrefix(user[0], "0:") || user[0] == "0" {
			t.Errorf("%s: USER %q, want one non-root user", name, user)
		}
		if v := s.instructions("VOLUME"); !slices.Equal(v, []string{"/var/lib/paperclip"}) {
			t.Errorf("%s: VOLUME %q, want /var/lib/paperclip", name, v)
		}
		env := strings.Join(s.instructions("ENV"), " ")
		for _, want := range []string{"PAPERCLIP_HOME=/var/lib/paperclip", "PAPERCLIP_LISTEN=0.0.0.0:3100", "PAPERCLIP_DEPLOYMENT_MODE=authenticated"} {
			if !slices.Contains(strings.Fields(env), want) {
				t.Errorf("%s: ENV lacks %s", name, want)
			}
		}
		for keyword, want := range map[string]string{"ENTRYPOINT": `["/usr/bin/paperclipai"]`, "CMD": `["run"]`, "STOPSIGNAL": "SIGTERM", "EXPOSE": "3100"} {
			if got := s.instructions(keyword); !slices.Equal(got, []string{want}) {
				t.Errorf("%s: %s %q, want %s", name, keyword, got, want)
			}
		}
		if copies := strings.Join(s.instructions("COPY"), "\n"); !strings.Contains(copies, "--from=build /out/paperclipai /usr/bin/paperclipai") {
			t.Errorf("%s: the binary is not copied from the build stage", name)
		}
	}
	if !strings.HasPrefix(byName["distroless"].from, "gcr.io/distroless/static") {
		t.Errorf("the distroless target is FROM %s", byName["distroless"].from)
	}
}

// podmanRunFlags are the flags every `podman run` of the test passes, for
// the machines the suite runs on (containers inside a VM whose kernel
// lacks CAP_SYS_RESOURCE and mixes cgroup v1 and v2): podman's default
// RLIMIT_NOFILE (1048576) is above the host's hard limit, and
// `--ulimit host` asks for the same; crun refuses a hybrid cgroup setup
// ("cgroups in hybrid mode not supported") where runc works. Both are
// harmless on an ordinary host.
func podmanRunFlags(t *testing.T) []string {
	t.Helper()
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	n := min(nofile.Cur, 65536)
	flags := []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", n, n), "--ulimit", "nproc=4096:4096"}
	if _, err := exec.LookPath("runc"); err == nil {
		flags = append(flags, "--runtime", "runc")
	}
	return flags
}

// containerImage builds the Containerfile's distroless target for the
// test without pulling anything: its FROM becomes scratch plus the few
// files the distroless image provides (passwd and group with the nonroot
// user 65532, /tmp, /home/nonroot, the CA bundle), and its COPY
// --from=build lines copy the test's static binary and an empty data
// directory from the build context instead. Every other line (ENV, USER,
// VOLUME, ENTRYPOINT, …) is the Containerfile's own.
func containerImage(t *testing.T, podman, tag string) {
	t.Helper()
	var dist containerStage
	for _, s := range parseContainerfile(t) {
		if s.name == "distroless" {
			dist = s
		}
	}
	ctx := t.TempDir()
	for _, d := range []string{"rootfs/etc/ssl/certs", "rootfs/tmp", "rootfs/home/nonroot", "out/data"} {
		if err := os.MkdirAll(filepath.Join(ctx, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, mode := range map[string]os.FileMode{"rootfs/tmp": 0o777 | os.ModeSticky, "out/data": 0o700} {
		if err := os.Chmod(filepath.Join(ctx, path), mode); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"rootfs/etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"rootfs/etc/group":  "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
	}
	if b, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files["rootfs/etc/ssl/certs/ca-certificates.crt"] = string(b)
	}
	for path, body := range files {
		if err := os.WriteFile(filepath.Join(ctx, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := os.ReadFile(testkit.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "out", "paperclipai"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := []string{"FROM scratch AS distroless", "COPY rootfs/ /"}
	for _, l := range dist.lines {
		if rest, ok := strings.CutPrefix(l, "COPY "); ok && strings.Contains(rest, "--from=build ") {
			l = "COPY " + strings.ReplaceAll(strings.Replace(rest, "--from=build ", "", 1), "/out/", "out/")
		}
		lines = append(lines, l)
	}
	containerfile := strings.Join(lines, "\n") + "\n"
	if strings.Contains(containerfile, "--from=") {
		t.Fatalf("the test's Containerfile still copies from another stage:\n%s", containerfile)
	}
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(podman, "build", "--layers=false", "--pull=never", "-q", "-t", tag, "-f", filepath.Join(ctx, "Containerfile"), ctx).CombinedOutput()
	if err != nil {
		t.Fatalf("podman build:\n%s\n%v\n%s", containerfile, err, b)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", tag).Run() })
}

// TestContainerImage builds the distroless image (containerImage: the
// Containerfile's run stage on scratch with the test's static binary) with
// podman and runs it: `version`; the server with the image's defaults,
// answering /healthz, /readyz and /api/health through a published port;
// the refusal of local_trusted mode on the image's 0.0.0.0 listener; and
// a clean exit (0) on `podman stop` (SIGTERM). It skips, saying why, only
// where podman is missing or cannot run a container, and fails instead
// under CI (.ci/run installs podman and runc).
func TestContainerImage(t *testing.T) {
	skip := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("the container test must run in CI: %s", why)
		}
		t.Skipf("SKIPPING the container test: %s", why)
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		skip("podman is not installed (apt-get install podman runc)")
	}
	if b, err := exec.Command(podman, "info", "--format", "{{.Host.OCIRuntime.Name}}").CombinedOutput(); err != nil {
		skip(fmt.Sprintf("podman info: %v: %s", err, strings.TrimSpace(string(b))))
	}
	id := strings.ToLower(strings.ReplaceAll(testkit.NewUUID(), "-", ""))[:12]
	tag := "localhost/paperclipai-test:" + id
	containerImage(t, podman, tag)
	run := append([]string{"run"}, podmanRunFlags(t)...)

	b, err := exec.Command(podman, append(run, "--rm", tag, "version")...).CombinedOutput()
	if err != nil {
		if strings.Contains(string(b), "OCI runtime") || strings.Contains(string(b), "OCI permission denied") {
			skip(fmt.Sprintf("podman cannot run a container on this machine: %s", strings.TrimSpace(string(b))))
		}
		t.Fatalf("podman run %s version: %v\n%s", tag, err, b)
	}
	if !strings.HasPrefix(string(b), "paperclipai ") || !strings.Contains(string(b), "linux/") {
		t.Fatalf("version in the container printed %q", b)
	}

	// local_trusted on the image's 0.0.0.0 listener: refused, with why.
	b, err = exec.Command(podman, append(run, "--rm", "-e", "PAPERCLIP_DEPLOYMENT_MODE=local_trusted", tag)...).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "local_trusted is allowed only on a loopback listen address") {
		t.Errorf("the image in local_trusted mode: %v, want a refusal naming the loopback rule:\n%s", err, b)
	}

	name := "paperclipai-test-" + id
	b, err = exec.Command(podman, append(run, "-d", "--name", name, "-p", "127.0.0.1::3100", tag)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman run -d: %v\n%s", err, b)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rm", "-f", "-v", name).Run() })
	logs := func() string {
		b, _ := exec.Command(podman, "logs", name).CombinedOutput()
		return string(b)
	}
	b, err = exec.Command(podman, "port", name, "3100/tcp").CombinedOutput()
	if err != nil {
		t.Fatalf("podman port: %v\n%s", err, b)
	}
	base := "http://" + strings.TrimSpace(strings.Split(string(b), "\n")[0])
	get := func(path string) (int, string) {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get("/readyz")
		if code == http.StatusOK && strings.Contains(body, `"status":"ok"`) {
			break
		}
		st, _ := exec.Command(podman, "inspect", "-f", "{{.State.Running}}", name).Output()
		if strings.TrimSpace(string(st)) != "true" || time.Now().After(deadline) {
			t.Fatalf("/readyz of the container: %d %s (running: %s)\n%s", code, body, st, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, path := range []string{"/healthz", "/api/health"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("GET %s in the container: %d %s", path, code, body)
		}
	}
	if l := logs(); !strings.Contains(l, "mode=authenticated") || !strings.Contains(l, "home=/var/lib/paperclip") {
		t.Errorf("the container's server did not start in authenticated mode on /var/lib/paperclip:\n%s", l)
	}
	if u, _ := exec.Command(podman, "inspect", "-f", "{{.Config.User}}", name).Output(); strings.TrimSpace(string(u)) != "65532:65532" {
		t.Errorf("the container runs as %q, want 65532:65532", u)
	}

	if b, err := exec.Command(podman, "stop", "-t", "30", name).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, b)
	}
	code, _ := exec.Command(podman, "inspect", "-f", "{{.State.ExitCode}}", name).Output()
	if strings.TrimSpace(string(code)) != "0" {
		t.Errorf("the container exited %s after SIGTERM, want 0\n%s", code, logs())
	}
}

package server_test

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func TestMetricsEndpoint(t *testing.T) {
	inst := testkit.Start(t, testkit.Config(t, ""))
	testkit.NewClient(t, inst.URL()).JSON("GET", "/api/health", nil, 200)
	resp, err := http.Get(inst.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "paperclip_http_requests_total") ||
		!strings.Contains(string(body), "paperclip_heartbeat_wake_to_start_seconds") {
		t.Fatalf("metrics: %d %.300s", resp.StatusCode, body)
	}
}

func TestAuthenticatedModeRequiresCredentials(t *testing.T) {
	cfg := testkit.Config(t, "")
	cfg.DeploymentMode = config.ModeAuthenticated
	inst := testkit.Start(t, cfg)
	anon := testkit.NewClient(t, inst.URL())
	anon.JSON("GET", "/api/health", nil, 200)
	if st, _ := anon.Do("GET", "/api/companies", nil); st != 401 {
		t.Fatalf("anonymous request in authenticated mode: %d", st)
	}
	if resp, err := http.Get(inst.URL() + "/metrics"); err != nil || resp.StatusCode != 403 {
		t.Fatalf("anonymous metrics: %v %v", resp, err)
	}
	// An instance administrator's key (created by the operator on the host).
	ctx := t.Context()
	admin, err := inst.Store.EnsureUser(ctx, inst.DB, "ops@example.com", "Ops", true)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := inst.Store.CreateBoardKey(ctx, inst.DB, admin.ID, "", "ops")
	if err != nil {
		t.Fatal(err)
	}
	ops := anon.As(token, "")
	cid := testkit.ID(ops.JSON("POST", "/api/companies", map[string]any{"name": "Prod"}, 201))
	ops.JSON("GET", "/api/companies/"+cid, nil, 200)
	if st, _ := anon.As("pcb_wrong", "").Do("GET", "/api/companies", nil); st != 401 {
		t.Fatalf("wrong key: %d", st)
	}
}

func TestAdminCreateKeyBootstrapsAuthenticatedMode(t *testing.T) {
	home := t.TempDir()
	out, err := exec.Command(testkit.Binary(t), "admin", "create-key", "--home", home, "--email", "root@example.com").Output()
	token := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(token, "pcb_") {
		t.Fatalf("create-key: %v %q", err, out)
	}
	cfg := testkit.Config(t, "")
	cfg.Home, cfg.DeploymentMode = home, config.ModeAuthenticated
	cfg.MasterKeyFile = home + "/instance/secrets/master.key"
	inst := testkit.Start(t, cfg)
	testkit.NewClient(t, inst.URL()).As(token, "").JSON("POST", "/api/companies", map[string]any{"name": "Boot"}, 201)
}

func TestDoctor(t *testing.T) {
	home := t.TempDir()
	out, err := exec.Command(testkit.Binary(t), "doctor", "--home", home).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("doctor on a fresh home: %v\n%s", err, out)
	}
	out, err = exec.Command(testkit.Binary(t), "doctor", "--home", home, "--listen", "0.0.0.0:3100").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loopback") {
		t.Fatalf("doctor must explain a bad configuration: %v\n%s", err, out)
	}
	out, err = exec.Command(testkit.Binary(t), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "paperclipai ") {
		t.Fatalf("version: %v %s", err, out)
	}
}

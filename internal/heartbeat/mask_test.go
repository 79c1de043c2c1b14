package heartbeat_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

// leakScript prints the value of variable v as is, base64-encoded at each
// offset (inside "x=", "xy=" and "xyz=") and hex-encoded.
func leakScript(v string) string {
	return `echo "plain:$` + v + `"; ` +
		`for p in x= xy= xyz=; do printf %s "$p$` + v + `" | base64 -w0; echo; printf %s "$p$` + v + `" | base64 -w0 | tr '+/' '-_'; echo; done; ` +
		`printf %s "$` + v + `" | od -An -tx1 | tr -d ' \n'; echo; ` +
		`printf %s "$` + v + `" | od -An -tx1 | tr -d ' \n' | tr a-f A-F; echo; echo "error:$` + v + `" >&2; exit 3`
}

// secretForms are the forms leakScript prints, for the test's own check.
func secretForms(v string) []string {
	out := []string{v, hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v)))}
	for _, p := range []string{"x=", "xy=", "xyz="} {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(p+v)), base64.URLEncoding.EncodeToString([]byte(p+v)))
	}
	return out
}

// TestRunLogsMaskEverySecretTheRunHeld is issue 28's masking regression: a
// CLI agent's passEnv credential (the instance's provider key) and a
// process agent's vaulted env value, printed as is, base64 at every
// offset and hex, appear in neither the stored run log (what viewers
// read) nor the run's error, nor a backup of the database.
func TestRunLogsMaskEverySecretTheRunHeld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		const passed, vaulted = "sk-ant-passed-credential-42", "vaulted+value/99"
		home := t.TempDir()
		tools := t.TempDir()
		cli := filepath.Join(tools, "claude")
		if err := os.WriteFile(cli, []byte("#!/bin/sh\n"+leakScript("PROVIDER_KEY")+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		st := store.New(d)
		ctx := context.Background()
		if err := st.PutSettings(ctx, d, domain.InstanceSettings{AgentCLI: map[string]domain.AgentCLISettings{
			agentcli.Claude: {Command: cli, PassEnv: []string{"PROVIDER_KEY"}}}}); err != nil {
			t.Fatal(err)
		}
		lookup := func(k string) (string, bool) {
			if k == "PROVIDER_KEY" {
				return passed, true
			}
			return "", false
		}
		e := startEnvAdapters(t, d, "Mask", heartbeat.Options{WorkspacesDir: filepath.Join(home, "workspaces"), RunsDir: filepath.Join(home, "runs"),
			Secrets: func(context.Context, domain.Agent) (map[string]string, error) {
				return map[string]string{"env.SECRET": vaulted}, nil
			}}, map[string]heartbeat.Adapter{agentcli.Claude: heartbeat.CLIAdapter{Type: agentcli.Claude, Store: st, KillGrace: time.Second,
			LookupEnv: lookup}})
		proc := e.agent(t, "process", map[string]any{"command": "/bin/sh", "args": []string{"-c", leakScript("SECRET")},
			"env": map[string]string{"SECRET": domain.WriteOnlyValue}})
		claude := e.agent(t, agentcli.Claude, map[string]any{})
		for _, tc := range []struct {
			agent  domain.Agent
			secret string
		}{{proc, vaulted}, {claude, passed}} {
			r, _, err := e.svc.Wakeup(ctx, tc.agent.ID, heartbeat.WakeRequest{Reason: "leak"})
			if err != nil {
				t.Fatal(err)
			}
			r = e.wait(t, r.ID)
			log, _, _, err := st.GetRunLog(ctx, d, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log, "plain:"+domain.WriteOnlyValue) {
				t.Fatalf("%s run %s %q: the script did not run:\n%s", tc.agent.AdapterType, r.Status, r.Error, log)
			}
			for _, f := range secretForms(tc.secret) {
				// A form minus its first and last characters (which
				// depend on the bytes around the value) must be gone.
				if core := f[2 : len(f)-3]; strings.Contains(log, core) || strings.Contains(r.Error, core) {
					t.Errorf("%s run log holds %q (a form of its secret):\n%s\nerror: %s", tc.agent.AdapterType, f, log, r.Error)
				}
			}
		}
		if d.Dialect != db.SQLite {
			return
		}
		backup := filepath.Join(t.TempDir(), "backup.db")
		if err := d.BackupSQLite(ctx, backup); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{passed, vaulted} {
			for _, f := range secretForms(s) {
				if strings.Contains(string(raw), f[2:len(f)-3]) {
					t.Errorf("the backup holds %q", f)
				}
			}
		}
	})
}

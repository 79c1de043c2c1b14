package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/server"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func readiness(t *testing.T, url string) (int, server.Readiness) {
	t.Helper()
	code, b := get(t, url)
	var r server.Readiness
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("GET %s: %d %q: %v", url, code, b, err)
	}
	return code, r
}

// TestProbes: /healthz answers without touching anything, /readyz passes
// every check on a started server and names the failing one (503) when
// the schema is behind the binary; the metrics listener serves /metrics
// and the probes without credentials in authenticated mode, and nothing
// else.
func TestProbes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		cfg := testkit.Config(t, url)
		cfg.DeploymentMode = config.ModeAuthenticated
		cfg.MetricsListen = "127.0.0.1:0"
		inst := testkit.Start(t, cfg)
		base := inst.URL()
		if code, b := get(t, base+"/healthz"); code != 200 || !strings.Contains(string(b), "alive") {
			t.Fatalf("/healthz: %d %s", code, b)
		}
		code, r := readiness(t, base+"/readyz")
		if code != 200 || r.Status != "ok" || len(r.Failing) != 0 {
			t.Fatalf("/readyz: %d %+v", code, r)
		}
		var names []string
		for _, c := range r.Checks {
			names = append(names, c.Name)
		}
		for _, want := range []string{"database", "migrations", "vault", "workers", "draining"} {
			if !slices.Contains(names, want) {
				t.Errorf("/readyz checks %v lack %q", names, want)
			}
		}
		if code, _ := get(t, base+"/api/health"); code != 200 {
			t.Errorf("/api/health: %d", code)
		}
		// The main listener's /metrics wants an administrator here.
		if code, _ := get(t, base+"/metrics"); code != http.StatusForbidden {
			t.Errorf("/metrics on the main listener without a key: %d, want 403", code)
		}
		m := "http://" + inst.MetricsAddr()
		if code, b := get(t, m+"/metrics"); code != 200 || !strings.Contains(string(b), "paperclip_") {
			t.Errorf("/metrics on the metrics listener: %d %.200s", code, b)
		}
		if code, _ := get(t, m+"/healthz"); code != 200 {
			t.Errorf("/healthz on the metrics listener: %d", code)
		}
		if code, _ := get(t, m+"/api/companies"); code != http.StatusNotFound {
			t.Errorf("/api on the metrics listener: %d, want 404", code)
		}

		// The schema falls behind the binary (a migration forgotten).
		ctx := context.Background()
		var v int64
		if err := inst.DB.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if _, err := inst.DB.ExecContext(ctx, `DELETE FROM goose_db_version WHERE version_id = $1`, v); err != nil {
			t.Fatal(err)
		}
		code, r = readiness(t, m+"/readyz")
		if code != http.StatusServiceUnavailable || r.Status != "unavailable" || !slices.Equal(r.Failing, []string{"migrations"}) {
			t.Fatalf("/readyz with a pending migration: %d %+v", code, r)
		}
		if code, _ := get(t, base+"/healthz"); code != 200 {
			t.Errorf("/healthz must not depend on the schema: %d", code)
		}
		if _, err := inst.DB.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, v); err != nil {
			t.Fatal(err)
		}
		if code, r := readiness(t, base+"/readyz"); code != 200 {
			t.Fatalf("/readyz after the migration is back: %d %+v", code, r)
		}
	})
}

// TestMetricsListenMustBePrivate: the unauthenticated metrics listener
// is refused on a wildcard or public address.
func TestMetricsListenMustBePrivate(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:9100": true, "10.1.2.3:9100": true, "[fd00::1]:9100": true,
		"0.0.0.0:9100": false, ":9100": false, "203.0.113.7:9100": false} {
		_, err := config.Load(config.Flags{Home: t.TempDir()}, func(k string) string {
			if k == "PAPERCLIP_METRICS_LISTEN" {
				return addr
			}
			return ""
		})
		if (err == nil) != ok {
			t.Errorf("PAPERCLIP_METRICS_LISTEN=%s: err %v, want ok=%v", addr, err, ok)
		}
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/paperclipai/paperclipai/internal/httpx"
)

// Check is one readiness check's outcome, as /readyz reports it.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Readiness is /readyz's body: "ok" with every check passing, otherwise
// "unavailable" with the failing checks named in Failing.
type Readiness struct {
	Status  string   `json:"status"`
	Checks  []Check  `json:"checks"`
	Failing []string `json:"failing,omitempty"`
}

// Ready runs the readiness checks: the database answers, its schema is
// this binary's (or newer, during a rolling upgrade), the vault master key
// was checked against the database, the workers started, and the process
// is not draining.
func (s *Server) Ready(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var r Readiness
	add := func(name string, err error, okDetail string) {
		c := Check{Name: name, OK: err == nil, Detail: okDetail}
		if err != nil {
			c.Detail = err.Error()
			r.Failing = append(r.Failing, name)
		}
		r.Checks = append(r.Checks, c)
	}
	dbErr := s.DB.PingContext(ctx)
	add("database", dbErr, string(s.DB.Dialect))
	if dbErr != nil {
		add("migrations", errors.New("database unreachable"), "")
	} else if sc, err := s.DB.Schema(ctx); err != nil {
		add("migrations", err, "")
	} else if len(sc.Pending) > 0 {
		add("migrations", fmt.Errorf("%d migration(s) pending (database at %d, binary at %d)", len(sc.Pending), sc.Current, sc.Latest), "")
	} else if sc.Newer() {
		// A newer replica migrated during a rolling upgrade: migrations
		// are additive (docs/deployment.md, "Upgrades"), so this older
		// one keeps serving until it is replaced.
		add("migrations", nil, fmt.Sprintf("database at %d, newer than this binary (%d): rolling upgrade", sc.Current, sc.Latest))
	} else {
		add("migrations", nil, fmt.Sprintf("at %d", sc.Current))
	}
	add("vault", boolErr(s.vaultChecked.Load(), "the master key has not been checked"), "")
	add("workers", boolErr(s.workersStarted.Load(), "not started"), "")
	add("draining", boolErr(!s.draining.Load(), "shutting down: no new runs or deliveries here"), "")
	r.Status = "ok"
	if len(r.Failing) > 0 {
		r.Status = "unavailable"
	}
	return r
}

func boolErr(ok bool, msg string) error {
	if ok {
		return nil
	}
	return errors.New(msg)
}

// healthz answers while the process serves HTTP; it checks nothing else,
// so a liveness probe never restarts the process for a database outage.
func healthz(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

// readyz serves Ready: 200 when ready, 503 naming the failing checks.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	res := s.Ready(r.Context())
	code := http.StatusOK
	if len(res.Failing) > 0 {
		code = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, code, res)
}

// startMetricsListener serves /metrics (without authentication), /healthz
// and /readyz on cfg.MetricsListen, a loopback or private address that
// config.Validate checked: for Prometheus and orchestrator probes, which
// hold no API key.
func (s *Server) startMetricsListener() error {
	if s.Config.MetricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.Config.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen on %s (PAPERCLIP_METRICS_LISTEN): %w", s.Config.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Metrics.Handler())
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	s.metricsLn = ln
	s.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: MaxHeaderBytes}
	go func() { _ = s.metricsSrv.Serve(ln) }()
	return nil
}

// MetricsAddr is the bound address of the metrics listener, or "" without one.
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// Alive reports whether the process can do its work: the database
// answers within d. The systemd watchdog is fed only while it does.
func (s *Server) Alive(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return s.DB.PingContext(ctx) == nil
}

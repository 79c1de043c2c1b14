// Package server assembles a control-plane process: configuration, the
// database, the vault, the heartbeat scheduler, the HTTP API, metrics and
// graceful shutdown.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/logging"
	"github.com/paperclipai/paperclipai/internal/mcpserver"
	"github.com/paperclipai/paperclipai/internal/metrics"
	"github.com/paperclipai/paperclipai/internal/notifications"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/retention"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/ui"
	"github.com/paperclipai/paperclipai/internal/vault"
	"github.com/paperclipai/paperclipai/internal/websec"
)

// Server is a running control-plane process.
type Server struct {
	Config    config.Config
	DB        *db.DB
	Store     *store.Store
	Vault     *vault.Vault
	Heartbeat *heartbeat.Service
	API       *api.Server
	Metrics   *metrics.Metrics
	Email     *email.Service
	// Outbound is the send side's API (accept, read, resolve, receipts);
	// SendWorker executes the accepted sends.
	Outbound *outbound.Service
	// Notifications delivers company notification webhooks.
	Notifications *notifications.Service
	SendWorker    *outbound.Worker
	Inbound       *inbound.Worker
	MCP           *mcpserver.Server
	// Retention applies the companies' data retention settings.
	Retention *retention.Service
	Logger    *slog.Logger
	Redactor  *logging.Redactor
	Mux       *http.ServeMux

	attachments attachment.Store
	// workers are the background services started after the heartbeat,
	// in start order; Shutdown stops them in reverse.
	workers   []Service
	httpSrv   *http.Server
	listener  net.Listener
	lock      *os.File
	serveDone chan error

	// Readiness (probes.go): set once each step of Start is done, and
	// draining once Shutdown begins.
	vaultChecked, workersStarted, draining atomic.Bool
	// inboundStopped is set when Shutdown stopped the inbound worker
	// ahead of the others (to hand its sockets over at once).
	inboundStopped bool
	metricsSrv     *http.Server
	metricsLn      net.Listener
}

// Service is a background part of the process (the shape of River's
// startstop.Service).
type Service interface {
	// Start returns once the service runs; ctx bounds the start only.
	Start(ctx context.Context) error
	// Shutdown stops the service and waits for it, at most until ctx ends.
	Shutdown(ctx context.Context) error
}

var (
	_ Service = (*heartbeat.Service)(nil)
	_ Service = (*inbound.Worker)(nil)
	_ Service = (*outbound.Worker)(nil)
	_ Service = (*notifications.Service)(nil)
)

// Options tune a server beyond its Config.
type Options struct {
	// LogOutput receives the structured logs (default stderr).
	LogOutput io.Writer
	// AgentBinary is the paperclipai executable put on every run's PATH
	// (default: this process's own executable).
	AgentBinary string
}

// Start opens everything, starts the workers and begins serving; it returns
// once the listener is bound. Its steps: the home and its lock
// (openHome), the data (openData), the listener, the services
// (newServices), the HTTP surface (newHTTP), the background work
// (startBackground) and serving (serve).
func Start(ctx context.Context, cfg config.Config, opts Options) (*Server, error) {
	if opts.LogOutput == nil {
		opts.LogOutput = os.Stderr
	}
	red := logging.NewRedactor()
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	logger := logging.New(opts.LogOutput, cfg.LogJSON, level, red)
	s := &Server{Config: cfg, Logger: logger, Redactor: red, serveDone: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			s.closeResources()
		}
	}()
	// One process per SQLite home (see openHome); a PostgreSQL database is
	// shared by replicas.
	exclusive := cfg.DatabaseURL == ""
	if err := s.openHome(exclusive); err != nil {
		return nil, err
	}
	key, err := vault.LoadMasterKey(cfg.MasterKeyFile, cfg.MasterKeyB64)
	if err != nil {
		return nil, err
	}
	if err := s.openData(ctx, key); err != nil {
		return nil, err
	}
	s.Metrics = metrics.New()
	if s.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hostname, _ := os.Hostname()
	runnerID := fmt.Sprintf("%s:%d:%s", hostname, os.Getpid(), store.NewID()[:8])
	az, err := s.newServices(opts, runnerID, exclusive)
	if err != nil {
		return nil, err
	}
	handler, webUI, err := s.newHTTP(az, key)
	if err != nil {
		return nil, err
	}
	if err := s.startBackground(ctx); err != nil {
		return nil, err
	}
	s.serve(handler, webUI)
	ok = true
	return s, nil
}

// openHome creates the instance directory and, when the database is this
// home's own SQLite file (exclusive), takes the home's lock.
func (s *Server) openHome(exclusive bool) error {
	if err := os.MkdirAll(filepath.Join(s.Config.Home, "instance"), 0o700); err != nil {
		return fmt.Errorf("create home: %w", err)
	}
	if !exclusive {
		return nil
	}
	// One process per SQLite home: two schedulers on one file would
	// double-start runs, and a crash is then recognisable at start.
	lock, err := lockHome(s.Config.Home)
	if err != nil {
		return err
	}
	s.lock = lock
	return nil
}

// newServices builds the services in dependency order: attachments, the
// email service, the run scheduler (newHeartbeat), the API, notification
// webhooks, the email channel (newEmailChannel) and data retention,
// collecting their background workers in start order. It returns the
// authorization service the HTTP surface shares.
func (s *Server) newServices(opts Options, runnerID string, exclusive bool) (*authz.Service, error) {
	cfg, logger := s.Config, s.Logger
	s.attachments = attachment.Store{DB: s.Store, Dir: cfg.AttachmentsDir(), MaxBytes: cfg.AttachmentMaxBytes, Allowed: cfg.AllowedAttachments,
		Log: logger.With("component", "attachments")}
	s.workers = append(s.workers, &attachmentBackfill{store: s.attachments, log: logger.With("component", "attachments")})
	az := &authz.Service{Store: s.Store}
	amClient, err := agentmail.New(agentmail.Options{BaseURL: cfg.AgentMailAPIURL, Timeout: cfg.AgentMailTimeout})
	if err != nil {
		return nil, fmt.Errorf("agentmail client: %w", err)
	}
	// The email pipelines' work signals: each worker waits on its own, and
	// the services that create its work hold it (see newEmailChannel).
	receiveWork, sendWork := notify.New(), notify.New()
	s.Email = email.New(email.Options{Store: s.Store, Vault: s.Vault, Authz: az, Config: cfg, Client: amClient,
		Log: logger.With("component", "email"), Holder: runnerID, Changed: []notify.Signal{receiveWork, sendWork},
		// s.Outbound is built below (it needs s.Email); a disconnect only
		// happens once the server serves.
		Disconnected: func(ctx context.Context, tx *sql.Tx, endpointID string) error {
			return s.Outbound.SettleDisconnected(ctx, tx, endpointID)
		},
		// s.Notifications is built below too; the RulesWorker calls this
		// only once the workers run.
		BounceRateHigh: func(ctx context.Context, endpointID string, sends, bounced int) {
			s.bounceRateHigh(ctx, endpointID, sends, bounced)
		}})
	if s.Heartbeat, err = s.newHeartbeat(opts, "http://"+s.listener.Addr().String()+"/api", runnerID, exclusive); err != nil {
		return nil, err
	}
	s.API = api.New(api.Deps{Config: cfg, Store: s.Store, Attachments: s.attachments, Authz: az, Policy: &policy.Service{Store: s.Store},
		Heartbeat: s.Heartbeat, Vault: s.Vault, Metrics: s.Metrics, Logger: logger.With("component", "api"),
		StopCompanyEmail: s.Email.DisconnectCompany})
	// Company notification webhooks, before the email channel, whose send
	// side emits review and failure events through them.
	s.Notifications = notifications.New(s.Store, az, s.Vault, logger.With("component", "notifications"), cfg.RequestBodyMaxBytes)
	s.Notifications.Routes(s.API)
	s.workers = append(s.workers, s.Notifications, &healthWatch{email: s.Email, notes: s.Notifications, st: s.Store,
		every: orDefault(cfg.NotificationWatchInterval, defaultWatchEvery)})
	s.newEmailChannel(az, amClient, runnerID, exclusive, receiveWork, sendWork)
	// Data retention: the owners' settings API and the daily purge.
	s.Retention = &retention.Service{Store: s.Store, WorkspacesDir: cfg.WorkspacesDir()}
	s.Retention.Routes(s.API, az)
	s.workers = append(s.workers, &retention.Job{Service: s.Retention, Holder: runnerID, Log: logger.With("component", "retention")})
	return az, nil
}

// serve begins serving handler on the bound listener and logs the start.
func (s *Server) serve(handler http.Handler, webUI *ui.UI) {
	cfg, logger, ln := s.Config, s.Logger, s.listener
	// No ReadTimeout or WriteTimeout: MCP responses stream and attachment
	// downloads may be slow; the guard bounds each request body instead.
	s.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: orDefault(cfg.HeaderReadTimeout, 10*time.Second),
		IdleTimeout: orDefault(cfg.IdleTimeout, 2*time.Minute), MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	// Open UI event streams end when shutdown begins (it does not cancel
	// request contexts itself).
	s.httpSrv.RegisterOnShutdown(webUI.Stop)
	go func() { s.serveDone <- s.httpSrv.Serve(ln) }()
	logger.Info("paperclipai started", "listen", ln.Addr().String(), "database", string(s.DB.Dialect),
		"mode", cfg.DeploymentMode, "home", cfg.Home)
	if cfg.InsecureLocalWebhooks {
		logger.Warn("insecure local webhooks: webhook events arrive over plain HTTP on loopback; for trying webhooks with the local emulator only",
			"publicUrl", cfg.PublicURL)
	}
}

// openData opens and migrates the database, ensures the local board user
// and opens the vault, refusing a master key other replicas do not share.
func (s *Server) openData(ctx context.Context, key []byte) error {
	cfg, logger := s.Config, s.Logger
	var err error
	if s.DB, err = db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath()); err != nil {
		return err
	}
	if !cfg.ManualMigrate {
		if err := s.DB.Migrate(ctx, logger); err != nil {
			return err
		}
	} else if err := s.DB.CheckCurrent(ctx); err != nil {
		// PAPERCLIP_AUTO_MIGRATE=false: an operator migrates explicitly
		// (`paperclipai admin migrate`), and serving an old schema would
		// fail on the first new column.
		return err
	}
	s.Store = store.New(s.DB)
	if _, err := s.Store.EnsureUser(ctx, s.DB, store.LocalBoardEmail, "Local board", true); err != nil {
		return err
	}
	if s.Vault, err = vault.New(key, s.Store); err != nil {
		return err
	}
	// A replica with another master key would fail on every secret, and
	// silently (docs/operations.md, "Replicas and the master key").
	if err := s.Vault.CheckMasterKey(ctx); err != nil {
		logger.Error("refusing to start", "err", err)
		return err
	}
	s.vaultChecked.Store(true)
	s.Vault.OnResolve = s.Redactor.Add
	return nil
}

// newHeartbeat builds the run scheduler: its adapters (sandboxed runs
// reach the API through the bridge to s.Mux), the identity sandboxes run
// as, and the run metrics. apiURL is the API as runs reach it.
func (s *Server) newHeartbeat(opts Options, apiURL, runnerID string, exclusive bool) (*heartbeat.Service, error) {
	cfg, logger := s.Config, s.Logger
	// Sandboxes never run as root: a root server starts them as the
	// dedicated unprivileged identity.
	sandboxUser, err := sandbox.HostIdentity()
	if err != nil {
		return nil, err
	}
	binary := opts.AgentBinary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the paperclipai executable: %w", err)
		}
	}
	return heartbeat.New(heartbeat.Options{
		Store: s.Store, Logger: logger.With("component", "heartbeat"), RunnerID: runnerID,
		APIURL: apiURL,
		Adapters: s.adapters(sandbox.Bridger(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.Mux.ServeHTTP(w, r) }),
			s.publicationTask, logger.With("component", "sandbox")), logger),
		LeaseTTL: cfg.RunLeaseTTL, MaxConcurrent: cfg.MaxConcurrentRuns, LogMaxBytes: cfg.RunLogMaxBytes,
		ExclusiveDatabase: exclusive, WorkspacesDir: cfg.WorkspacesDir(), RunsDir: cfg.RunsDir(),
		Home: cfg.Home, Hidden: cfg.SandboxHidden(),
		SandboxUser: sandboxUser, Binary: binary, BinDir: filepath.Join(cfg.Home, "instance", "bin"),
		Prepare: s.Email.PrepareRun,
		// Called inside wakes, which happen once the server serves (after
		// s.Notifications is set below).
		BudgetExceeded: s.budgetExceeded,
		Secrets: func(ctx context.Context, a domain.Agent) (map[string]string, error) {
			return s.Vault.ResolveBound(ctx, s.Store.DB, domain.SecretTargetAgent, a.ID)
		},
		Observer: heartbeat.Observer{
			RunStarted: func(d time.Duration) { s.Metrics.RunsStarted.Inc(); s.Metrics.WakeToStart.Observe(d.Seconds()) },
			RunFinished: func(status string, d time.Duration) {
				s.Metrics.RunsFinished.WithLabelValues(status).Inc()
				s.Metrics.RunDuration.Observe(d.Seconds())
			},
		},
	}), nil
}

// newHTTP builds what the listener serves once every route is registered:
// the API behind the request guard, /mcp, the probes and metrics, and the
// web UI (an in-process client of the API). It returns the guarded handler
// and the UI, whose event streams end at shutdown.
func (s *Server) newHTTP(az *authz.Service, key []byte) (http.Handler, *ui.UI, error) {
	cfg, logger := s.Config, s.Logger
	apiHandler := s.API.Handler()
	s.MCP = &mcpserver.Server{Store: s.Store, Heartbeat: s.Heartbeat, Email: s.Email, Outbound: s.Outbound, Authz: az,
		API: apiHandler, Log: logger.With("component", "mcp")}

	guard, err := newGuard(cfg)
	if err != nil {
		return nil, nil, err
	}
	s.Mux = http.NewServeMux()
	s.Mux.Handle("/api/", guard.API(apiHandler, websec.APIOptions{Multipart: api.MultipartRoutes}))
	s.Mux.Handle("/mcp", s.MCP.Handler())
	s.Mux.Handle("GET /metrics", s.metricsHandler())
	s.Mux.HandleFunc("GET /healthz", healthz)
	s.Mux.HandleFunc("GET /readyz", s.readyz)
	webUI, err := ui.New(ui.Deps{Config: cfg, API: apiHandler, Store: s.Store, MasterKey: key, Redact: s.Redactor.Add,
		Logger: logger.With("component", "ui")})
	if err != nil {
		return nil, nil, err
	}
	s.Mux.Handle("/", webUI)
	return guard.Wrap(s.Mux), webUI, nil
}

// startBackground starts the heartbeat, then the workers in order, then
// the metrics listener; on a failure it stops what it started.
func (s *Server) startBackground(ctx context.Context) error {
	if err := s.Heartbeat.Start(ctx); err != nil {
		return err
	}
	for i, w := range s.workers {
		if err := w.Start(ctx); err != nil {
			_ = s.stopWorkers(context.Background(), i)
			_ = s.Heartbeat.Shutdown(context.Background())
			return err
		}
	}
	s.workersStarted.Store(true)
	if err := s.startMetricsListener(); err != nil {
		_ = s.stopWorkers(context.Background(), len(s.workers))
		_ = s.Heartbeat.Shutdown(context.Background())
		return err
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// MaxHeaderBytes bounds a request's header block; larger requests get 431.
const MaxHeaderBytes = 64 << 10

// newGuard builds the request guard of the whole mux: in local_trusted
// mode only local Host names (and the public URL's host, for webhooks
// through a tunnel) are served; the public URL is a trusted origin.
func newGuard(cfg config.Config) (*websec.Guard, error) {
	var origins []string
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("public URL %q: no host", cfg.PublicURL)
		}
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	return websec.New(websec.Options{LocalOnly: cfg.DeploymentMode == config.ModeLocalTrusted,
		TrustedOrigins: origins, BodyReadTimeout: cfg.BodyReadTimeout})
}

// publicationTask resolves a send's company and task for the sandbox
// bridge, which lets a run read only its own task's deliveries.
func (s *Server) publicationTask(ctx context.Context, id string) (string, string, error) {
	if !store.ValidID(id) {
		return "", "", store.ErrNotFound
	}
	p, err := s.Store.GetPublication(ctx, s.Store.DB, id)
	if err != nil {
		return "", "", err
	}
	return p.CompanyID, p.IssueID, nil
}

// Addr is the bound listen address.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// metricsHandler serves /metrics: open on loopback in local_trusted mode,
// otherwise only to instance administrators.
func (s *Server) metricsHandler() http.Handler {
	h := s.Metrics.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := api.Authenticate(r, s.Store, s.Heartbeat, s.Config.DeploymentMode)
		if err != nil || authz.RequireInstanceAdmin(a) != nil {
			http.Error(w, `{"error":"metrics require an instance administrator"}`, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Shutdown stops accepting requests, lets in-flight requests and runs
// finish within the grace period, then releases everything.
func (s *Server) Shutdown(ctx context.Context) error {
	grace := s.Config.ShutdownGrace
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	var errs []error
	// Draining: /readyz fails from now on, so a load balancer stops
	// sending new requests here.
	s.draining.Store(true)
	// Receiving first: closing this process's sockets and releasing its
	// socket and thread leases lets another replica take every inbox at
	// once, instead of after the leases expire or after the runs below
	// finish; unprocessed deliveries stay in the database for it.
	if s.Inbound != nil {
		s.inboundStopped = true
		if err := s.Inbound.Shutdown(gctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Then runs, while the API still serves: running agents call back
	// into it (comments, email actions) until they finish. No new run
	// starts here from now on.
	if err := s.Heartbeat.Shutdown(gctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.httpSrv.Shutdown(gctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	// Then the background workers, newest first: in-flight requests (which
	// queue their work) are done, and the database is still open.
	errs = append(errs, s.stopWorkers(gctx, len(s.workers)))
	if s.metricsSrv != nil {
		_ = s.metricsSrv.Shutdown(gctx)
	}
	s.closeResources()
	s.Logger.Info("paperclipai stopped")
	return errors.Join(errs...)
}

// stopWorkers shuts down the first n workers in reverse start order.
func (s *Server) stopWorkers(ctx context.Context, n int) error {
	var errs []error
	for i := n - 1; i >= 0; i-- {
		if s.inboundStopped && s.workers[i] == Service(s.Inbound) {
			continue
		}
		if err := s.workers[i].Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Done reports the HTTP server's exit.
func (s *Server) Done() <-chan error { return s.serveDone }

func (s *Server) closeResources() {
	if s.listener != nil && s.httpSrv == nil {
		s.listener.Close()
	}
	if s.metricsLn != nil && s.httpSrv == nil {
		s.metricsLn.Close()
	}
	if s.DB != nil {
		s.DB.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// ErrHomeLocked means another process already serves this home directory.
var ErrHomeLocked = errors.New("another paperclipai process is using this home directory (SQLite allows one server per home; use PostgreSQL for several replicas)")

// LockHome takes the home's exclusive lock, as a starting server does;
// ErrHomeLocked means a server (or another command holding it) runs on
// the home. Closing the file releases it.
func LockHome(home string) (*os.File, error) { return lockHome(home) }

func lockHome(home string) (*os.File, error) {
	path := filepath.Join(home, "instance", "paperclip.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock home: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrHomeLocked
		}
		return nil, fmt.Errorf("lock home: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteString(strings.TrimSpace(fmt.Sprint(os.Getpid())) + "\n")
	return f, nil
}

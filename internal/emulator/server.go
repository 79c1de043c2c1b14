// Package emulator is a wire-faithful, in-memory emulator of the AgentMail
// provider API: REST and WebSocket under /v0, Svix-signed webhooks, inbound
// mail over SMTP or a control endpoint, and a test control API under
// /_emulator/. It is the only AgentMail fake used by the project's tests and
// is also served standalone by "paperclipai emulator".
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// DefaultDomain is the domain of inboxes created without an explicit domain.
const DefaultDomain = "agentmail.to"

// DefaultDeliveryDelay is the time between message.sent and the delivery
// receipt (message.delivered, message.bounced, ...) of a send.
const DefaultDeliveryDelay = 200 * time.Millisecond

// Options configures an emulator started with Start.
type Options struct {
	// Listen is the HTTP listen address; empty means 127.0.0.1:0.
	Listen string
	// SMTPListen is the SMTP listen address; empty disables SMTP.
	SMTPListen string
	// APIKeys are pre-created organization-scoped keys (am_...). All of them
	// belong to one default organization.
	APIKeys []string
	// DeliveryDelay is the delay before delivery receipts; zero means
	// DefaultDeliveryDelay, a negative value means no delay.
	DeliveryDelay time.Duration
	// Logger receives diagnostic logs; nil discards them.
	Logger *slog.Logger
	// WebhookTransport carries webhook deliveries; nil means a clone of
	// http.DefaultTransport. Tests pass the transport of a loopback TLS
	// server standing in front of the receiver (the public HTTPS URL).
	WebhookTransport http.RoundTripper
	// StateFile, when set, keeps the mailboxes across restarts: the state
	// saved there is loaded at start, and every change is written back
	// shortly after it happens and at Close. Organizations, keys, inboxes,
	// threads, messages, webhooks, domains, the outbox and completed
	// idempotent sends are kept; test controls (faults, recorded requests,
	// webhook attempts, settings) are not.
	StateFile string
}

// Server is a running emulator. All methods are safe for concurrent use.
type Server struct {
	log      *slog.Logger
	httpSrv  *http.Server
	ln       net.Listener
	smtpSrv  *smtp.Server
	smtpLn   net.Listener
	baseURL  string
	ctx      context.Context
	cancel   context.CancelFunc
	bg       sync.WaitGroup // webhook deliveries and scheduled receipts
	bgMu     sync.Mutex     // orders bg.Add against bg.Wait in Close
	bgClosed bool
	hub      *hub
	closeMu  sync.Mutex
	closed   bool
	closeErr error

	// mu guards all provider state below. Handlers hold it only for
	// in-memory work, never across network I/O, so a slow client or a
	// stalled fault cannot block other requests.
	mu    sync.Mutex
	state state

	// pageMax is the largest page a list returns (0: the default
	// maxLimit). It is atomic because list parameters are parsed before
	// the state lock is taken.
	pageMax atomic.Int64
	// requestCount counts every recorded API request (RequestCount).
	requestCount atomic.Int64

	webhooks *http.Client

	// The state file (Options.StateFile): dirty says a change is not
	// written yet, saveWake wakes the saver, saveMu serializes writers.
	stateFile string
	dirty     atomic.Bool
	saveWake  chan struct{}
	saveMu    sync.Mutex
	saverDone chan struct{}
}

// Start listens on opts.Listen (and opts.SMTPListen when set) and serves the
// emulator until Close is called or ctx ends.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	delay := opts.DeliveryDelay
	switch {
	case delay == 0:
		delay = DefaultDeliveryDelay
	case delay < 0:
		delay = 0
	}
	for _, k := range opts.APIKeys {
		if !strings.HasPrefix(k, "am_") || strings.ContainsAny(k, " \t\r\n") {
			return nil, fmt.Errorf("start emulator: api key must start with am_ and contain no whitespace")
		}
	}

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("start emulator: listen %s: %w", opts.Listen, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:      logger,
		ln:       ln,
		baseURL:  "http://" + ln.Addr().String(),
		ctx:      sctx,
		cancel:   cancel,
		webhooks: newWebhookClient(opts.WebhookTransport),
		hub:      newHub(),
	}
	s.state.init(delay)
	if opts.StateFile != "" {
		if err := s.loadStateFile(opts.StateFile); err != nil {
			cancel()
			ln.Close()
			return nil, fmt.Errorf("start emulator: %w", err)
		}
		s.stateFile, s.saveWake, s.saverDone = opts.StateFile, make(chan struct{}, 1), make(chan struct{})
	}
	s.mu.Lock()
	var org *organization
	for _, k := range opts.APIKeys {
		if s.state.keyBySecret[k] != nil {
			continue // restored from the state file
		}
		if org == nil {
			org = s.createOrgLocked("default")
		}
		s.addKeyLocked(org.id, "", "", "cli", k, nil)
		s.markDirty()
	}
	s.mu.Unlock()
	if s.stateFile != "" {
		go s.saveLoop()
	}

	s.httpSrv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return sctx },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("emulator http server stopped", "err", err)
		}
	}()

	if opts.SMTPListen != "" {
		sl, err := net.Listen("tcp", opts.SMTPListen)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("start emulator: smtp listen %s: %w", opts.SMTPListen, err)
		}
		s.smtpLn = sl
		s.smtpSrv = newSMTPServer(s)
		go func() {
			if err := s.smtpSrv.Serve(sl); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
				s.log.Error("emulator smtp server stopped", "err", err)
			}
		}()
	}

	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-sctx.Done():
		}
	}()
	s.log.Info("agentmail emulator listening", "url", s.baseURL, "smtp", s.SMTPAddr())
	return s, nil
}

// URL returns the base URL, e.g. "http://127.0.0.1:3199". The REST API is at
// URL()+"/v0" and the WebSocket at "ws://127.0.0.1:3199/v0".
func (s *Server) URL() string { return s.baseURL }

// APIURL returns the REST base URL, URL()+"/v0".
func (s *Server) APIURL() string { return s.baseURL + "/v0" }

// WebSocketURL returns the WebSocket endpoint, ws://host:port/v0.
func (s *Server) WebSocketURL() string { return "ws" + strings.TrimPrefix(s.baseURL, "http") + "/v0" }

// SMTPAddr returns the SMTP listen address, or "" when SMTP is disabled.
func (s *Server) SMTPAddr() string {
	if s.smtpLn == nil {
		return ""
	}
	return s.smtpLn.Addr().String()
}

// Close stops the listeners, drops live WebSockets, cancels pending webhook
// deliveries and receipts, and waits for them to finish.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.closed = true
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	s.cancel()
	var errs []error
	if s.smtpSrv != nil {
		if err := s.smtpSrv.Close(); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("close smtp: %w", err))
		}
	}
	s.hub.dropAll()
	shCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.httpSrv.Shutdown(shCtx); err != nil {
		// Stalled responses and hijacked WebSockets do not finish on their
		// own; force them closed.
		_ = s.httpSrv.Close()
	}
	s.bg.Wait()
	if s.stateFile != "" {
		<-s.saverDone
		if err := s.saveStateFile(); err != nil {
			errs = append(errs, err)
		}
	}
	s.closeErr = errors.Join(errs...)
	return s.closeErr
}

// goBackground runs fn on a tracked goroutine unless the server is closing.
// Callers may hold s.mu.
func (s *Server) goBackground(fn func(ctx context.Context)) {
	// WaitGroup.Add must not race with Wait once the count may be zero, so
	// registration is serialized with Close through bgMu.
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// Receipts and webhook attempts may change the mailboxes.
		defer s.markDirty()
		fn(s.ctx)
	}()
}

// sleepCtx waits for d or until ctx ends; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

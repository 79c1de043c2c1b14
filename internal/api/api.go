// Package api is the control plane's JSON HTTP API under /api: strict
// decoding, bounded bodies, uniform error bodies, request ids in logs, and
// authentication into an authz.Actor on every request.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/metrics"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/vault"
	"github.com/paperclipai/paperclipai/internal/websec"
)

// Deps are the services the API calls.
type Deps struct {
	Config config.Config
	Store  *store.Store
	// Attachments is the content-addressed attachment store.
	Attachments attachment.Store
	Authz       *authz.Service
	Policy      *policy.Service
	Heartbeat   *heartbeat.Service
	Vault       *vault.Vault
	Metrics     *metrics.Metrics
	Logger      *slog.Logger
	// StopCompanyEmail disconnects every inbox of a company that is being
	// deleted (the email service's DisconnectCompany); nil without email.
	StopCompanyEmail func(ctx context.Context, a authz.Actor, companyID string) error
}

// Server serves the API.
type Server struct {
	Deps
	cfg config.Config
	log *slog.Logger
	mux *http.ServeMux

	publicMu sync.RWMutex
	public   map[string]bool // patterns registered with HandlePublic
}

// New builds the API server and its routes.
func New(d Deps) *Server {
	s := &Server{Deps: d, cfg: d.Config, log: d.Logger, mux: http.NewServeMux(), public: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.routes()
	return s
}

var _ httpx.Router = (*Server)(nil)

// Handle registers an authenticated route; the handler's error is written
// with the API's error mapping.
func (s *Server) Handle(pattern string, h httpx.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// HandlePublic registers a route that is served without an actor: health,
// and provider webhooks, which authenticate by a signature over the body.
func (s *Server) HandlePublic(pattern string, h httpx.HandlerFunc) {
	s.publicMu.Lock()
	s.public[pattern] = true
	s.publicMu.Unlock()
	s.Handle(pattern, h)
}

// isPublic reports whether r is routed to a HandlePublic route.
func (s *Server) isPublic(r *http.Request) bool {
	_, pattern := s.mux.Handler(r)
	s.publicMu.RLock()
	defer s.publicMu.RUnlock()
	return s.public[pattern]
}

// Handler returns the full HTTP handler with middleware.
func (s *Server) Handler() http.Handler {
	return s.middleware(s.mux)
}

type ridKey struct{}

func requestID(r *http.Request) string {
	if v, ok := r.Context().Value(ridKey{}).(string); ok {
		return v
	}
	return ""
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// middleware assigns a request id, recovers panics, authenticates, and
// records logs and metrics.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid)
		r = r.WithContext(context.WithValue(r.Context(), ridKey{}, rid))
		rec := &statusRecorder{ResponseWriter: w}
		// A request with a preset actor came from this process (the web
		// UI rendering a page through internal/apiclient), not from the
		// network: it is counted apart and logged at debug level, so page
		// views do not read as API traffic.
		via, level := viaHTTP, logLevel
		if _, preset := presetActor(r.Context()); preset {
			via, level = viaInProcess, inProcessLogLevel
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "requestId", rid, "path", r.URL.Path, "panic", p)
				if rec.status == 0 {
					s.writeError(rec, r, errors.New("panic"))
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			d := time.Since(start)
			if s.Metrics != nil {
				s.Metrics.HTTPRequests.WithLabelValues(route, r.Method, http.StatusText(rec.status), via).Inc()
				s.Metrics.HTTPDuration.WithLabelValues(route, via).Observe(d.Seconds())
			}
			s.log.Log(r.Context(), level(rec.status), "http request", "requestId", rid, "method", r.Method,
				"route", route, "status", rec.status, "durationMs", d.Milliseconds(), "via", via)
		}()
		// Public routes (health, signed provider webhooks) authenticate
		// differently or not at all, so they get no actor.
		if strings.HasPrefix(r.URL.Path, "/api/") && !s.isPublic(r) {
			actor, preset := presetActor(r.Context())
			if !preset {
				var err error
				if actor, err = s.authenticate(r); err != nil {
					s.writeError(rec, r, err)
					return
				}
			}
			r = r.WithContext(authz.WithActor(r.Context(), actor))
		}
		next.ServeHTTP(rec, r)
	})
}

// authenticate resolves the request's credential into an actor.
func (s *Server) authenticate(r *http.Request) (authz.Actor, error) {
	return Authenticate(r, s.Store, s.Heartbeat, s.cfg.DeploymentMode)
}

// Authenticate resolves a request's credential into an actor: a run token
// (pcr_…) is an agent acting in its run; a board key (pcb_…) is its user; no
// credential is the local board in local_trusted mode, from a loopback peer
// that named the server by a local Host (so not through a tunnel or proxy
// that forwards a public name).
func Authenticate(r *http.Request, st *store.Store, hb *heartbeat.Service, mode string) (authz.Actor, error) {
	ctx := r.Context()
	h := r.Header.Get("Authorization")
	if h == "" {
		if mode == config.ModeLocalTrusted && isLoopbackRemote(r.RemoteAddr) && websec.IsLocalHost(r.Host) {
			u, err := st.GetUserByEmail(ctx, st.DB, store.LocalBoardEmail)
			if err != nil {
				return authz.Actor{}, err
			}
			return authz.Actor{Kind: authz.KindBoard, UserID: u.ID, IsInstanceAdmin: true, LocalBoard: true}, nil
		}
		return authz.Actor{}, authz.ErrUnauthenticated
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || token == "" {
		return authz.Actor{}, authz.ErrUnauthenticated
	}
	switch {
	case strings.HasPrefix(token, "pcr_") && hb != nil:
		run, agent, err := hb.AuthenticateToken(ctx, token)
		if err != nil {
			return authz.Actor{}, authz.ErrUnauthenticated
		}
		return authz.Actor{Kind: authz.KindAgent, Agent: &agent, Run: &run,
			RunHeaderMatches: r.Header.Get("X-Paperclip-Run-Id") == run.ID}, nil
	case strings.HasPrefix(token, "pcb_"):
		k, err := st.LookupBoardKey(ctx, st.DB, store.HashToken(token))
		if err != nil {
			return authz.Actor{}, authz.ErrUnauthenticated
		}
		u, err := st.GetUser(ctx, st.DB, k.UserID)
		if err != nil {
			return authz.Actor{}, authz.ErrUnauthenticated
		}
		// A failure to note the use (a busy database) must not refuse a
		// valid key; the next use writes it.
		_ = st.NoteBoardKeyUsed(ctx, st.DB, k)
		return authz.Actor{Kind: authz.KindBoard, UserID: u.ID, IsInstanceAdmin: u.IsInstanceAdmin, KeyCompanyID: k.CompanyID}, nil
	}
	return authz.Actor{}, authz.ErrUnauthenticated
}

func isLoopbackRemote(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Store.DB.PingContext(ctx); err != nil {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": string(s.Store.DB.Dialect), "version": buildinfo.Version})
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": string(s.Store.DB.Dialect), "version": buildinfo.Version})
	return nil
}

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Grant is the authority a bridge lends its sandboxed run: exactly that of
// the run's own token, narrowed to one company and one task.
type Grant struct {
	// Token is the run-scoped bearer token; it dies with the run.
	Token string
	// RunID is sent as X-Paperclip-Run-Id.
	RunID string
	// CompanyID and TaskID are the run's company and task (TaskID may be
	// empty for runs without a task; task routes are then refused).
	CompanyID string
	TaskID    string
}

// route is one allowlisted operation; check validates its path values
// against the grant.
type route struct {
	pattern string
	check   func(r *http.Request, g Grant) bool
}

func sameTask(r *http.Request, g Grant) bool {
	return g.TaskID != "" && r.PathValue("issueId") == g.TaskID
}

func sameCompany(r *http.Request, g Grant) bool {
	return r.PathValue("companyId") == g.CompanyID
}

// allowed is the whole API surface reachable from a sandbox: the run's task
// and its comments, and the agent's explicit email actions (reference
// "Sandbox execution"). Mailbox setup, credential inspection, address
// checks, reconnect, pause/resume/disconnect and delivery resolution are
// deliberately absent: they are operator actions, and a low-trust agent
// processing untrusted mail must not be able to reach them even if the
// controller's own checks were to regress.
var allowed = []route{
	{"GET /api/issues/{issueId}", sameTask},
	{"PATCH /api/issues/{issueId}", sameTask},
	{"GET /api/issues/{issueId}/comments", sameTask},
	{"POST /api/issues/{issueId}/comments", sameTask},
	{"GET /api/companies/{companyId}/email/inboxes", sameCompany},
	{"GET /api/companies/{companyId}/email/tasks/{issueId}", sameCompany},
	{"POST /api/companies/{companyId}/email/send", sameCompany},
	{"GET /api/companies/{companyId}/email/deliveries/{publicationId}", sameCompany},
}

// maxBody caps a request body passing the bridge (email sends are the
// largest allowed request; attachments are uploaded by reference).
const maxBody = 4 << 20

// Handler returns the bridge's HTTP handler: allowlisted requests are
// forwarded to api with the grant's credentials; everything else gets 403.
func Handler(api http.Handler, g Grant) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range allowed {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if !rt.check(r, g) {
				deny(w)
				return
			}
			forward(api, g, w, r)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { deny(w) })
	return mux
}

func deny(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "not available inside the sandbox"})
}

// forward passes r to api as the run. Client-supplied credentials are
// dropped and the grant's injected, so the sandbox can neither borrow a
// stronger identity nor act as a different run; the remote address is set
// to a non-loopback value so local_trusted mode never treats a sandbox
// request as the local board.
func forward(api http.Handler, g Grant, w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.Header.Del("Cookie")
	out.Header.Del("Forwarded")
	out.Header.Del("X-Forwarded-For")
	out.Header.Set("Authorization", "Bearer "+g.Token)
	out.Header.Set("X-Paperclip-Run-Id", g.RunID)
	out.RemoteAddr = "sandbox"
	out.Body = http.MaxBytesReader(w, r.Body, maxBody)
	api.ServeHTTP(w, out)
}

// Bridge serves one sandboxed run's API socket.
type Bridge struct {
	dir    string
	socket string
	srv    *http.Server
	done   chan struct{}
}

// StartBridge listens on a fresh unix socket in a private (0700) temporary
// directory and serves Handler(api, g) on it until Close. The socket lives
// outside the task directory: the agent can write there, and the server
// must not create files through paths the agent controls.
func StartBridge(api http.Handler, g Grant, log *slog.Logger) (*Bridge, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "paperclip-bridge-")
	if err != nil {
		return nil, fmt.Errorf("sandbox bridge: %w", err)
	}
	socket := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox bridge: listen: %w", err)
	}
	b := &Bridge{dir: dir, socket: socket, done: make(chan struct{}),
		srv: &http.Server{Handler: Handler(api, g), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("sandbox bridge stopped", "err", err)
		}
	}()
	return b, nil
}

// Socket is the host path of the bridge socket (bind it at SocketPath).
func (b *Bridge) Socket() string { return b.socket }

// Close stops serving (in-flight requests get a short grace) and removes
// the socket directory.
func (b *Bridge) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, b.srv.Close())
	}
	<-b.done
	return errors.Join(err, os.RemoveAll(b.dir))
}

// Bridger returns a function that starts a bridge for one run and reports
// its socket and a stop function; it is the form the heartbeat's process
// adapter accepts (heartbeat.ProcessAdapter.Bridge).
func Bridger(api http.Handler, log *slog.Logger) func(ctx context.Context, g Grant) (string, func(), error) {
	return func(_ context.Context, g Grant) (string, func(), error) {
		b, err := StartBridge(api, g, log)
		if err != nil {
			return "", nil, err
		}
		return b.Socket(), func() {
			if err := b.Close(); err != nil && log != nil {
				log.Warn("close sandbox bridge", "run", g.RunID, "err", err)
			}
		}, nil
	}
}

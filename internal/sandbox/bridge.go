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
	"strings"
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
	// TaskIdentifier is the task's short identifier (ACME-12): task routes
	// take it as well as TaskID, and are forwarded with TaskID in its place.
	TaskIdentifier string
}

// PublicationTask returns the company and task of an email publication
// (send), or an error when there is none.
type PublicationTask func(ctx context.Context, publicationID string) (companyID, taskID string, err error)

// route is one allowlisted operation; check validates its path values
// against the grant.
type route struct {
	pattern string
	check   func(r *http.Request, g Grant, pubs PublicationTask) bool
}

func sameTask(r *http.Request, g Grant, _ PublicationTask) bool {
	v := r.PathValue("issueId")
	return g.TaskID != "" && (v == g.TaskID || isOwnIdentifier(v, g))
}

// isOwnIdentifier reports whether v is the grant task's short identifier
// (any case, as the API takes it).
func isOwnIdentifier(v string, g Grant) bool {
	return g.TaskIdentifier != "" && strings.EqualFold(v, g.TaskIdentifier)
}

// withTaskID returns r with its task identifier path segment replaced by
// the grant's task UUID: the API then reads exactly the granted task,
// whatever else an identifier could name.
func withTaskID(r *http.Request, g Grant) *http.Request {
	v := r.PathValue("issueId")
	if !isOwnIdentifier(v, g) {
		return r
	}
	out := r.Clone(r.Context())
	segs := strings.Split(r.URL.Path, "/")
	for i, sg := range segs {
		if sg == v {
			segs[i] = g.TaskID
		}
	}
	u := *r.URL
	u.Path, u.RawPath = strings.Join(segs, "/"), ""
	out.URL = &u
	out.SetPathValue("issueId", g.TaskID)
	return out
}

func sameCompany(r *http.Request, g Grant, _ PublicationTask) bool {
	return r.PathValue("companyId") == g.CompanyID
}

// sameCompanyTask is a company route about the run's own task.
func sameCompanyTask(r *http.Request, g Grant, pubs PublicationTask) bool {
	return sameCompany(r, g, pubs) && sameTask(r, g, pubs)
}

// ownPublication is a company route about a send of the run's own task.
// Without a lookup nothing is allowed: the bridge fails closed.
func ownPublication(r *http.Request, g Grant, pubs PublicationTask) bool {
	if !sameCompany(r, g, pubs) || g.TaskID == "" || pubs == nil {
		return false
	}
	id := r.PathValue("publicationId")
	if id == "" {
		id = r.PathValue("sendId") // the route's alias under the name "send"
	}
	company, task, err := pubs(r.Context(), id)
	return err == nil && company == g.CompanyID && task == g.TaskID
}

// allowed is the whole API surface reachable from a sandbox: the run's task
// and its comments, and the agent's explicit email actions, reads limited
// to the run's own task (its thread and its sends). Mailbox setup, credential inspection, address
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
	{"GET /api/companies/{companyId}/email/tasks/{issueId}", sameCompanyTask},
	{"POST /api/companies/{companyId}/email/send", sameCompany},
	{"GET /api/companies/{companyId}/email/deliveries/{publicationId}", ownPublication},
	{"GET /api/companies/{companyId}/email/sends/{sendId}", ownPublication},
}

// maxBody caps a request body passing the bridge (email sends are the
// largest allowed request; attachments are uploaded by reference).
const maxBody = 4 << 20

// Handler returns the bridge's HTTP handler: allowlisted requests are
// forwarded to api with the grant's credentials; everything else gets 403.
// pubs resolves a publication's task for the delivery read.
func Handler(api http.Handler, g Grant, pubs PublicationTask) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range allowed {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if !rt.check(r, g, pubs) {
				deny(w)
				return
			}
			forward(api, g, w, withTaskID(r, g))
		})
	}
	// The MCP endpoint, for CLI agents (through `paperclipai mcp stdio`):
	// its call_api dispatches through this same allowlist (Restriction).
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		forward(api, g, w, r.WithContext(withRestriction(r.Context(), Restriction{Grant: g, API: mux, Publications: pubs})))
	})
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

// Options configure a bridge.
type Options struct {
	// Dir is the run's private bridge directory, created 0700 (it must
	// not exist yet). It belongs under the hidden runs directory: never in
	// a shared temporary directory, which an agent's command directory
	// might expose, and never in the agent-writable task directory.
	Dir string
	// Owner is the sandbox identity; the socket is given to it so the
	// sandboxed process may connect.
	Owner Identity
	// Publications resolves a publication's task (delivery reads).
	Publications PublicationTask
	Log          *slog.Logger
}

// StartBridge listens on a fresh unix socket in o.Dir and serves
// Handler(api, g, o.Publications) on it until Close.
func StartBridge(api http.Handler, g Grant, o Options) (*Bridge, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !filepath.IsAbs(o.Dir) {
		return nil, errors.New("sandbox bridge: the bridge directory must be an absolute path")
	}
	if err := os.Mkdir(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox bridge: %w", err)
	}
	b := &Bridge{dir: o.Dir, socket: filepath.Join(o.Dir, "api.sock"), done: make(chan struct{})}
	ln, err := listenIn(o.Dir, "api.sock", o.Owner)
	if err != nil {
		_ = os.RemoveAll(o.Dir)
		return nil, err
	}
	b.srv = &http.Server{Handler: Handler(api, g, o.Publications), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("sandbox bridge stopped", "err", err)
		}
	}()
	return b, nil
}

// listenIn listens on the unix socket dir/name and gives it to owner. The
// socket is bound through /proc/self/fd/<dir>: a run directory's full path
// can exceed the 108 bytes a socket address holds.
func listenIn(dir, name string, owner Identity) (net.Listener, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox bridge: %w", err)
	}
	defer d.Close()
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name))
	if err != nil {
		return nil, fmt.Errorf("sandbox bridge: listen: %w", err)
	}
	// The descriptor path dies with d: Close must not unlink through it
	// (the number may name another file by then). The directory is
	// removed as a whole instead.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := owner.Own(filepath.Join(dir, name)); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
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

// Bridger returns a function that starts a bridge for one run in dir and
// reports its socket and a stop function; it is the form the heartbeat's
// process adapter accepts (heartbeat.ProcessAdapter.Bridge).
func Bridger(api http.Handler, pubs PublicationTask, log *slog.Logger) func(ctx context.Context, g Grant, dir string, owner Identity) (string, func(), error) {
	return func(_ context.Context, g Grant, dir string, owner Identity) (string, func(), error) {
		b, err := StartBridge(api, g, Options{Dir: dir, Owner: owner, Publications: pubs, Log: log})
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

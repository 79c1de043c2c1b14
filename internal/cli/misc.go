package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print version and build information (version, commit, build date)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := buildinfo.Get()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(bi)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "paperclipai %s (commit %s, built %s, %s, %s/%s)\n", bi.Version, bi.Commit,
				bi.Date, bi.GoVersion, bi.OS, bi.Arch)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as JSON")
	return cmd
}

// apiClient calls the control plane API as the CLI's caller: the run token
// and run id from the agent environment, or a board key, or nothing (local
// board).
type apiClient struct {
	*apiclient.Client
	env config.Client
}

func newAPIClient() *apiClient {
	env := config.LoadClient(nil)
	base, hc := env.APIBase(), &http.Client{Timeout: 60 * time.Second}
	if socket, ok := env.Socket(); ok {
		// "unix:<socket>" is the API of a sandboxed run: HTTP over the
		// run's bridge socket, which serves the /api tree.
		base = "http://paperclip/api"
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	}
	return &apiClient{Client: apiclient.New(apiclient.Options{BaseURL: base, Token: env.APIKey, RunID: env.RunID, HTTP: hc}), env: env}
}

// do sends one request; path is relative to /api (a leading "/api" is accepted).
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	status, _, out, err := c.doHeader(ctx, method, path, body)
	return status, out, err
}

// doHeader is do that also returns the response headers. The CLI passes
// the API's JSON through as it came, so these commands use the client's
// untyped Raw call.
func (c *apiClient) doHeader(ctx context.Context, method, path string, body []byte) (int, http.Header, []byte, error) {
	res, err := c.Raw(ctx, method, path, body)
	return res.Status, res.Header, res.Body, err
}

// Exit codes of the API-calling commands (docs/agents.md, "Errors and exit
// codes").
const (
	// exitAPIError: the server refused the request (HTTP 4xx or 5xx).
	exitAPIError = 1
	// exitRetryLater: HTTP 429; retry the identical request (same
	// idempotencyKey) after the printed delay. 75 is EX_TEMPFAIL.
	exitRetryLater = 75
)

// call sends a request and writes the JSON answer to stdout, or the
// server's error message to stderr with a non-zero exit: 75 for a rate
// limit (HTTP 429), with its Retry-After, else 1.
func (c *apiClient) call(cmd *cobra.Command, method, path string, body []byte) error {
	return c.callField(cmd, method, path, body, "")
}

// callField is call that, with a non-empty field, prints only that field
// of the answer (see pickField).
func (c *apiClient) callField(cmd *cobra.Command, method, path string, body []byte, field string) error {
	status, hdr, out, err := c.doHeader(cmd.Context(), method, path, body)
	if err != nil {
		return err
	}
	if status >= 400 {
		return apiFailure(cmd, status, hdr, out)
	}
	if field != "" {
		v, err := pickField(out, field)
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "error: %v\n", err)
			return exitError{code: 1}
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), v)
		return err
	}
	return printJSON(cmd.OutOrStdout(), out)
}

// apiFailure prints a refused request's error to stderr and returns the
// exit code to leave with: 75 for a rate limit (HTTP 429), with its
// Retry-After, else 1.
func apiFailure(cmd *cobra.Command, status int, hdr http.Header, out []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(out))
	if json.Unmarshal(out, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if status == http.StatusTooManyRequests {
		wait := "later"
		if ra := strings.TrimSpace(hdr.Get("Retry-After")); ra != "" {
			wait = "after " + ra + " seconds (Retry-After: " + ra + ")"
			if _, perr := strconv.Atoi(ra); perr != nil {
				wait = "after " + ra + " (Retry-After)"
			}
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "error: %s (HTTP 429); retry %s with the identical request\n", msg, wait)
		return exitError{code: exitRetryLater}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "error: %s (HTTP %d)\n", msg, status)
	return exitError{code: exitAPIError}
}

// typedFailure is apiFailure for a typed call's error; other errors pass.
func typedFailure(cmd *cobra.Command, err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		h := http.Header{}
		if ae.RetryAfterRaw != "" {
			h.Set("Retry-After", ae.RetryAfterRaw)
		}
		return apiFailure(cmd, ae.Status, h, ae.Body)
	}
	return err
}

// printJSON writes an answer indented (or as it came when it is not JSON).
func printJSON(w io.Writer, out []byte) error {
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Indent(&buf, out, "", "  ") == nil {
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	_, err := w.Write(out)
	return err
}

// readData reads a --data/--file value: inline JSON, @file, or - for stdin.
func readData(cmd *cobra.Command, v string) ([]byte, error) {
	switch {
	case v == "":
		return nil, nil
	case v == "-" || v == "@-":
		return io.ReadAll(cmd.InOrStdin())
	case strings.HasPrefix(v, "@"):
		return os.ReadFile(v[1:])
	}
	return []byte(v), nil
}

// pickField returns one field of a JSON answer as text: path is a dot
// path of object keys and array indexes ("id", "user.id", "0.id").
// Strings print raw, so a shell can capture them; other values print as
// JSON. A missing field is an error.
func pickField(answer []byte, path string) (string, error) {
	d := json.NewDecoder(bytes.NewReader(answer))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("the answer is not JSON, so it has no field %q", path)
	}
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			val, ok := x[part]
			if !ok {
				return "", fmt.Errorf("the answer has no field %q", path)
			}
			v = val
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("the answer has no field %q (a list of %d)", path, len(x))
			}
			v = x[i]
		default:
			return "", fmt.Errorf("the answer has no field %q", path)
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return string(b), err
}

// apiHelp is the long help of `paperclipai api`.
const apiHelp = `Call the control plane's JSON API and print the answer, indented. PATH is
relative to /api (a leading /api is accepted), for example /companies.

The server and the caller come from the environment:
  PAPERCLIP_API_URL  the API base URL; default http://$PAPERCLIP_LISTEN/api,
                     that is http://127.0.0.1:3100/api ("unix:<socket>" in a
                     sandboxed run)
  PAPERCLIP_LISTEN   the server address for the default URL
  PAPERCLIP_API_KEY  bearer token: a board API key (pcb_…), or a run's token
                     inside an agent run; unset, the caller is the local
                     board (local_trusted mode, loopback only)
  PAPERCLIP_RUN_ID   the run id sent as X-Paperclip-Run-Id with a run token

A list answers one page (docs/api.md, "Paging"); --all follows the pages
(the Link/X-Next-Cursor headers of an array, the nextCursor of an
{items, nextCursor} object) and prints every row as one answer.

An HTTP error prints the server's message to stderr and exits with 1.`

const apiExamples = `  paperclipai api GET /companies
  paperclipai api --all GET /companies/$COMPANY/issues
  paperclipai api POST /companies --data '{"name":"Acme"}' --field id
  paperclipai api PATCH /issues/$TASK --data @update.json
  paperclipai api GET /me --field user.id`

func newAPICmd() *cobra.Command {
	var data, field string
	var all bool
	cmd := &cobra.Command{
		Use:     "api METHOD PATH",
		Short:   "Authenticated raw API call (like gh api), for scripts",
		Long:    apiHelp,
		Example: apiExamples,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readData(cmd, data)
			if err != nil {
				return err
			}
			method := strings.ToUpper(args[0])
			if all {
				if method != http.MethodGet || body != nil {
					return fmt.Errorf("--all follows the pages of a GET listing (without --data)")
				}
				return newAPIClient().callAll(cmd, args[1], field)
			}
			return newAPIClient().callField(cmd, method, args[1], body, field)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "follow a listing's pages (GET only): print one array of every row, or one {items} object")
	cmd.Flags().StringVar(&data, "data", "", "request body: JSON, @file, or - for stdin")
	cmd.Flags().StringVar(&field, "field", "", "print only this field of the answer (a dot path such as id, user.id or 0.id; strings print raw)")
	return cmd
}

func newUUIDCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uuid",
		Short: "Print a new random UUID (for idempotency keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), uuid.NewString())
			return err
		},
	}
}

// writable reports whether this process may write to path (access(2), so
// nothing is written to find out).
func writable(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// existingAncestor returns path or its nearest existing parent directory.
func existingAncestor(path string) string {
	for {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}

// sqliteHeader checks that path starts with the SQLite file header, by
// reading it: opening the database would create its journal files.
func sqliteHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 16)
	if _, err := io.ReadFull(f, head); err != nil || string(head) != "SQLite format 3\x00" {
		return errors.New("not a SQLite database")
	}
	return nil
}

func newDoctorCmd() *cobra.Command {
	var f config.Flags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check configuration and prerequisites; say what to fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			problems := 0
			report := func(ok bool, what, fix string) {
				if ok {
					fmt.Fprintf(w, "ok    %s\n", what)
					return
				}
				problems++
				fmt.Fprintf(w, "FAIL  %s\n      fix: %s\n", what, fix)
			}
			cfg, err := config.Load(f, nil)
			report(err == nil, "configuration", fmt.Sprint(err))
			if err != nil {
				return exitError{code: 1}
			}
			fmt.Fprintf(w, "      home %s, listen %s, mode %s\n", cfg.Home, cfg.Listen, cfg.DeploymentMode)
			// doctor only looks: it never creates the home, the database
			// or the key, so running it cannot change what it reports on.
			if info, err := os.Stat(cfg.Home); err == nil {
				report(info.IsDir() && writable(cfg.Home), "home directory is writable",
					fmt.Sprintf("make %s a directory writable by this user, or choose --home", cfg.Home))
			} else {
				dir := existingAncestor(cfg.Home)
				report(writable(dir), "home directory can be created",
					fmt.Sprintf("make %s writable by this user, or choose --home", dir))
				fmt.Fprintf(w, "info  home %s will be created on first start\n", cfg.Home)
			}
			if cfg.DatabaseURL == "" {
				path := cfg.SQLitePath()
				if _, err := os.Stat(path); err == nil {
					herr := sqliteHeader(path)
					report(herr == nil && writable(path), "database file (sqlite "+path+")",
						fmt.Sprintf("the file must be a SQLite database writable by this user (%v)", herr))
				} else {
					fmt.Fprintf(w, "info  database will be created at %s on first start\n", path)
				}
			} else {
				ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
				defer cancel()
				d, derr := db.Open(ctx, cfg.DatabaseURL, "")
				report(derr == nil, "database reachable (postgres)", fmt.Sprintf("check --database-url / PAPERCLIP_DATABASE_URL (%v)", derr))
				if derr == nil {
					d.Close()
				}
			}
			if info, err := os.Stat(cfg.MasterKeyFile); err == nil {
				report(info.Mode().Perm()&0o077 == 0, "vault master key permissions are 0600",
					"chmod 600 "+cfg.MasterKeyFile)
			} else if cfg.MasterKeyB64 == "" {
				fmt.Fprintf(w, "info  vault master key will be created at %s on first start\n", cfg.MasterKeyFile)
			}
			for _, tool := range []struct{ name, why string }{{"bwrap", "sandboxed (low-trust) agent runs"}} {
				_, err := exec.LookPath(tool.name)
				if err != nil {
					fmt.Fprintf(w, "warn  %s not found: needed for %s (apt-get install bubblewrap)\n", tool.name, tool.why)
				} else {
					fmt.Fprintf(w, "ok    %s found\n", tool.name)
				}
			}
			if problems > 0 {
				return exitError{code: 1}
			}
			fmt.Fprintln(w, "all checks passed")
			return nil
		},
	}
	serverFlags(cmd, &f)
	return cmd
}

// maxAllPages bounds --all: a server that kept answering with a next page
// must not keep the CLI reading forever.
const maxAllPages = 10000

// callAll reads every page of a GET listing and prints them as one answer:
// an array of every row, or for an {items, nextCursor} listing one object
// with every item (and nextCursor null).
func (c *apiClient) callAll(cmd *cobra.Command, path, field string) error {
	var rows []json.RawMessage
	object := false
	cursor := ""
	for range maxAllPages {
		p := path
		if cursor != "" {
			u, err := url.Parse(path)
			if err != nil {
				return fmt.Errorf("path: %w", err)
			}
			q := u.Query()
			q.Set("cursor", cursor)
			u.RawQuery = q.Encode()
			p = u.String()
		}
		status, hdr, out, err := c.doHeader(cmd.Context(), http.MethodGet, p, nil)
		if err != nil {
			return err
		}
		if status >= 400 {
			return apiFailure(cmd, status, hdr, out)
		}
		var page []json.RawMessage
		next := hdr.Get("X-Next-Cursor")
		if err := json.Unmarshal(out, &page); err != nil {
			var obj struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor *string           `json:"nextCursor"`
			}
			if json.Unmarshal(out, &obj) != nil || obj.Items == nil {
				return fmt.Errorf("--all: the answer of %s is not a list", path)
			}
			object, page, next = true, obj.Items, ""
			if obj.NextCursor != nil {
				next = *obj.NextCursor
			}
		}
		rows = append(rows, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if rows == nil {
		rows = []json.RawMessage{}
	}
	var v any = rows
	if object {
		v = map[string]any{"items": rows, "nextCursor": nil}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if field != "" {
		f, err := pickField(out, field)
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "error: %v\n", err)
			return exitError{code: 1}
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), f)
		return err
	}
	return printJSON(cmd.OutOrStdout(), out)
}

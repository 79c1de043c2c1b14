package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version and build information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "paperclipai %s (commit %s, %s, %s/%s)\n", buildinfo.Version, buildinfo.Commit(),
				runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// apiClient calls the control plane API as the CLI's caller: the run token
// and run id from the agent environment, or a board key, or nothing (local
// board).
type apiClient struct {
	base  string
	token string
	runID string
	http  *http.Client
}

func newAPIClient() *apiClient {
	base := os.Getenv("PAPERCLIP_API_URL")
	if base == "" {
		listen := os.Getenv("PAPERCLIP_LISTEN")
		if listen == "" {
			listen = "127.0.0.1:3100"
		}
		base = "http://" + listen + "/api"
	}
	c := &apiClient{base: strings.TrimRight(base, "/"), token: os.Getenv("PAPERCLIP_API_KEY"),
		runID: os.Getenv("PAPERCLIP_RUN_ID"), http: &http.Client{Timeout: 60 * time.Second}}
	if socket, ok := strings.CutPrefix(base, "unix:"); ok {
		// "unix:<socket>" is the API of a sandboxed run: HTTP over the
		// run's bridge socket, which serves the /api tree.
		c.base = "http://paperclip/api"
		c.http.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	}
	return c
}

// do sends one request; path is relative to /api (a leading "/api" is accepted).
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	path = "/" + strings.TrimPrefix(strings.TrimPrefix(path, "/"), "api/")
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.runID != "" && strings.HasPrefix(c.token, "pcr_") {
			req.Header.Set("X-Paperclip-Run-Id", c.runID)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("call %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, out, err
}

// call sends a request and writes the JSON answer to stdout, or the
// server's error message to stderr with a non-zero exit.
func (c *apiClient) call(cmd *cobra.Command, method, path string, body []byte) error {
	status, out, err := c.do(cmd.Context(), method, path, body)
	if err != nil {
		return err
	}
	if status >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(out))
		if json.Unmarshal(out, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "error: %s (HTTP %d)\n", msg, status)
		return exitError{code: 1}
	}
	w := cmd.OutOrStdout()
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Indent(&buf, out, "", "  ") == nil {
		buf.WriteByte('\n')
		_, err = w.Write(buf.Bytes())
		return err
	}
	_, err = w.Write(out)
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

func newAPICmd() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "api METHOD PATH",
		Short: "Authenticated raw API call (like gh api), for scripts",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readData(cmd, data)
			if err != nil {
				return err
			}
			return newAPIClient().call(cmd, strings.ToUpper(args[0]), args[1], body)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "request body: JSON, @file, or - for stdin")
	return cmd
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
			werr := os.MkdirAll(filepath.Join(cfg.Home, "instance"), 0o700)
			report(werr == nil, "home directory is writable", fmt.Sprintf("make %s writable or choose --home (%v)", cfg.Home, werr))
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			d, derr := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
			what := "database reachable (sqlite " + cfg.SQLitePath() + ")"
			if cfg.DatabaseURL != "" {
				what = "database reachable (postgres)"
			}
			report(derr == nil, what, fmt.Sprintf("check --database-url / PAPERCLIP_DATABASE_URL (%v)", derr))
			if derr == nil {
				d.Close()
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

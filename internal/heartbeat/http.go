package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/netguard"
)

// HTTPAdapter runs an agent by POSTing the run to its URL; a 2xx response
// means the run succeeded.
//
// The request carries the run token, so it goes to the configured host
// only: redirects are never followed (a 3xx answer fails the run) and no
// proxy is used. An agent whose URL no instance administrator approved
// reaches only public addresses, checked on the address dialled (the
// guard of attachment downloads): no loopback, private network or cloud
// metadata endpoint.
type HTTPAdapter struct{}

var (
	approvedClient = &http.Client{Transport: directTransport(), CheckRedirect: noRedirect}
	guardedClient  = &http.Client{Transport: netguard.Transport(false), CheckRedirect: noRedirect}
)

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// directTransport is the default transport without a proxy.
func directTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

// Run implements Adapter.
func (h HTTPAdapter) Run(ctx context.Context, spec RunSpec, logMax int) Result {
	var cfg domain.HTTPAdapterConfig
	if err := json.Unmarshal(spec.Agent.AdapterConfig, &cfg); err != nil || cfg.URL == "" {
		return Result{Status: domain.RunFailed, Error: "invalid http adapter config: url is required"}
	}
	if spec.Sandboxed() {
		// An HTTP agent runs elsewhere; it cannot be confined, so a sandbox
		// environment must not silently degrade to an unconfined call.
		return Result{Status: domain.RunFailed, Error: "sandbox environments support only the process adapter"}
	}
	body, _ := json.Marshal(map[string]string{"runId": spec.Run.ID, "agentId": spec.Run.AgentID, "companyId": spec.Run.CompanyID,
		"issueId": spec.Run.IssueID, "wakeReason": spec.Run.WakeReason, "apiUrl": spec.APIURL, "apiKey": spec.Token})
	timeout := 10 * time.Minute
	if cfg.TimeoutSec > 0 {
		timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The stored URL shows its userinfo and query masked; the vault holds them.
	target := domain.UnmaskURL(cfg.URL, spec.Secrets)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return Result{Status: domain.RunFailed, Error: "invalid http adapter url"}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range cfg.Headers {
		req.Header.Set(k, spec.secretValue("headers."+k, v))
	}
	client := guardedClient
	if spec.Agent.HostExecutionApproved {
		client = approvedClient
	}
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Result{Status: domain.RunCancelled, Error: cancelMessage(ctx)}
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			return Result{Status: domain.RunTimedOut, Error: "run timed out"}
		}
		if errors.Is(err, netguard.ErrBlocked) {
			return Result{Status: domain.RunFailed, Error: "http adapter refused: the URL does not resolve to a public address (only an instance administrator may point an agent at a private one)"}
		}
		msg := scrubURL(scrubURL(err.Error(), target), cfg.URL)
		for _, path := range []string{domain.URLUserinfoPath, domain.URLQueryPath} {
			if v := spec.Secrets[path]; len(v) >= 4 {
				msg = strings.ReplaceAll(msg, v, domain.WriteOnlyValue)
			}
		}
		return Result{Status: domain.RunFailed, Error: "http adapter request failed: " + strings.TrimSpace(msg)}
	}
	defer resp.Body.Close()
	buf := &capBuffer{max: logMax}
	_, _ = io.Copy(buf, io.LimitReader(resp.Body, int64(logMax)*4))
	res := Result{}
	res.Log, res.LogSize, res.Truncated = buf.result()
	code := resp.StatusCode
	res.ExitCode = &code
	if code >= 200 && code < 300 {
		res.Status = domain.RunSucceeded
	} else {
		res.Status = domain.RunFailed
		res.Error = fmt.Sprintf("http adapter answered %d", code)
	}
	return res
}

// scrubURL removes the adapter URL (which may embed credentials) from an error.
func scrubURL(msg, url string) string { return strings.ReplaceAll(msg, url, "<adapter url>") }

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
)

// HTTPAdapter runs an agent by POSTing the run to its URL; a 2xx response
// means the run succeeded.
type HTTPAdapter struct {
	Client *http.Client
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
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Status: domain.RunFailed, Error: "invalid http adapter url"}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range cfg.Headers {
		req.Header.Set(k, v)
	}
	client := h.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Result{Status: domain.RunCancelled, Error: "run cancelled"}
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			return Result{Status: domain.RunTimedOut, Error: "run timed out"}
		}
		return Result{Status: domain.RunFailed, Error: "http adapter request failed: " + strings.TrimSpace(scrubURL(err.Error(), cfg.URL))}
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

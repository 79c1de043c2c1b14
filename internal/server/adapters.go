package server

import (
	"context"
	"log/slog"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// adapters returns the agent adapters by type. Sandboxed runs reach the
// API only through a per-run bridge (an allowlist, as the run; s.Mux is
// set before any run starts); sandboxed CLI agents reach their provider
// only through a per-run egress proxy.
func (s *Server) adapters(bridge func(context.Context, sandbox.Grant, string, sandbox.Identity) (string, func(), error),
	logger *slog.Logger) map[string]heartbeat.Adapter {
	log := logger.With("component", "sandbox")
	egress := func(_ context.Context, dir string, owner sandbox.Identity, allow []string) (string, func(), error) {
		e, err := sandbox.StartEgress(sandbox.EgressOptions{Dir: dir, Owner: owner, Allow: allow, Log: log})
		if err != nil {
			return "", nil, err
		}
		return e.Socket(), func() {
			if err := e.Close(); err != nil {
				log.Warn("close sandbox egress proxy", "err", err)
			}
		}, nil
	}
	out := map[string]heartbeat.Adapter{
		"process": heartbeat.ProcessAdapter{Bridge: bridge},
		"http":    heartbeat.HTTPAdapter{},
	}
	for _, typ := range agentcli.Types {
		out[typ] = heartbeat.CLIAdapter{Type: typ, Store: s.Store, Bridge: bridge, Egress: egress,
			Log: logger.With("component", "heartbeat", "adapter", typ), BudgetExceeded: s.budgetExceeded}
	}
	return out
}

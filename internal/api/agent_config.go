package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/netguard"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// adapterWrite is what applying adapter input leaves for after the agent
// row exists: the write-only values to vault, by config path, and the
// paths that stay bound (every other binding of the agent is dropped).
type adapterWrite struct {
	set  map[string]string
	keep map[string]bool
}

// writeOnly moves the values of one write-only object (env or headers)
// out of the stored config. A value equal to domain.WriteOnlyValue keeps
// the stored one; an empty value is stored as is (nothing to hide); any
// other value goes to the vault and is stored as "". It reports whether a
// value was given (a change of host-executing configuration). moved, when
// not "", says which host-executing setting a non-administrator changed:
// a stored value then is not kept (it was given for the old command or
// URL), so sending the mask is refused.
func (w *adapterWrite) writeOnly(field string, in, prev map[string]string, sameType bool, moved string) (changed bool, err error) {
	for k, v := range in {
		path := field + "." + k
		switch {
		case v == domain.WriteOnlyValue:
			old, ok := prev[k]
			if !sameType || !ok {
				return false, httpx.Errorf(http.StatusBadRequest, "adapterConfig.%s: there is no stored value to keep; send the value", path)
			}
			if moved != "" {
				return false, httpx.Errorf(http.StatusBadRequest, "adapterConfig.%s: the stored value is not kept when %s changes; send the value again, or leave %s out to drop it (only an instance administrator may keep stored values across such a change)", path, moved, path)
			}
			if old != "" {
				// A value stored before values moved to the vault.
				w.set[path] = old
			}
			w.keep[path] = true
		case v == "":
			// Vaulted values are stored as "": an explicit empty value
			// cannot be told from an unchanged one, so it counts as a change.
			changed = true
		default:
			w.set[path] = v
			w.keep[path] = true
			changed = true
		}
		in[k] = ""
	}
	for k := range prev {
		if _, ok := in[k]; !ok {
			changed = true
		}
	}
	return changed, nil
}

// applyAdapter validates an adapter type and config onto a, keeping
// write-only values out of the stored config, and records who may let the
// agent execute on the host: an instance administrator writing the
// configuration approves it; anyone else changing host-executing settings
// (process command, args, env, cwd; the http URL; a CLI agent's type or
// Claude Code's allowed tools) withdraws the approval,
// so the agent then runs only in an active sandbox environment. Only an
// instance administrator may point an http agent at a non-public address.
func (s *Server) applyAdapter(ctx context.Context, a *domain.Agent, typ string, raw json.RawMessage, admin, isNew bool) (*adapterWrite, error) {
	cfg, err := validateAdapter(typ, raw)
	if err != nil {
		return nil, err
	}
	w := &adapterWrite{set: map[string]string{}, keep: map[string]bool{}}
	sameType := !isNew && a.AdapterType == typ
	changed := !sameType
	switch typ {
	case "process":
		var c, prev domain.ProcessAdapterConfig
		_ = json.Unmarshal(cfg, &c)
		if sameType {
			_ = json.Unmarshal(a.AdapterConfig, &prev)
		}
		// Stored values follow only the configuration they were given
		// for: a vaulted token must never reach a command (or an
		// environment, such as BASH_ENV or LD_PRELOAD) that someone other
		// than an instance administrator chose.
		moved := ""
		if !admin {
			moved = movedSetting(!sameType, c.Command != prev.Command, !slices.Equal(c.Args, prev.Args), c.Cwd != prev.Cwd,
				envEdited(c.Env, prev.Env))
		}
		envChanged, err := w.writeOnly("env", c.Env, prev.Env, sameType, moved)
		if err != nil {
			return nil, err
		}
		changed = changed || envChanged || c.Command != prev.Command || !slices.Equal(c.Args, prev.Args) || c.Cwd != prev.Cwd
		if changed && !admin {
			if err := memberCommand(c.Command); err != nil {
				return nil, err
			}
		}
		if cfg, err = json.Marshal(c); err != nil {
			return nil, err
		}
	case "http":
		var c, prev domain.HTTPAdapterConfig
		_ = json.Unmarshal(cfg, &c)
		if sameType {
			_ = json.Unmarshal(a.AdapterConfig, &prev)
		}
		// Vaulted headers and URL credentials go only to the destination
		// they were given for.
		moved := ""
		if !admin && sameType && urlDestination(c.URL) != urlDestination(prev.URL) {
			moved = "the url"
		}
		if _, err := w.writeOnly("headers", c.Headers, prev.Headers, sameType, moved); err != nil {
			return nil, err
		}
		masked, urlChanged, err := w.urlSecrets(c.URL, prev.URL, sameType, moved)
		if err != nil {
			return nil, err
		}
		changed = changed || urlChanged || masked != domain.MaskURL(prev.URL)
		c.URL = masked
		if changed && !admin {
			u, _ := url.Parse(c.URL)
			if !netguard.PublicHost(ctx, u.Hostname()) {
				return nil, httpx.Errorf(http.StatusForbidden, "adapterConfig.url must resolve to a public address: only an instance administrator may point an agent at loopback, a private network or a host name that does not resolve")
			}
		}
		if cfg, err = json.Marshal(c); err != nil {
			return nil, err
		}
	case agentcli.Claude:
		// Extra tools (Bash, Write, …) decide what the CLI may do on the
		// host: changing them is changing what executes there.
		var c, prev agentcli.Config
		_ = json.Unmarshal(cfg, &c)
		if sameType {
			_ = json.Unmarshal(a.AdapterConfig, &prev)
		}
		changed = changed || !slices.Equal(c.AllowedTools, prev.AllowedTools)
	}
	switch {
	case admin:
		a.HostExecutionApproved = true
	case changed:
		a.HostExecutionApproved = false
	}
	a.AdapterType, a.AdapterConfig = typ, cfg
	return w, nil
}

// urlDestination is where an http agent's URL sends its request: the URL
// without its userinfo, query and fragment.
func urlDestination(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// urlParts returns the userinfo and query of an http agent URL (the
// write-only parts), as written in the URL; a part shown masked is
// domain.WriteOnlyValue.
func urlParts(raw string) (userinfo, query string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	if u.User != nil {
		userinfo = u.User.String()
		if u.User.Username() == domain.WriteOnlyValue {
			userinfo = domain.WriteOnlyValue
		}
	}
	return userinfo, u.RawQuery
}

// urlSecrets moves the userinfo and query of an http agent URL (where
// credentials travel) to the vault like env values, returning the URL to
// store (masked, domain.MaskURL) and whether a part was given a new value.
// A part sent as the mask keeps the stored one, unless moved (see
// writeOnly).
func (w *adapterWrite) urlSecrets(raw, prevRaw string, sameType bool, moved string) (string, bool, error) {
	user, query := urlParts(raw)
	var prevUser, prevQuery string
	if sameType {
		prevUser, prevQuery = urlParts(prevRaw)
	}
	changed := false
	for _, p := range []struct{ path, name, val, prev string }{
		{domain.URLUserinfoPath, "userinfo", user, prevUser},
		{domain.URLQueryPath, "query", query, prevQuery},
	} {
		switch {
		case p.val == "":
		case p.val == domain.WriteOnlyValue:
			if p.prev == "" {
				return "", false, httpx.Errorf(http.StatusBadRequest, "adapterConfig.url: there is no stored %s to keep; send the value", p.name)
			}
			if moved != "" {
				return "", false, httpx.Errorf(http.StatusBadRequest, "adapterConfig.url: the stored %s is not kept when the url's host or path changes; send the value again, or leave it out (only an instance administrator may keep stored values across such a change)", p.name)
			}
			if p.prev != domain.WriteOnlyValue {
				// A URL stored before its credentials moved to the vault.
				w.set[p.path] = p.prev
			}
			w.keep[p.path] = true
		default:
			w.set[p.path] = p.val
			w.keep[p.path] = true
			changed = true
		}
	}
	return domain.MaskURL(raw), changed, nil
}

// movedSetting names the first changed host-executing setting of a
// process agent, or "" when none changed.
func movedSetting(typ, command, args, cwd, env bool) string {
	switch {
	case typ:
		return "the adapter type"
	case command:
		return "the command"
	case args:
		return "the args"
	case cwd:
		return "the cwd"
	case env:
		return "another env value"
	}
	return ""
}

// envEdited reports whether in changes env beyond keeping stored values:
// a new or replaced value (anything but the mask) or a removed name.
func envEdited(in, prev map[string]string) bool {
	for k, v := range in {
		if v != domain.WriteOnlyValue {
			return true
		}
		if _, ok := prev[k]; !ok {
			return true
		}
	}
	for k := range prev {
		if _, ok := in[k]; !ok {
			return true
		}
	}
	return false
}

// memberCommand refuses a process command that no configuration written
// by someone other than an instance administrator may run: such an agent
// runs only in a sandbox, and a sandbox binds no host directory of the
// member's choosing, so the command must be a system program (an absolute
// path under /usr, /bin, /sbin, /lib*, or a name found on the server's
// PATH, checked again when the run starts).
func memberCommand(command string) error {
	switch {
	case filepath.IsAbs(command) && sandbox.SystemPath(filepath.Clean(command)):
		return nil
	case !strings.Contains(command, "/"):
		return nil
	}
	return httpx.Errorf(http.StatusForbidden, "adapterConfig.command %q: only an instance administrator may run a program outside the system directories (/usr, /bin, /sbin, /lib*); use a system program (for example /bin/sh with args) or ask an instance administrator to save this configuration", command)
}

// storeAdapterSecrets vaults the write-only values of w as secrets bound
// to the agent and drops the bindings of settings it no longer has, inside
// the agent's write transaction.
func (s *Server) storeAdapterSecrets(ctx context.Context, tx *sql.Tx, a domain.Agent, w *adapterWrite) error {
	if w == nil {
		return nil
	}
	for path, v := range w.set {
		name := fmt.Sprintf("agent %s %s", a.ID, path)
		if err := s.Vault.SetBound(ctx, tx, a.CompanyID, domain.SecretTargetAgent, a.ID, path, name, v); err != nil {
			return err
		}
	}
	return s.Vault.UnbindPaths(ctx, tx, domain.SecretTargetAgent, a.ID, func(path string) bool { return w.keep[path] })
}

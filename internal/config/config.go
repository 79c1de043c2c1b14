// Package config resolves the server's settings: flag, then environment,
// then default (README.md, "Configuration").
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
)

// Deployment modes.
const (
	ModeLocalTrusted  = "local_trusted"
	ModeAuthenticated = "authenticated"
)

// DefaultAttachmentTypes is the built-in attachment content-type allowlist.
var DefaultAttachmentTypes = []string{
	"text/plain", "text/markdown", "text/csv", "text/html", "application/json", "application/pdf",
	"image/png", "image/jpeg", "image/gif", "image/webp",
	"application/zip", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation",
	"message/rfc822",
}

// Config is the resolved configuration of a server process.
type Config struct {
	Listen      string
	Home        string
	DatabaseURL string
	PublicURL   string
	// InsecureLocalWebhooks lets webhook receiving use a plain-HTTP
	// loopback public URL, for trying webhooks with the local emulator
	// (--insecure-local-webhooks); never for a reachable server.
	InsecureLocalWebhooks bool
	DeploymentMode        string
	MasterKeyFile         string
	MasterKeyB64          string
	AgentMailAPIURL       string
	AgentMailWSURL        string
	AgentMailTimeout      time.Duration
	AttachmentMaxBytes    int64
	AllowedAttachments    []string
	LogJSON               bool
	LogLevel              string
	RunLeaseTTL           time.Duration
	ShutdownGrace         time.Duration
	MaxConcurrentRuns     int
	RunLogMaxBytes        int
	RequestBodyMaxBytes   int64
	// BodyReadTimeout bounds how long a request body may take to arrive
	// once its headers are in (slow-body clients are cut off).
	BodyReadTimeout time.Duration
	// HeaderReadTimeout bounds how long a request's headers may take to
	// arrive (10 s), and IdleTimeout how long a keep-alive connection may
	// wait for its next request (2 min). Neither is read from the
	// environment; tests shorten them.
	HeaderReadTimeout time.Duration
	IdleTimeout       time.Duration
	// NotificationWatchInterval is how often inbox health and bounce rates
	// are checked for notification events (1 min). Not read from the
	// environment; tests shorten it.
	NotificationWatchInterval time.Duration
	// Email timing overrides, for tests and drills that must see lease
	// expiry, catch-up or reconnects within seconds; zero keeps the
	// defaults (90 s leases, catch-up every 60 s, reconnect backoff from
	// 2 s). PAPERCLIP_EMAIL_LEASE_TTL, _CATCHUP_INTERVAL, _RECONNECT_MIN.
	EmailLeaseTTL        time.Duration
	EmailCatchupInterval time.Duration
	EmailReconnectMin    time.Duration
	// TrustedProxies are the reverse proxies (addresses or CIDR prefixes,
	// PAPERCLIP_TRUSTED_PROXIES, comma-separated) whose X-Forwarded-For
	// names the client; see ClientAddr.
	TrustedProxies []netip.Prefix
	// QuarantineDays is how long the content of quarantined inbound mail
	// is kept before it is purged (PAPERCLIP_QUARANTINE_DAYS, default 30).
	QuarantineDays int
	// ManualMigrate is PAPERCLIP_AUTO_MIGRATE=false: the server applies no
	// migration at start and refuses to start while any is pending;
	// `paperclipai admin migrate` applies them. The zero value (a Config
	// built by hand too) migrates automatically.
	ManualMigrate bool
	// MetricsListen is a second listener that serves only /metrics,
	// /healthz and /readyz, without authentication
	// (PAPERCLIP_METRICS_LISTEN); it must be a loopback or private address.
	MetricsListen string
	// NotifySocket and WatchdogInterval come from systemd (NOTIFY_SOCKET,
	// WATCHDOG_USEC) for a Type=notify unit; empty and zero otherwise.
	NotifySocket     string
	WatchdogInterval time.Duration
	// UIPollMS overrides every live-refresh interval of the web UI
	// (PAPERCLIP_UI_POLL_MS, milliseconds; tests); zero keeps each page's.
	UIPollMS int
}

// Flags holds the raw flag values; empty means "not given".
type Flags struct {
	Listen, Home, DatabaseURL, PublicURL, DeploymentMode string
	// InsecureLocalWebhooks is --insecure-local-webhooks.
	InsecureLocalWebhooks bool
}

// Getenv is the environment lookup used by Load (replaceable in tests).
type Getenv func(string) string

// Load resolves configuration from flags, then env, then defaults.
func Load(f Flags, getenv Getenv) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	pick := func(flag, env, def string) string {
		if flag != "" {
			return flag
		}
		if v := getenv(env); v != "" {
			return v
		}
		return def
	}
	home := pick(f.Home, "PAPERCLIP_HOME", "")
	if home == "" {
		uh, err := os.UserHomeDir()
		if err != nil {
			return Config{}, fmt.Errorf("config: cannot determine home directory; set --home or PAPERCLIP_HOME: %w", err)
		}
		home = filepath.Join(uh, ".paperclip")
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return Config{}, fmt.Errorf("config: home: %w", err)
	}
	c := Config{
		Listen:         pick(f.Listen, "PAPERCLIP_LISTEN", "127.0.0.1:3100"),
		Home:           home,
		DatabaseURL:    pick(f.DatabaseURL, "PAPERCLIP_DATABASE_URL", ""),
		PublicURL:      strings.TrimRight(pick(f.PublicURL, "PAPERCLIP_PUBLIC_URL", ""), "/"),
		DeploymentMode: pick(f.DeploymentMode, "PAPERCLIP_DEPLOYMENT_MODE", ModeLocalTrusted),
		InsecureLocalWebhooks: f.InsecureLocalWebhooks || getenv("PAPERCLIP_INSECURE_LOCAL_WEBHOOKS") == "1" ||
			getenv("PAPERCLIP_INSECURE_LOCAL_WEBHOOKS") == "true",
		MasterKeyFile:       pick("", "PAPERCLIP_SECRETS_MASTER_KEY_FILE", filepath.Join(home, "instance", "secrets", "master.key")),
		MasterKeyB64:        getenv("PAPERCLIP_SECRETS_MASTER_KEY"),
		AgentMailAPIURL:     strings.TrimRight(pick("", "PAPERCLIP_AGENTMAIL_API_URL", "https://api.agentmail.to/v0"), "/"),
		AgentMailWSURL:      pick("", "PAPERCLIP_AGENTMAIL_WS_URL", "wss://ws.agentmail.to/v0"),
		AttachmentMaxBytes:  10 << 20,
		AllowedAttachments:  DefaultAttachmentTypes,
		LogJSON:             getenv("PAPERCLIP_LOG_FORMAT") == "json",
		LogLevel:            pick("", "PAPERCLIP_LOG_LEVEL", "info"),
		RunLeaseTTL:         30 * time.Second,
		ShutdownGrace:       30 * time.Second,
		MaxConcurrentRuns:   8,
		RunLogMaxBytes:      1 << 20,
		RequestBodyMaxBytes: 1 << 20,
		BodyReadTimeout:     60 * time.Second,
		HeaderReadTimeout:   10 * time.Second,
		IdleTimeout:         2 * time.Minute,
		QuarantineDays:      30,
	}
	if v := getenv("PAPERCLIP_QUARANTINE_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3650 {
			return c, errors.New("config: PAPERCLIP_QUARANTINE_DAYS must be a whole number of days from 1 to 3650")
		}
		c.QuarantineDays = n
	}
	if v := getenv("PAPERCLIP_ATTACHMENT_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, errors.New("config: PAPERCLIP_ATTACHMENT_MAX_BYTES must be a positive integer")
		}
		c.AttachmentMaxBytes = n
	}
	if v := getenv("PAPERCLIP_ALLOWED_ATTACHMENT_TYPES"); v != "" {
		c.AllowedAttachments = nil
		for _, t := range strings.Split(v, ",") {
			if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
				c.AllowedAttachments = append(c.AllowedAttachments, t)
			}
		}
	}
	if v := getenv("PAPERCLIP_RUN_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return c, errors.New("config: PAPERCLIP_RUN_LEASE_TTL must be a duration of at least 1s")
		}
		c.RunLeaseTTL = d
	}
	if v := getenv("PAPERCLIP_AGENTMAIL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond {
			return c, errors.New("config: PAPERCLIP_AGENTMAIL_TIMEOUT must be a duration of at least 100ms")
		}
		c.AgentMailTimeout = d
	}
	for _, o := range []struct {
		env string
		dst *time.Duration
	}{
		{"PAPERCLIP_EMAIL_LEASE_TTL", &c.EmailLeaseTTL},
		{"PAPERCLIP_EMAIL_CATCHUP_INTERVAL", &c.EmailCatchupInterval},
		{"PAPERCLIP_EMAIL_RECONNECT_MIN", &c.EmailReconnectMin},
	} {
		if v := getenv(o.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("config: %s must be a positive duration such as 5s", o.env)
			}
			*o.dst = d
		}
	}
	if v := getenv("PAPERCLIP_TRUSTED_PROXIES"); v != "" {
		ps, err := ParseTrustedProxies(v)
		if err != nil {
			return c, err
		}
		c.TrustedProxies = ps
	}
	switch v := strings.ToLower(getenv("PAPERCLIP_AUTO_MIGRATE")); v {
	case "", "1", "true", "yes":
	case "0", "false", "no":
		c.ManualMigrate = true
	default:
		return c, errors.New("config: PAPERCLIP_AUTO_MIGRATE must be true or false")
	}
	c.MetricsListen = getenv("PAPERCLIP_METRICS_LISTEN")
	c.NotifySocket = getenv("NOTIFY_SOCKET")
	if v := getenv("WATCHDOG_USEC"); v != "" {
		// systemd sets WATCHDOG_PID with it; a watchdog meant for another
		// process (an inherited environment) is not ours to feed.
		if pid := getenv("WATCHDOG_PID"); pid == "" || pid == strconv.Itoa(os.Getpid()) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return c, errors.New("config: WATCHDOG_USEC must be a positive integer (microseconds)")
			}
			c.WatchdogInterval = time.Duration(n) * time.Microsecond
		}
	}
	if v, err := strconv.Atoi(getenv("PAPERCLIP_UI_POLL_MS")); err == nil && v > 0 {
		c.UIPollMS = v
	}
	if v := getenv("PAPERCLIP_SHUTDOWN_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, errors.New("config: PAPERCLIP_SHUTDOWN_GRACE must be a duration")
		}
		c.ShutdownGrace = d
	}
	return c, c.Validate()
}

// Validate checks cross-field rules.
func (c Config) Validate() error {
	switch c.DeploymentMode {
	case ModeLocalTrusted:
		if !IsLoopbackListen(c.Listen) {
			return fmt.Errorf("config: deployment mode local_trusted is allowed only on a loopback listen address (got %q); use --deployment-mode authenticated", c.Listen)
		}
	case ModeAuthenticated:
	default:
		return fmt.Errorf("config: unknown deployment mode %q (want local_trusted or authenticated)", c.DeploymentMode)
	}
	if c.MetricsListen != "" && !isPrivateListen(c.MetricsListen) {
		return fmt.Errorf("config: PAPERCLIP_METRICS_LISTEN serves /metrics without authentication, so it must be a loopback or private address such as 127.0.0.1:9100 or 10.0.0.5:9100 (got %q)", c.MetricsListen)
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return errors.New("config: --database-url must be empty (SQLite) or a postgres:// URL")
	}
	if c.InsecureLocalWebhooks {
		// Plain-HTTP webhooks are for the local emulator only: both the
		// public URL and the server must be on the loopback address, so
		// the flag cannot turn a reachable server into one that takes
		// signed events over plain HTTP.
		u, err := url.Parse(c.PublicURL)
		if c.PublicURL == "" || err != nil || u.Scheme != "http" || !IsLoopbackHost(u.Hostname()) {
			return errors.New("config: --insecure-local-webhooks needs a loopback --public-url such as http://127.0.0.1:3100 (it is for trying webhooks with the local emulator)")
		}
		if !IsLoopbackListen(c.Listen) {
			return fmt.Errorf("config: --insecure-local-webhooks is allowed only on a loopback listen address (got %q)", c.Listen)
		}
	} else if c.PublicURL != "" && !strings.HasPrefix(c.PublicURL, "https://") {
		return errors.New("config: --public-url must be an https:// URL (a plain-HTTP loopback URL only with --insecure-local-webhooks)")
	}
	if _, err := agentmail.ValidateAPIBaseURL(c.AgentMailAPIURL); err != nil {
		return fmt.Errorf("config: PAPERCLIP_AGENTMAIL_API_URL: %w", err)
	}
	if _, err := agentmail.ValidateWebSocketURL(c.AgentMailWSURL); err != nil {
		return fmt.Errorf("config: PAPERCLIP_AGENTMAIL_WS_URL: %w", err)
	}
	return nil
}

// SQLitePath is the embedded database file.
func (c Config) SQLitePath() string { return filepath.Join(c.Home, "instance", "db", "paperclip.db") }

// AttachmentsDir is where uploads are staged while they are hashed, and
// where homes from before attachment content moved into the database kept
// it as files (read once, to backfill them).
func (c Config) AttachmentsDir() string { return filepath.Join(c.Home, "instance", "attachments") }

// WorkspacesDir holds per-task working directories.
func (c Config) WorkspacesDir() string { return filepath.Join(c.Home, "workspaces") }

// RunsDir holds per-run scratch data (skills directories).
func (c Config) RunsDir() string { return filepath.Join(c.Home, "instance", "runs") }

// IsLoopbackListen reports whether a host:port listen address is loopback.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return IsLoopbackHost(host)
}

// IsLoopbackHost reports whether a host name or IP address is loopback.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseTrustedProxies parses PAPERCLIP_TRUSTED_PROXIES: comma-separated
// IP addresses (one host) or CIDR prefixes.
func ParseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("config: PAPERCLIP_TRUSTED_PROXIES: %q is neither an IP address nor a CIDR prefix", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trustedProxy reports whether a is one of the trusted proxies.
func (c Config) trustedProxy(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the address of the client behind a request that
// arrived from remoteAddr (host:port) carrying forwardedFor (the values
// of its X-Forwarded-For headers). Only a trusted proxy's word counts:
// from a peer that is not a trusted proxy the peer is the client; from a
// trusted proxy, the right-most X-Forwarded-For address that is not
// itself a trusted proxy (addresses further left were written by the
// client and prove nothing). An unparsable entry ends the walk at the
// last trusted hop. The zero Addr means the peer address is unparsable.
func (c Config) ClientAddr(remoteAddr string, forwardedFor []string) netip.Addr {
	peer, err := netip.ParseAddrPort(remoteAddr)
	var addr netip.Addr
	if err == nil {
		addr = peer.Addr().Unmap()
	} else if a, err := netip.ParseAddr(remoteAddr); err == nil {
		addr = a.Unmap()
	} else {
		return netip.Addr{}
	}
	if !c.trustedProxy(addr) {
		return addr
	}
	var hops []string
	for _, v := range forwardedFor {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return addr
		}
		addr = a.Unmap()
		if !c.trustedProxy(addr) {
			return addr
		}
	}
	return addr
}

// isPrivateListen reports whether a host:port listen address is a loopback
// or private (RFC 1918, RFC 4193) IP address; a wildcard or public address
// is not.
func isPrivateListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if IsLoopbackHost(host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsPrivate()
}

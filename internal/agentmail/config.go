package agentmail

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Production endpoints (README.md, "Configuration"). PAPERCLIP_AGENTMAIL_API_URL and
// PAPERCLIP_AGENTMAIL_WS_URL override them.
const (
	DefaultAPIBaseURL   = "https://api.agentmail.to/v0"
	DefaultWebSocketURL = "wss://ws.agentmail.to/v0"
)

// ErrInvalidBaseURL is matched by every error of [ValidateAPIBaseURL] and
// [ValidateWebSocketURL].
var ErrInvalidBaseURL = errors.New("invalid AgentMail URL")

// ValidateAPIBaseURL checks a REST base URL and returns it parsed, without
// a trailing slash. https is accepted for any host; plain http only for
// loopback hosts (127.0.0.0/8, ::1, localhost), which is how the local
// emulator is reached. User info, query strings and fragments are rejected:
// credentials travel only in the Authorization header.
func ValidateAPIBaseURL(raw string) (*url.URL, error) {
	return validateBaseURL(raw, "https", "http")
}

// ValidateWebSocketURL checks a WebSocket URL the same way as
// [ValidateAPIBaseURL]: wss for any host, ws only for loopback hosts. It
// rejects query strings so that a key can never be configured into the URL
// (for example ?api_key=...).
func ValidateWebSocketURL(raw string) (*url.URL, error) {
	return validateBaseURL(raw, "wss", "ws")
}

func validateBaseURL(raw, secure, plain string) (*url.URL, error) {
	// The error messages never echo raw: a misconfigured value might be a
	// pasted key.
	if strings.TrimSpace(raw) != raw || raw == "" {
		return nil, fmt.Errorf("%w: must be a non-empty absolute %s:// URL without surrounding spaces", ErrInvalidBaseURL, secure)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a parseable URL", ErrInvalidBaseURL)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%w: must be an absolute %s:// URL with a host", ErrInvalidBaseURL, secure)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: must not contain user info", ErrInvalidBaseURL)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: must not contain a query or fragment", ErrInvalidBaseURL)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: must name a host", ErrInvalidBaseURL)
	}
	switch strings.ToLower(u.Scheme) {
	case secure:
	case plain:
		if !isLoopbackHost(host) {
			return nil, fmt.Errorf("%w: %s:// is allowed only for loopback hosts (127.0.0.0/8, ::1, localhost); use %s://", ErrInvalidBaseURL, plain, secure)
		}
	default:
		return nil, fmt.Errorf("%w: scheme must be %s (or %s for loopback hosts)", ErrInvalidBaseURL, secure, plain)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	// Trim trailing slashes on the escaped form so an encoded "%2F" at the
	// end of the path is kept as it is.
	escaped := strings.TrimRight(u.EscapedPath(), "/")
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, fmt.Errorf("%w: path is not validly escaped", ErrInvalidBaseURL)
	}
	u.Path, u.RawPath = p, escaped
	return u, nil
}

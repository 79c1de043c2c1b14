package agentmail

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is the accepted distance between a webhook's signed
// timestamp and the local clock, in either direction (the Svix default).
const WebhookTolerance = 5 * time.Minute

// Webhook verification errors. Every [*WebhookError] matches
// [ErrInvalidWebhookSignature]; the route answers all of them with 403.
var (
	// ErrInvalidWebhookSignature is matched by every verification failure.
	ErrInvalidWebhookSignature = errors.New("agentmail: invalid webhook signature")
	// ErrInvalidWebhookSecret is returned by [NewWebhookVerifier] for a
	// secret that is not "whsec_" followed by non-empty standard base64.
	ErrInvalidWebhookSecret = errors.New("agentmail: invalid webhook secret")
)

// WebhookError is a webhook signature verification failure. Reason is one
// of a fixed set ("missing_headers", "invalid_timestamp",
// "timestamp_too_old", "timestamp_too_new", "no_matching_signature").
type WebhookError struct {
	Reason string
}

// Error returns the log-safe description of the failure.
func (e *WebhookError) Error() string {
	return "AgentMail webhook signature rejected [reason=" + e.Reason + "]"
}

// Unwrap returns [ErrInvalidWebhookSignature].
func (e *WebhookError) Unwrap() error { return ErrInvalidWebhookSignature }

// WebhookVerifier checks Svix (Standard Webhooks) signatures of AgentMail
// webhook deliveries. It is safe for concurrent use.
type WebhookVerifier struct {
	key []byte
	now func() time.Time
}

// NewWebhookVerifier returns a verifier for a "whsec_<base64>" secret. The
// prefix is optional, as in the Svix libraries. The error never quotes the
// secret.
func NewWebhookVerifier(secret string) (*WebhookVerifier, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, ErrInvalidWebhookSecret
	}
	return &WebhookVerifier{key: key, now: time.Now}, nil
}

// Verify checks body (the exact raw request bytes, before any JSON
// decoding) against the signature headers. It reads svix-id,
// svix-timestamp and svix-signature, and falls back to the webhook-*
// family when any svix-* header is missing. The signed content is
// "<id>.<timestamp>.<body>" under HMAC-SHA256; the signature header may
// list several space-separated "v1,<base64>" entries (secret rotation), of
// which one must match, compared in constant time. The timestamp must be
// within [WebhookTolerance] of now in either direction.
func (v *WebhookVerifier) Verify(body []byte, h http.Header) error {
	return v.VerifyAt(body, h, v.now())
}

// VerifyAt is [WebhookVerifier.Verify] with an explicit clock reading.
func (v *WebhookVerifier) VerifyAt(body []byte, h http.Header, now time.Time) error {
	id, ts, sigs := h.Get("svix-id"), h.Get("svix-timestamp"), h.Get("svix-signature")
	if id == "" || ts == "" || sigs == "" {
		id, ts, sigs = h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
		if id == "" || ts == "" || sigs == "" {
			return &WebhookError{Reason: "missing_headers"}
		}
	}
	// Only canonical decimal seconds: the timestamp string is part of the
	// signed content, so accepting "+1" or "01" would let two header
	// spellings share one signature.
	if !canonicalUnixSeconds(ts) {
		return &WebhookError{Reason: "invalid_timestamp"}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return &WebhookError{Reason: "invalid_timestamp"}
	}
	// The same boundaries as the Svix library: "too old" compares the exact
	// clock reading, "too new" compares whole seconds.
	if now.Sub(time.Unix(sec, 0)) > WebhookTolerance {
		return &WebhookError{Reason: "timestamp_too_old"}
	}
	if sec > now.Add(WebhookTolerance).Unix() {
		return &WebhookError{Reason: "timestamp_too_new"}
	}

	mac := hmac.New(sha256.New, v.key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	expected := make([]byte, base64.StdEncoding.EncodedLen(sha256.Size))
	base64.StdEncoding.Encode(expected, mac.Sum(nil))

	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		if hmac.Equal([]byte(sig), expected) {
			return nil
		}
	}
	return &WebhookError{Reason: "no_matching_signature"}
}

func canonicalUnixSeconds(s string) bool {
	if s == "" || len(s) > 18 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// SignWebhook computes the "v1,<base64>" signature of a delivery with the
// given secret, for tests and for the emulator's deliveries.
func SignWebhook(secret, msgID string, timestamp time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return "", ErrInvalidWebhookSecret
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID + "." + strconv.FormatInt(timestamp.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

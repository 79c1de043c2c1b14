package agentmail

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// Error-body inspection limits (docs/email-pipeline.md, "The provider client").
const (
	// MaxErrorBodyBytes is the most of a provider error body that is read;
	// a longer body yields [CodeUnknown].
	MaxErrorBodyBytes = 8 << 10
	// ErrorBodyTimeout bounds the time spent reading a provider error body;
	// a slower body yields [CodeUnknown].
	ErrorBodyTimeout = time.Second
)

var errBodyPanic = errors.New("agentmail: error body reader panicked")

// inspectErrorBody extracts the allowlisted provider code from an error
// response body. It reads at most MaxErrorBodyBytes+1 bytes, gives up after
// ErrorBodyTimeout, and closes body exactly once in every case. Every
// failure (oversized, stalled, unreadable, malformed, unrecognized) yields
// CodeUnknown: the inspection only ever refines an error, it never replaces
// or suppresses it.
func inspectErrorBody(body io.ReadCloser, contentLength int64) string {
	if body == nil {
		return CodeUnknown
	}
	// Closing is the Go counterpart of cancelling the reader: it releases
	// the connection and unblocks the reading goroutine below. A Close error
	// carries no information we could act on.
	defer func() { _ = body.Close() }()
	if contentLength > MaxErrorBodyBytes {
		return CodeUnknown
	}

	type result struct {
		b   []byte
		err error
	}
	// Buffered so the reader goroutine can always finish and exit, even when
	// nobody waits for it any more after the timeout.
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if recover() != nil {
				ch <- result{err: errBodyPanic}
			}
		}()
		b, err := io.ReadAll(io.LimitReader(body, MaxErrorBodyBytes+1))
		ch <- result{b: b, err: err}
	}()

	timer := time.NewTimer(ErrorBodyTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil || len(r.b) > MaxErrorBodyBytes {
			return CodeUnknown
		}
		return providerCodeFromBody(r.b)
	case <-timer.C:
		return CodeUnknown
	}
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// providerCodeFromBody returns the allowlisted code of a provider error
// body, or CodeUnknown. Only a top-level JSON object whose "code" member is
// a string exactly equal to an allowlisted code counts; arrays, null,
// non-string codes, nested codes and malformed JSON do not. Keys are matched
// exactly (encoding/json struct decoding would match "CODE" too).
func providerCodeFromBody(b []byte) string {
	b = bytes.TrimPrefix(b, utf8BOM)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return CodeUnknown
	}
	raw, ok := obj["code"]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return CodeUnknown
	}
	var code string
	if err := json.Unmarshal(raw, &code); err != nil {
		return CodeUnknown
	}
	if !IsProviderCode(code) {
		return CodeUnknown
	}
	return code
}

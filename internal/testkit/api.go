package testkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/paperclipai/paperclipai/internal/apiclient"
)

// API returns the typed client of the API (internal/apiclient, over HTTP)
// with c's credential. Its answers are recorded in c.Seen like Do's, so
// the secret-leak checks see them too. Helpers call typed methods; Do and
// JSON stay for what a typed method cannot express (a malformed body, a
// refusal's raw answer, a path outside /api).
func (c *Client) API() *apiclient.Client {
	return apiclient.New(apiclient.Options{BaseURL: c.Base + "/api", Token: c.Token, RunID: c.RunID,
		HTTP: &http.Client{Transport: seenTransport{seen: c.Seen}}})
}

// seenTransport is the default transport that also records every answer's
// body in seen.
type seenTransport struct{ seen *SyncBuffer }

// RoundTrip sends req and records the answer's body.
func (s seenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	s.seen.Write(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// Must returns the receiver of a typed call's two results: it returns the
// value, failing the test with what when the call failed (a refusal names
// its route, status and message). Use:
// co := testkit.Must(api.CreateCompany(ctx, "Co"))(t, "create company").
func Must[T any](v T, err error) func(t testing.TB, what string) T {
	return func(t testing.TB, what string) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// Status returns the HTTP status of a typed call's refusal (0 for nil or
// for an error that is not an answer).
func Status(err error) int {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// AsMap returns v (an API answer) as the untyped map the JSON helpers
// return, for tests written against those.
func AsMap(t testing.TB, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return m
}

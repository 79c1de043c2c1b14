package httpx_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/httpx"
)

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name, ct, in string
		status       int // 0: success
		msg          string
	}{
		{"ok", "application/json", `{"name":"a"}`, 0, ""},
		{"form content type still parsed", "application/x-www-form-urlencoded", `{"name":"a"}`, 0, ""},
		{"multipart refused", "multipart/form-data; boundary=x", `{}`, http.StatusUnsupportedMediaType, "request body must be JSON"},
		{"empty", "application/json", "  ", http.StatusBadRequest, "request body is required (a JSON object)"},
		{"unknown field", "application/json", `{"nope":1}`, http.StatusBadRequest, `invalid JSON body: unknown field "nope"`},
		{"wrong type", "application/json", `{"name":1}`, http.StatusBadRequest, `invalid JSON body: field "name" must be string`},
		{"trailing data", "application/json", `{"name":"a"} {}`, http.StatusBadRequest, "invalid JSON body: unexpected data after the JSON object"},
		{"truncated", "application/json", `{"name":`, http.StatusBadRequest, "invalid JSON body: malformed JSON: unexpected end of input"},
		{"too large", "application/json", `{"name":"` + strings.Repeat("x", 64) + `"}`, http.StatusRequestEntityTooLarge, "request body exceeds 32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.in))
			r.Header.Set("Content-Type", tc.ct)
			var v body
			err := httpx.DecodeJSON(httptest.NewRecorder(), r, 32, &v)
			if tc.status == 0 {
				if err != nil || v.Name != "a" {
					t.Fatalf("DecodeJSON = %v (%+v)", err, v)
				}
				return
			}
			var he *httpx.Error
			if !errors.As(err, &he) || he.Status != tc.status || he.Message != tc.msg {
				t.Fatalf("DecodeJSON = %#v, want %d %q", err, tc.status, tc.msg)
			}
		})
	}
}

func TestPathID(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.SetPathValue("id", "not-a-uuid")
	if _, err := httpx.PathID(r, "id"); err == nil || err.Error() != "invalid id: must be a UUID" {
		t.Fatalf("PathID = %v", err)
	}
	r.SetPathValue("id", "3f1c2a4e-8d1b-4c1e-9a8f-0b6e2d7c9a10")
	if id, err := httpx.PathID(r, "id"); err != nil || id != "3f1c2a4e-8d1b-4c1e-9a8f-0b6e2d7c9a10" {
		t.Fatalf("PathID = %q, %v", id, err)
	}
}

func TestPublicMessage(t *testing.T) {
	wrapped := errors.Join(errors.New("context"), httpx.Errorf(http.StatusConflict, "Visible %d", 1))
	if got := httpx.PublicMessage(wrapped, "fallback"); got != "Visible 1" {
		t.Errorf("PublicMessage = %q", got)
	}
	if got := httpx.PublicMessage(errors.New("internal detail"), "fallback"); got != "fallback" {
		t.Errorf("PublicMessage = %q", got)
	}
}

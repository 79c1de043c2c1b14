package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultMatch selects the provider requests a fault applies to; empty
// fields match everything.
type FaultMatch struct {
	Method     string `json:"method,omitempty"`
	PathPrefix string `json:"path_prefix,omitempty"`
	// Operation is a fixed operation name such as "send_message" or
	// "create_inbox" (see docs/emulator.md); "request" matches requests
	// no named operation covers.
	Operation string `json:"operation,omitempty"`
}

// Fault is an injected provider failure (POST /_emulator/faults).
//
// With Status set, matching requests are answered with that status after
// DelayMS, without being processed: Body (a JSON value written verbatim,
// or a string written as-is) or else {name, code, message} built from
// Code. With Status unset the request is processed normally and only its
// response is delayed by DelayMS (an idempotent send stays "in flight"
// meanwhile). Stall sends the status line and headers and then never
// finishes the body until the client goes away. Every N > 1 applies the
// fault to every Nth matching request only (the Nth, 2Nth, …); the others
// pass on to the next fault or are served normally, so a test can fail a
// steady share of requests (every 10: 10 %) reproducibly. Times limits how
// many requests the fault affects (0 = unlimited).
type Fault struct {
	ID      string            `json:"id"`
	Match   FaultMatch        `json:"match"`
	Status  int               `json:"status,omitempty"`
	Code    string            `json:"code,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	DelayMS int               `json:"delay_ms,omitempty"`
	Stall   bool              `json:"stall,omitempty"`
	Every   int               `json:"every,omitempty"`
	Times   int               `json:"times,omitempty"`

	// seen counts matching requests (for Every), used affected ones.
	seen, used int
}

type fault = Fault

func (f *Fault) delay() time.Duration { return time.Duration(f.DelayMS) * time.Millisecond }

func (f *Fault) matches(method, rawPath, path, op string) bool {
	if f.Match.Method != "" && !strings.EqualFold(f.Match.Method, method) {
		return false
	}
	if p := f.Match.PathPrefix; p != "" && !strings.HasPrefix(rawPath, p) && !strings.HasPrefix(path, p) {
		return false
	}
	if f.Match.Operation != "" && f.Match.Operation != op {
		return false
	}
	return true
}

// AddFault installs a fault and returns its id.
func (s *Server) AddFault(f Fault) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.ID = "flt_" + randomAlnum(12)
	f.seen, f.used = 0, 0
	cp := f
	s.state.faults = append(s.state.faults, &cp)
	return cp.ID
}

// RemoveFault removes one fault by id (DELETE /_emulator/faults/{id}); it
// wraps ErrNotFound when no such fault is installed.
func (s *Server) RemoveFault(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.state.faults {
		if f.ID == id {
			s.state.faults = append(s.state.faults[:i:i], s.state.faults[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("remove fault %s: %w", id, ErrNotFound)
}

// ClearFaults removes every installed fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.state.faults = nil
	s.mu.Unlock()
}

// matchFault returns a copy of the first matching fault, consuming one of
// its uses.
func (s *Server) matchFault(method, rawPath, path, op string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.state.faults {
		if !f.matches(method, rawPath, path, op) {
			continue
		}
		if f.seen++; f.Every > 1 && f.seen%f.Every != 0 {
			continue
		}
		f.used++
		if f.Times > 0 && f.used >= f.Times {
			s.state.faults = append(s.state.faults[:i:i], s.state.faults[i+1:]...)
		}
		cp := *f
		return &cp
	}
	return nil
}

// serveFault answers a request with an injected failure.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, f *Fault, rec *recorder) {
	if !sleepCtx(r.Context(), f.delay()) {
		rec.WriteHeader(f.Status)
		return
	}
	var body []byte
	switch {
	case len(f.Body) > 0:
		var str string
		if json.Unmarshal(f.Body, &str) == nil {
			body = []byte(str)
		} else {
			body = f.Body
		}
	default:
		e := &apiError{Name: errorNameForStatus(f.Status), Code: f.Code, Message: http.StatusText(f.Status)}
		if f.Code == "missing_permission" || (f.Status == 403 && f.Code != "") {
			e.Message = "Forbidden"
		}
		body, _ = marshalJSON(e)
	}
	rec.Header().Set("Content-Type", "application/json")
	for k, v := range f.Headers {
		rec.Header().Set(k, v)
	}
	if f.Status == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
		rec.Header().Set("Retry-After", "1")
	}
	rec.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rec.WriteHeader(f.Status)
	_, _ = rec.Write(body)
	if f.Stall {
		rec.writeHeadersOnly(w)
		s.stallUntilGone(r)
		return
	}
	rec.flushTo(w)
}

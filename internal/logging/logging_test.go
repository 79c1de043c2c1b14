package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactsRegisteredValuesAndCredentialShapes(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor()
	r.Add("hunter2-secret-value")
	r.Add("abc") // too short to mask safely: ignored
	log := New(&buf, true, slog.LevelDebug, r).With("key", "am_live_0123456789abcdef")
	log.Info("calling with hunter2-secret-value", "auth", "Bearer pcr_AAAAAAAAAAAAAAAA",
		"err", errors.New("boom whsec_c2VjcmV0c2VjcmV0"), slog.Group("g", "inner", "hunter2-secret-value"), "plain", "abc")
	out := buf.String()
	for _, leak := range []string{"hunter2-secret-value", "am_live_0123456789abcdef", "pcr_AAAA", "whsec_c2Vj"} {
		if strings.Contains(out, leak) {
			t.Errorf("leaked %q in %s", leak, out)
		}
	}
	if !strings.Contains(out, "[REDACTED]") || !strings.Contains(out, `"plain":"abc"`) {
		t.Errorf("unexpected output %s", out)
	}
}

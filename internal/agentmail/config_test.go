package agentmail

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateAPIBaseURL(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"https://api.agentmail.to/v0":      "https://api.agentmail.to/v0",
		"https://api.agentmail.eu/v0/":     "https://api.agentmail.eu/v0",
		"HTTPS://proxy.example.com:8443":   "https://proxy.example.com:8443",
		"http://127.0.0.1:3199/v0":         "http://127.0.0.1:3199/v0",
		"http://127.255.0.9/v0":            "http://127.255.0.9/v0",
		"http://localhost:3199/v0":         "http://localhost:3199/v0",
		"http://LOCALHOST/v0":              "http://LOCALHOST/v0",
		"http://[::1]:3199/v0":             "http://[::1]:3199/v0",
		"http://[::ffff:127.0.0.1]:80/v0":  "http://[::ffff:127.0.0.1]:80/v0",
		"https://10.0.0.5/v0":              "https://10.0.0.5/v0",
		"https://api.agentmail.to/v0/x%2F": "https://api.agentmail.to/v0/x%2F",
	}
	for in, want := range ok {
		u, err := ValidateAPIBaseURL(in)
		if err != nil {
			t.Errorf("%q rejected: %v", in, err)
			continue
		}
		if u.String() != want {
			t.Errorf("%q normalized to %q, want %q", in, u.String(), want)
		}
	}
	bad := []string{
		"",
		" https://api.agentmail.to/v0",
		"http://api.agentmail.to/v0",
		"http://10.0.0.5/v0",
		"http://127.1/v0",
		"http://2130706433/v0",
		"http://localhost.evil.com/v0",
		"http://127.0.0.1.nip.io/v0",
		"ftp://127.0.0.1/v0",
		"wss://ws.agentmail.to/v0",
		"https://user:am_secret@api.agentmail.to/v0",
		"https://api.agentmail.to/v0?api_key=am_secret",
		"https://api.agentmail.to/v0#frag",
		"https:///v0",
		"api.agentmail.to/v0",
		"https:api.agentmail.to",
		"://nope",
	}
	for _, in := range bad {
		_, err := ValidateAPIBaseURL(in)
		if !errors.Is(err, ErrInvalidBaseURL) {
			t.Errorf("%q accepted (err %v)", in, err)
			continue
		}
		if strings.Contains(err.Error(), "am_secret") {
			t.Errorf("error echoes the value: %q", err)
		}
	}
}

func TestValidateWebSocketURL(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"wss://ws.agentmail.to/v0", "ws://127.0.0.1:3199/v0", "ws://localhost/v0", "ws://[::1]/v0"} {
		if _, err := ValidateWebSocketURL(in); err != nil {
			t.Errorf("%q rejected: %v", in, err)
		}
	}
	for _, in := range []string{"ws://ws.agentmail.to/v0", "https://ws.agentmail.to/v0", "wss://ws.agentmail.to/v0?api_key=am_x", "wss://am_x@ws.agentmail.to/v0", "ws://192.168.1.1/v0"} {
		if _, err := ValidateWebSocketURL(in); !errors.Is(err, ErrInvalidBaseURL) {
			t.Errorf("%q accepted", in)
		}
	}
}

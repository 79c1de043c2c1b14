package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs the command line in-process and returns its exit code and
// output (stdout and stderr together).
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &out)
	return code, out.String()
}

// The help of the commands an operator types first says what they need:
// every run flag is listed, api names its environment and default URL,
// and emulator send marks only --to as required.
func TestHelpNamesWhatCommandsNeed(t *testing.T) {
	cases := []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"run", "--help"}, []string{"--demo-emulator-listen", "127.0.0.1:3199", "--demo-smtp", "127.0.0.1:2525", "--insecure-local-webhooks"}, nil},
		{[]string{"api", "--help"}, []string{"PAPERCLIP_API_URL", "PAPERCLIP_API_KEY", "PAPERCLIP_RUN_ID", "PAPERCLIP_LISTEN",
			"http://127.0.0.1:3100/api", "--field"}, nil},
		{[]string{"emulator", "send", "--help"}, []string{"send --to ADDR [flags]", "Only --to is required"}, []string{"--subject S --text T"}},
		{[]string{"email", "--help"}, []string{"--company", "PAPERCLIP_COMPANY_ID"}, nil},
		{[]string{"admin", "backup", "--help"}, []string{"--out", "pg_dump", "master key"}, nil},
		{[]string{"activity", "export", "--help"}, []string{"--format", "jsonl or csv", "--task", "ACME-12", "--since", "--out",
			"PAPERCLIP_COMPANY_ID"}, nil},
	}
	for _, c := range cases {
		code, out := runCLI(t, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%v: help still says %q", c.args, w)
			}
		}
	}
}

// --field prints one field of a JSON answer: strings raw (for shell
// capture), other values as JSON; a missing field is an error.
func TestPickField(t *testing.T) {
	answer := []byte(`{"id":"c-1","user":{"id":"u-1","admin":true},"n":3,"list":[{"id":"a"},{"id":"b"}],"none":null}`)
	for path, want := range map[string]string{
		"id": "c-1", "user.id": "u-1", "user.admin": "true", "n": "3", "list.1.id": "b", "none": "null",
		"user": "{\n  \"admin\": true,\n  \"id\": \"u-1\"\n}",
	} {
		got, err := pickField(answer, path)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"missing", "user.missing", "list.2.id", "list.x", "id.deeper", "list.-1"} {
		if _, err := pickField(answer, path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: want an error naming the field, got %v", path, err)
		}
	}
	if got, err := pickField([]byte(`[]`), "0.id"); err == nil {
		t.Errorf("an empty list has no 0.id: got %q", got)
	}
	if _, err := pickField([]byte(`not json`), "id"); err == nil {
		t.Error("a non-JSON answer has no field")
	}
}

// paperclipai uuid prints a fresh version 4 UUID each time.
func TestUUIDCommand(t *testing.T) {
	_, a := runCLI(t, "uuid")
	_, b := runCLI(t, "uuid")
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if len(a) != 36 || a[14] != '4' || a == b {
		t.Fatalf("uuid printed %q and %q", a, b)
	}
}

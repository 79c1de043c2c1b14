package config

import (
	"strings"
	"testing"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestPrecedenceFlagThenEnvThenDefault(t *testing.T) {
	c, err := Load(Flags{Home: "/tmp/h"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:3100" || c.DeploymentMode != ModeLocalTrusted || c.DatabaseURL != "" {
		t.Fatalf("defaults: %+v", c)
	}
	if c.SQLitePath() != "/tmp/h/instance/db/paperclip.db" || c.MasterKeyFile != "/tmp/h/instance/secrets/master.key" {
		t.Fatalf("paths: %s %s", c.SQLitePath(), c.MasterKeyFile)
	}
	c, err = Load(Flags{Home: "/tmp/h"}, env(map[string]string{"PAPERCLIP_LISTEN": "127.0.0.1:9"}))
	if err != nil || c.Listen != "127.0.0.1:9" {
		t.Fatalf("env: %v %s", err, c.Listen)
	}
	c, err = Load(Flags{Home: "/tmp/h", Listen: "127.0.0.1:8"}, env(map[string]string{"PAPERCLIP_LISTEN": "127.0.0.1:9"}))
	if err != nil || c.Listen != "127.0.0.1:8" {
		t.Fatalf("flag must win: %v %s", err, c.Listen)
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		f    Flags
		e    map[string]string
		want string
	}{
		{Flags{Listen: "0.0.0.0:3100"}, nil, "loopback"},
		{Flags{DeploymentMode: "open"}, nil, "unknown deployment mode"},
		{Flags{DatabaseURL: "mysql://x"}, nil, "postgres://"},
		{Flags{PublicURL: "http://example.com"}, nil, "https://"},
		{Flags{}, map[string]string{"PAPERCLIP_ATTACHMENT_MAX_BYTES": "-1"}, "positive"},
	}
	for _, c := range cases {
		c.f.Home = "/tmp/h"
		_, err := Load(c.f, env(c.e))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %v: got %v, want %q", c.f, c.e, err, c.want)
		}
	}
	// Plain-HTTP webhooks: only with the flag, only on loopback.
	local := Flags{Home: "/tmp/h", PublicURL: "http://127.0.0.1:3100", InsecureLocalWebhooks: true}
	if c, err := Load(local, env(nil)); err != nil || !c.InsecureLocalWebhooks {
		t.Fatalf("insecure local webhooks on loopback: %v", err)
	}
	if c, err := Load(Flags{Home: "/tmp/h", PublicURL: "http://localhost:3100"}, env(map[string]string{"PAPERCLIP_INSECURE_LOCAL_WEBHOOKS": "1"})); err != nil || !c.InsecureLocalWebhooks {
		t.Fatalf("insecure local webhooks from the environment: %v", err)
	}
	for _, f := range []Flags{
		{PublicURL: "http://127.0.0.1:3100"},
		{PublicURL: "http://paperclip.example.com", InsecureLocalWebhooks: true},
		{PublicURL: "http://10.0.0.5:3100", InsecureLocalWebhooks: true},
		{PublicURL: "https://paperclip.example.com", InsecureLocalWebhooks: true},
		{InsecureLocalWebhooks: true},
		{PublicURL: "http://127.0.0.1:3100", InsecureLocalWebhooks: true, Listen: "0.0.0.0:3100", DeploymentMode: ModeAuthenticated},
	} {
		f.Home = "/tmp/h"
		if _, err := Load(f, env(nil)); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%+v: got %v, want a loopback refusal", f, err)
		}
	}
	if _, err := Load(Flags{Home: "/tmp/h", Listen: "0.0.0.0:3100", DeploymentMode: ModeAuthenticated}, env(nil)); err != nil {
		t.Fatalf("authenticated mode may listen anywhere: %v", err)
	}
	c, err := Load(Flags{Home: "/tmp/h"}, env(map[string]string{"PAPERCLIP_ALLOWED_ATTACHMENT_TYPES": "Text/Plain, image/png"}))
	if err != nil || strings.Join(c.AllowedAttachments, ",") != "text/plain,image/png" {
		t.Fatalf("allowlist: %v %v", err, c.AllowedAttachments)
	}
}

package config

import (
	"os"
	"strings"
)

// Client is the environment of the CLI's API-calling commands: the
// agent run's variables (docs/agents.md, "The CLI"), or an
// operator's board key and server address.
type Client struct {
	// APIURL is PAPERCLIP_API_URL: the API root (…/api), or "unix:<socket>"
	// inside a sandbox (the run's bridge socket).
	APIURL string
	// Listen is PAPERCLIP_LISTEN, the server address used when APIURL is
	// empty (default 127.0.0.1:3100).
	Listen string
	// APIKey is PAPERCLIP_API_KEY: a run token or a board key.
	APIKey string
	// RunID is PAPERCLIP_RUN_ID, sent with a run token.
	RunID string
	// CompanyID and TaskID are PAPERCLIP_COMPANY_ID and PAPERCLIP_TASK_ID.
	CompanyID, TaskID string
	// AgentMailAPIURL is PAPERCLIP_AGENTMAIL_API_URL (qualification's
	// provider; empty means the default).
	AgentMailAPIURL string
}

// LoadClient reads the CLI's environment (getenv nil: the process's).
func LoadClient(getenv Getenv) Client {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Client{APIURL: getenv("PAPERCLIP_API_URL"), Listen: getenv("PAPERCLIP_LISTEN"), APIKey: getenv("PAPERCLIP_API_KEY"),
		RunID: getenv("PAPERCLIP_RUN_ID"), CompanyID: getenv("PAPERCLIP_COMPANY_ID"), TaskID: getenv("PAPERCLIP_TASK_ID"),
		AgentMailAPIURL: getenv("PAPERCLIP_AGENTMAIL_API_URL")}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:3100"
	}
	return c
}

// Socket returns the bridge socket of a sandboxed run's PAPERCLIP_API_URL
// ("unix:<socket>").
func (c Client) Socket() (string, bool) { return strings.CutPrefix(c.APIURL, "unix:") }

// APIBase is the API root URL to call: PAPERCLIP_API_URL, else the
// listen address's /api. A socket URL is returned as it is (see Socket).
func (c Client) APIBase() string {
	if c.APIURL != "" {
		return strings.TrimRight(c.APIURL, "/")
	}
	return "http://" + c.Listen + "/api"
}

// ServerURL is the server's root URL (no /api): PAPERCLIP_API_URL without
// its /api, unless it is a socket, else the listen address.
func (c Client) ServerURL() string {
	if c.APIURL != "" && !strings.HasPrefix(c.APIURL, "unix:") {
		return strings.TrimSuffix(strings.TrimRight(c.APIURL, "/"), "/api")
	}
	return "http://" + c.Listen
}

package ui

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// agentForm is the new/edit agent form's state, kept as typed text so a
// failed submit re-renders exactly what the user entered.
type agentForm struct {
	Name, Adapter, Command, Args, Env, Cwd, Timeout string
	URL, Headers                                    string
	Environment, Budget, Status                     string
	Trust, Kind, Project, Task                      string
	// Claude Code (claude_local) and Codex (codex_local) settings of the
	// agent.
	ClaudeModel, AllowedTools, MaxTurns              string
	CodexModel, PriceInput, PriceCached, PriceOutput string
	// CLI is the instance setting of each CLI adapter type (what executes
	// on the host), keyed by adapter type. It is read from and written to
	// the instance settings for instance administrators only; for anyone
	// else it stays nil, whatever the request carried.
	CLI map[string]cliSettingsForm
}

// ShowCLISettings reports whether the form shows the instance settings of
// the CLI adapters (to instance administrators only).
func (f agentForm) ShowCLISettings() bool { return f.CLI != nil }

// cliSettingsForm is one CLI adapter's instance setting as typed (lists
// one entry per line).
type cliSettingsForm struct {
	Command, InstallDir, PassEnv, EgressHosts string
}

type agentFormData struct {
	Form         agentForm
	Edit         bool
	Agent        domain.Agent
	Environments []domain.Environment
	Projects     []domain.Project
	Tasks        []domain.Issue
	Err          *APIError
}

// cliTypes are the CLI adapter types in the order the form offers them.
var cliTypes = []string{agentcli.Claude, agentcli.Codex}

func settingsForm(s domain.AgentCLISettings) cliSettingsForm {
	return cliSettingsForm{Command: s.Command, InstallDir: s.InstallDir,
		PassEnv: strings.Join(s.PassEnv, "\n"), EgressHosts: strings.Join(s.EgressHosts, "\n")}
}

func (f cliSettingsForm) settings() domain.AgentCLISettings {
	return domain.AgentCLISettings{Command: strings.TrimSpace(f.Command), InstallDir: strings.TrimSpace(f.InstallDir),
		PassEnv: lines(f.PassEnv, true), EgressHosts: lines(f.EgressHosts, true)}
}

// lines splits a one-entry-per-line textarea, skipping blank lines
// (trimming each entry when trim is set).
func lines(s string, trim bool) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if trim {
			l = strings.TrimSpace(l)
		}
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func formatPrice(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func formFromAgent(a domain.Agent) agentForm {
	f := agentForm{Name: a.Name, Adapter: a.AdapterType, Environment: a.EnvironmentID, Status: a.Status,
		Trust: a.Permissions.TrustPreset, Kind: "project"}
	if a.BudgetMonthlyCents > 0 {
		f.Budget = strconv.FormatFloat(float64(a.BudgetMonthlyCents)/100, 'f', 2, 64)
	}
	if b := a.Permissions.Boundary(); b != nil {
		if b.RootIssueID != "" {
			f.Kind, f.Task = "task", b.RootIssueID
		} else if len(b.ProjectIDs) > 0 {
			f.Project = b.ProjectIDs[0]
		}
	}
	switch a.AdapterType {
	case "process":
		var p domain.ProcessAdapterConfig
		_ = json.Unmarshal(a.AdapterConfig, &p)
		f.Command, f.Args, f.Cwd = p.Command, strings.Join(p.Args, "\n"), p.Cwd
		f.Env = joinPairs(p.Env, "=")
		if p.TimeoutSec > 0 {
			f.Timeout = strconv.Itoa(p.TimeoutSec)
		}
	case "http":
		var h domain.HTTPAdapterConfig
		_ = json.Unmarshal(a.AdapterConfig, &h)
		f.URL, f.Headers = h.URL, joinPairs(h.Headers, ": ")
		if h.TimeoutSec > 0 {
			f.Timeout = strconv.Itoa(h.TimeoutSec)
		}
	case agentcli.Claude, agentcli.Codex:
		var c agentcli.Config
		_ = json.Unmarshal(a.AdapterConfig, &c)
		if c.TimeoutSec > 0 {
			f.Timeout = strconv.Itoa(c.TimeoutSec)
		}
		if a.AdapterType == agentcli.Claude {
			f.ClaudeModel, f.AllowedTools = c.Model, strings.Join(c.AllowedTools, "\n")
			if c.MaxTurns > 0 {
				f.MaxTurns = strconv.Itoa(c.MaxTurns)
			}
			break
		}
		f.CodexModel = c.Model
		if p := c.Pricing; p != nil {
			f.PriceInput, f.PriceCached, f.PriceOutput = formatPrice(p.InputPerMTok), formatPrice(p.CachedInputPerMTok), formatPrice(p.OutputPerMTok)
		}
	}
	return f
}

func joinPairs(m map[string]string, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + sep + m[k]
	}
	return strings.Join(lines, "\n")
}

// splitPairs parses "KEY<sep>VALUE" lines; blank lines are skipped.
func splitPairs(s, sep, what string) (map[string]string, *APIError) {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &APIError{Status: http.StatusBadRequest, Message: what + ": each line must look like NAME" + sep + "value"}
		}
		out[k] = strings.TrimSpace(v)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func readAgentForm(c *rc) agentForm {
	f := agentForm{Name: c.form("name"), Adapter: c.form("adapter"), Command: strings.TrimSpace(c.form("command")),
		Args: c.form("args"), Env: c.form("env"), Cwd: strings.TrimSpace(c.form("cwd")), Timeout: strings.TrimSpace(c.form("timeout")),
		URL: strings.TrimSpace(c.form("url")), Headers: c.form("headers"), Environment: c.form("environment"),
		Budget: strings.TrimSpace(c.form("budget")), Status: c.form("status"), Trust: c.form("trust"), Kind: c.form("kind"),
		Project: c.form("project"), Task: c.form("task"),
		ClaudeModel: strings.TrimSpace(c.form("claudeModel")), AllowedTools: c.form("allowedTools"), MaxTurns: strings.TrimSpace(c.form("maxTurns")),
		CodexModel: strings.TrimSpace(c.form("codexModel")), PriceInput: strings.TrimSpace(c.form("priceInput")),
		PriceCached: strings.TrimSpace(c.form("priceCached")), PriceOutput: strings.TrimSpace(c.form("priceOutput"))}
	// The instance settings are read only from an instance administrator's
	// form: anyone else's request never touches them, whatever it carries.
	if c.caps.InstanceAdmin {
		f.CLI = map[string]cliSettingsForm{}
		for _, typ := range cliTypes {
			f.CLI[typ] = cliSettingsForm{Command: c.form(typ + ".command"), InstallDir: c.form(typ + ".installDir"),
				PassEnv: c.form(typ + ".passEnv"), EgressHosts: c.form(typ + ".egressHosts")}
		}
	}
	return f
}

// adapterConfig builds the adapter type and config from the form.
func (f agentForm) adapterConfig() (string, any, *APIError) {
	timeout := 0
	if f.Timeout != "" {
		n, err := strconv.Atoi(f.Timeout)
		if err != nil || n < 0 {
			return "", nil, &APIError{Status: http.StatusBadRequest, Message: "Timeout must be a whole number of seconds."}
		}
		timeout = n
	}
	switch f.Adapter {
	case "http":
		h, e := splitPairs(f.Headers, ":", "Headers")
		if e != nil {
			return "", nil, e
		}
		return "http", domain.HTTPAdapterConfig{URL: f.URL, Headers: h, TimeoutSec: timeout}, nil
	case agentcli.Claude:
		cfg := agentcli.Config{Model: f.ClaudeModel, AllowedTools: lines(f.AllowedTools, true), TimeoutSec: timeout}
		if f.MaxTurns != "" {
			n, err := strconv.Atoi(f.MaxTurns)
			if err != nil || n < 0 {
				return "", nil, &APIError{Status: http.StatusBadRequest, Message: "Max turns must be a whole number (0 or empty keeps Claude Code’s default)."}
			}
			cfg.MaxTurns = n
		}
		return agentcli.Claude, cfg, nil
	case agentcli.Codex:
		cfg := agentcli.Config{Model: f.CodexModel, TimeoutSec: timeout}
		if f.PriceInput != "" || f.PriceCached != "" || f.PriceOutput != "" {
			var p agentcli.Pricing
			for _, v := range []struct {
				text string
				dst  *float64
			}{{f.PriceInput, &p.InputPerMTok}, {f.PriceCached, &p.CachedInputPerMTok}, {f.PriceOutput, &p.OutputPerMTok}} {
				if v.text == "" {
					continue
				}
				n, err := strconv.ParseFloat(strings.TrimPrefix(v.text, "$"), 64)
				if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
					return "", nil, &APIError{Status: http.StatusBadRequest, Message: "Prices must be amounts in USD per million tokens."}
				}
				*v.dst = n
			}
			cfg.Pricing = &p
		}
		return agentcli.Codex, cfg, nil
	case "process", "":
	default:
		return "", nil, &APIError{Status: http.StatusBadRequest, Message: "Choose an adapter: process, HTTP, Claude Code or Codex."}
	}
	env, e := splitPairs(f.Env, "=", "Environment")
	if e != nil {
		return "", nil, e
	}
	return "process", domain.ProcessAdapterConfig{Command: f.Command, Args: lines(f.Args, false), Env: env, Cwd: f.Cwd, TimeoutSec: timeout}, nil
}

// body turns the form into an agent create/patch body. On edit, the
// adapter config is sent only when it changed, so renaming an agent never
// rewrites (or needs the rights to rewrite) how it runs.
func (f agentForm) body(current *domain.Agent) (apiclient.AgentInput, *APIError) {
	typ, cfg, e := f.adapterConfig()
	if e != nil {
		return apiclient.AgentInput{}, e
	}
	name, env := f.Name, f.Environment
	body := apiclient.AgentInput{Name: &name, EnvironmentID: &env}
	raw, _ := json.Marshal(cfg)
	if current == nil || typ != current.AdapterType || !sameJSON(raw, currentConfig(*current)) {
		body.AdapterType, body.AdapterConfig = &typ, raw
	}
	budget := int64(0)
	if f.Budget != "" {
		v, err := strconv.ParseFloat(strings.TrimPrefix(f.Budget, "$"), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || v > 1e9 {
			return apiclient.AgentInput{}, &APIError{Status: http.StatusBadRequest, Message: "Monthly budget must be an amount in USD (0 means unlimited)."}
		}
		budget = int64(math.Round(v * 100))
	}
	body.BudgetMonthlyCents = &budget
	if current != nil && f.Status != "" && f.Status != current.Status {
		status := f.Status
		body.Status = &status
	}
	perms := domain.AgentPermissions{TrustPreset: f.Trust, AuthorizationPolicy: &domain.AuthorizationPolicy{}}
	if f.Trust == domain.TrustLowTrustReview {
		switch {
		case f.Kind == "task" && f.Task != "":
			perms.AuthorizationPolicy.TrustBoundary = &domain.TrustBoundary{RootIssueID: f.Task}
		case f.Kind != "task" && f.Project != "":
			perms.AuthorizationPolicy.TrustBoundary = &domain.TrustBoundary{ProjectIDs: []string{f.Project}}
		}
	}
	if f.Trust == "" {
		perms.TrustPreset = domain.TrustStandard
	}
	body.Permissions = &perms
	return body, nil
}

// currentConfig is the agent's stored adapter config as the form would
// write it: a CLI agent's config decoded and encoded again, so fields
// stored in another spelling (an empty list, a zero) do not count as a
// change.
func currentConfig(a domain.Agent) []byte {
	if slices.Contains(cliTypes, a.AdapterType) {
		if c, err := agentcli.ParseConfig(a.AdapterType, a.AdapterConfig); err == nil {
			raw, _ := json.Marshal(c)
			return raw
		}
	}
	return a.AdapterConfig
}

// cliSettingsPatch is the instance settings change an instance
// administrator's form asks for: the chosen CLI adapter's setting when it
// differs from the stored one, validated before anything is written; nil
// when there is none (another adapter, no change, not an administrator).
func (f agentForm) cliSettingsPatch(current domain.InstanceSettings) (*apiclient.SettingsPatch, *APIError) {
	in, ok := f.CLI[f.Adapter]
	if f.CLI == nil || !ok {
		return nil, nil
	}
	want := in.settings()
	if err := agentcli.CheckSettings(want); err != nil {
		return nil, &APIError{Status: http.StatusBadRequest,
			Message: "Instance setting of " + f.Adapter + ": " + strings.TrimPrefix(err.Error(), agentcli.ErrInvalidConfig.Error()+": ")}
	}
	have := current.AgentCLI[f.Adapter]
	if want.Command == have.Command && want.InstallDir == have.InstallDir &&
		slices.Equal(want.PassEnv, have.PassEnv) && slices.Equal(want.EgressHosts, have.EgressHosts) {
		return nil, nil
	}
	return &apiclient.SettingsPatch{AgentCLI: map[string]*domain.AgentCLISettings{f.Adapter: &want}}, nil
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ra, _ := json.Marshal(x)
	rb, _ := json.Marshal(y)
	return string(ra) == string(rb)
}

func (u *UI) newAgentPage(c *rc) {
	u.renderAgentForm(c, http.StatusOK, agentFormData{Form: agentForm{Adapter: "process", Trust: domain.TrustStandard, Kind: "project", Timeout: "120"}})
}

func (u *UI) editAgentPage(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	u.renderAgentForm(c, http.StatusOK, agentFormData{Form: formFromAgent(a), Edit: true, Agent: a})
}

func (u *UI) renderAgentForm(c *rc, status int, d agentFormData) {
	if !c.caps.Write {
		c.forbidden(c.routeAction(), "")
		return
	}
	if !c.caps.InstanceAdmin {
		d.Form.CLI = nil
	} else if d.Form.CLI == nil {
		d.Form.CLI = map[string]cliSettingsForm{}
		if v, e := u.instanceSettings(c); e == nil {
			for _, typ := range cliTypes {
				d.Form.CLI[typ] = settingsForm(v.AgentCLI[typ])
			}
		}
	}
	_ = into(c, &d.Environments)(c.cl().Environments(c.ctx(), c.cid))
	_ = all(c, c.cl().Projects(c.cid), nil, &d.Projects)
	_, _ = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "200"), &d.Tasks)
	title, crumbs := "New agent", []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {"New agent", ""}}
	if d.Edit {
		title = "Edit " + d.Agent.Name
		crumbs = []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {d.Agent.Name, "/c/" + c.cid + "/agents/" + d.Agent.ID}, {"Edit", ""}}
	}
	c.render(status, "agent_form", view{Title: title, Nav: "agents", Crumbs: crumbs, Data: d})
}

// instanceSettings reads the instance settings (instance administrators).
func (u *UI) instanceSettings(c *rc) (domain.InstanceSettings, *APIError) {
	v, err := c.cl().Settings(c.ctx())
	return v, c.check(err)
}

// formChanges turns the form into the agent body and, for an instance
// administrator, the instance settings patch; both are validated before
// anything is written.
func (u *UI) formChanges(c *rc, f agentForm, current *domain.Agent) (apiclient.AgentInput, *apiclient.SettingsPatch, *APIError) {
	body, e := f.body(current)
	if e != nil || f.CLI == nil {
		return body, nil, e
	}
	v, e := u.instanceSettings(c)
	if e != nil {
		return apiclient.AgentInput{}, nil, e
	}
	patch, e := f.cliSettingsPatch(v)
	return body, patch, e
}

// saveCLISettings applies the instance settings patch after the agent was
// written. The agent write goes first: it is the one users get wrong, and
// the settings were validated already.
func (u *UI) saveCLISettings(c *rc, patch *apiclient.SettingsPatch) *APIError {
	if patch == nil {
		return nil
	}
	if _, err := c.cl().PatchSettings(c.ctx(), *patch); err != nil {
		e := c.check(err)
		return &APIError{Status: e.Status, Message: "The agent was saved, but the instance setting was not: " + e.Message}
	}
	return nil
}

func (u *UI) createAgent(c *rc) {
	f := readAgentForm(c)
	body, patch, e := u.formChanges(c, f, nil)
	if e == nil {
		a, err := c.cl().CreateAgent(c.ctx(), c.cid, body)
		if e = c.check(err); e == nil {
			if se := u.saveCLISettings(c, patch); se != nil {
				// The agent exists: never offer to create it again.
				c.redirect("/c/"+c.cid+"/agents/"+a.ID+"/edit", se.Message)
				return
			}
			c.redirect("/c/"+c.cid+"/agents/"+a.ID, flashAgentCreated)
			return
		}
	}
	u.renderAgentForm(c, e.Status, agentFormData{Form: f, Err: e})
}

func (u *UI) saveAgent(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	f := readAgentForm(c)
	body, patch, e := u.formChanges(c, f, &a)
	if e == nil {
		_, err := c.cl().PatchAgent(c.ctx(), a.ID, body)
		if e = c.check(err); e == nil {
			if e = u.saveCLISettings(c, patch); e == nil {
				c.redirect("/c/"+c.cid+"/agents/"+a.ID, flashAgentSaved)
				return
			}
		}
	}
	if e.Status == http.StatusNotFound {
		c.fail(e)
		return
	}
	u.renderAgentForm(c, e.Status, agentFormData{Form: f, Edit: true, Agent: a, Err: e})
}

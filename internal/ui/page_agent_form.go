package ui

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// agentForm is the new/edit agent form's state, kept as typed text so a
// failed submit re-renders exactly what the user entered.
type agentForm struct {
	Name, Adapter, Command, Args, Env, Cwd, Timeout string
	URL, Headers                                    string
	Environment, Budget, Status                     string
	Trust, Kind, Project, Task                      string
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
	return agentForm{Name: c.form("name"), Adapter: c.form("adapter"), Command: strings.TrimSpace(c.form("command")),
		Args: c.form("args"), Env: c.form("env"), Cwd: strings.TrimSpace(c.form("cwd")), Timeout: strings.TrimSpace(c.form("timeout")),
		URL: strings.TrimSpace(c.form("url")), Headers: c.form("headers"), Environment: c.form("environment"),
		Budget: strings.TrimSpace(c.form("budget")), Status: c.form("status"), Trust: c.form("trust"), Kind: c.form("kind"),
		Project: c.form("project"), Task: c.form("task")}
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
	if f.Adapter == "http" {
		h, e := splitPairs(f.Headers, ":", "Headers")
		if e != nil {
			return "", nil, e
		}
		return "http", domain.HTTPAdapterConfig{URL: f.URL, Headers: h, TimeoutSec: timeout}, nil
	}
	env, e := splitPairs(f.Env, "=", "Environment")
	if e != nil {
		return "", nil, e
	}
	var args []string
	for _, a := range strings.Split(f.Args, "\n") {
		if a = strings.TrimRight(a, "\r"); strings.TrimSpace(a) != "" {
			args = append(args, a)
		}
	}
	return "process", domain.ProcessAdapterConfig{Command: f.Command, Args: args, Env: env, Cwd: f.Cwd, TimeoutSec: timeout}, nil
}

// body turns the form into an agent create/patch body. On edit, the
// adapter config is sent only when it changed, so renaming an agent never
// rewrites (or needs the rights to rewrite) how it runs.
func (f agentForm) body(current *domain.Agent) (map[string]any, *APIError) {
	typ, cfg, e := f.adapterConfig()
	if e != nil {
		return nil, e
	}
	body := map[string]any{"name": f.Name, "environmentId": f.Environment}
	raw, _ := json.Marshal(cfg)
	if current == nil || typ != current.AdapterType || !sameJSON(raw, current.AdapterConfig) {
		body["adapterType"], body["adapterConfig"] = typ, cfg
	}
	budget := int64(0)
	if f.Budget != "" {
		v, err := strconv.ParseFloat(strings.TrimPrefix(f.Budget, "$"), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || v > 1e9 {
			return nil, &APIError{Status: http.StatusBadRequest, Message: "Monthly budget must be an amount in USD (0 means unlimited)."}
		}
		budget = int64(math.Round(v * 100))
	}
	body["budgetMonthlyCents"] = budget
	if current != nil && f.Status != "" && f.Status != current.Status {
		body["status"] = f.Status
	}
	perms := map[string]any{"trustPreset": f.Trust, "authorizationPolicy": map[string]any{}}
	if f.Trust == domain.TrustLowTrustReview {
		switch {
		case f.Kind == "task" && f.Task != "":
			perms["authorizationPolicy"] = map[string]any{"trustBoundary": map[string]any{"rootIssueId": f.Task}}
		case f.Kind != "task" && f.Project != "":
			perms["authorizationPolicy"] = map[string]any{"trustBoundary": map[string]any{"projectIds": []string{f.Project}}}
		}
	}
	if f.Trust == "" {
		perms["trustPreset"] = domain.TrustStandard
	}
	body["permissions"] = perms
	return body, nil
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
		c.errorPage(http.StatusForbidden, "You don’t have permission to change agents.")
		return
	}
	_ = c.api("GET", "/companies/"+c.cid+"/environments", nil, &d.Environments)
	_ = c.api("GET", "/companies/"+c.cid+"/projects", nil, &d.Projects)
	_ = c.api("GET", "/companies/"+c.cid+"/issues?limit=200", nil, &d.Tasks)
	title, crumbs := "New agent", []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {"New agent", ""}}
	if d.Edit {
		title = "Edit " + d.Agent.Name
		crumbs = []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {d.Agent.Name, "/c/" + c.cid + "/agents/" + d.Agent.ID}, {"Edit", ""}}
	}
	c.render(status, "agent_form", view{Title: title, Nav: "agents", Crumbs: crumbs, Data: d})
}

func (u *UI) createAgent(c *rc) {
	f := readAgentForm(c)
	body, e := f.body(nil)
	if e == nil {
		var a domain.Agent
		if e = c.api("POST", "/companies/"+c.cid+"/agents", body, &a); e == nil {
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
	body, e := f.body(&a)
	if e == nil {
		if e = c.api("PATCH", "/agents/"+a.ID, body, nil); e == nil {
			c.redirect("/c/"+c.cid+"/agents/"+a.ID, flashAgentSaved)
			return
		}
	}
	if e.Status == http.StatusNotFound {
		c.fail(e)
		return
	}
	u.renderAgentForm(c, e.Status, agentFormData{Form: f, Edit: true, Agent: a, Err: e})
}

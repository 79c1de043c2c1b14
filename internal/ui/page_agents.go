package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

type agentRow struct {
	domain.Agent
	Addresses []string
	LastRun   *domain.Run
}

type agentsData struct {
	Rows    []agentRow
	EmailOn bool
}

func (u *UI) agentsPage(c *rc) {
	list, _, e := c.agents()
	if e != nil {
		c.fail(e)
		return
	}
	var runs []domain.Run
	if _, e := page(c, c.cl().Runs(c.cid), apiclient.Query("limit", "200"), &runs); e != nil {
		c.fail(e)
		return
	}
	last := map[string]*domain.Run{}
	for i := range runs {
		if last[runs[i].AgentID] == nil {
			last[runs[i].AgentID] = &runs[i]
		}
	}
	d := agentsData{}
	inb := c.inboxes()
	d.EmailOn = inb != nil
	addrs := map[string][]string{}
	for _, ib := range inb {
		if ib.Address != nil && ib.Status != "archived" {
			addrs[ib.AssignedAgentID] = append(addrs[ib.AssignedAgentID], *ib.Address)
		}
	}
	for _, a := range list {
		d.Rows = append(d.Rows, agentRow{Agent: a, Addresses: addrs[a.ID], LastRun: last[a.ID]})
	}
	sort.SliceStable(d.Rows, func(i, j int) bool { return d.Rows[i].Name < d.Rows[j].Name })
	c.render(http.StatusOK, "agents", view{Title: "Agents", Nav: "agents", Data: d})
}

// loadAgent reads the path's agent and checks it belongs to the company.
func (c *rc) loadAgent() (domain.Agent, bool) {
	return loadOwned(c, "aid", c.cl().Agent, func(a *domain.Agent) string { return a.CompanyID })
}

// loadOwned reads the thing whose id is the path value param with the
// API call get and checks that it belongs to the company (companyOf
// reads its company id); it answers, and returns false, when not.
func loadOwned[T any](c *rc, param string, get func(context.Context, string) (T, error), companyOf func(*T) string) (T, bool) {
	var v T
	id, ok := c.requirePathID(param)
	if !ok {
		return v, false
	}
	if e := into(c, &v)(get(c.ctx(), id)); e != nil {
		c.fail(e)
		return v, false
	}
	if companyOf(&v) != c.cid {
		c.notFound()
		return v, false
	}
	return v, true
}

type agentData struct {
	Agent        domain.Agent
	AdapterLabel string
	Process      *domain.ProcessAdapterConfig
	HTTP         *domain.HTTPAdapterConfig
	CLI          *agentcli.Config
	// Pricing describes a Codex agent's prices.
	Pricing     string
	EnvKeys     []string
	Environment *domain.Environment
	Inboxes     []domain.EmailEndpointSummary
	EmailOn     bool
	Tasks       []domain.Issue
	Runs        []runRow
	// CLIRuns is set when any listed run has a session or usage.
	CLIRuns  bool
	Boundary string
	Budget   string
	Spent    string
}

// runRow is a run in a list, with its usage spelled out.
type runRow struct {
	domain.Run
	Cost, Tokens string
}

func newRunRow(r domain.Run) runRow {
	row := runRow{Run: r}
	if u := r.Usage; u != nil {
		row.Cost, row.Tokens = usd(u.CostMicros), tokens(*u)
	}
	return row
}

func cents(n int64) string { return fmt.Sprintf("$%d.%02d", n/100, n%100) }

// usd spells an amount in millionths of a US dollar, to the hundredth of
// a cent (what a single CLI run typically costs).
func usd(micros int64) string {
	return "$" + strconv.FormatFloat(float64(micros)/1e6, 'f', 4, 64)
}

// tokens spells a run's token counts.
func tokens(u domain.RunUsage) string {
	parts := []string{thousands(u.InputTokens) + " in"}
	if u.CachedInputTokens > 0 {
		parts = append(parts, thousands(u.CachedInputTokens)+" cached")
	}
	if u.CacheCreationTokens > 0 {
		parts = append(parts, thousands(u.CacheCreationTokens)+" cache writes")
	}
	parts = append(parts, thousands(u.OutputTokens)+" out")
	return strings.Join(parts, " · ")
}

// thousands groups a count's digits by three ("12,345").
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// adapterLabels name the adapter types for people.
var adapterLabels = map[string]string{"process": "Process", "http": "HTTP",
	agentcli.Claude: "Claude Code", agentcli.Codex: "Codex"}

func adapterLabel(typ string) string {
	if l, ok := adapterLabels[typ]; ok {
		return l
	}
	return typ
}

// cliConfig decodes a CLI agent's config, or nil for other adapters.
func cliConfig(a domain.Agent) *agentcli.Config {
	if a.AdapterType != agentcli.Claude && a.AdapterType != agentcli.Codex {
		return nil
	}
	var c agentcli.Config
	if json.Unmarshal(a.AdapterConfig, &c) != nil {
		return nil
	}
	return &c
}

func (u *UI) agentPage(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	d := agentData{Agent: a, AdapterLabel: adapterLabel(a.AdapterType), Budget: "Unlimited", Spent: cents(a.SpentMonthlyCents)}
	if a.BudgetMonthlyCents > 0 {
		d.Budget = cents(a.BudgetMonthlyCents) + " a month"
	}
	switch a.AdapterType {
	case "process":
		var p domain.ProcessAdapterConfig
		if json.Unmarshal(a.AdapterConfig, &p) == nil {
			d.Process = &p
			for k := range p.Env {
				d.EnvKeys = append(d.EnvKeys, k)
			}
			sort.Strings(d.EnvKeys)
		}
	case "http":
		var h domain.HTTPAdapterConfig
		if json.Unmarshal(a.AdapterConfig, &h) == nil {
			d.HTTP = &h
		}
	default:
		d.CLI = cliConfig(a)
		if d.CLI != nil && d.CLI.Pricing != nil {
			p := d.CLI.Pricing
			d.Pricing = fmt.Sprintf("$%s input · $%s cached input · $%s output per million tokens",
				formatPrice(p.InputPerMTok), formatPrice(p.CachedInputPerMTok), formatPrice(p.OutputPerMTok))
		}
	}
	if a.EnvironmentID != "" {
		envs, _ := c.cl().Environments(c.ctx(), c.cid)
		for i := range envs {
			if envs[i].ID == a.EnvironmentID {
				d.Environment = &envs[i]
			}
		}
	}
	if inb := c.inboxes(); inb != nil {
		d.EmailOn = true
		for _, ib := range inb {
			if ib.AssignedAgentID == a.ID && ib.Status != "archived" {
				d.Inboxes = append(d.Inboxes, ib)
			}
		}
	}
	d.Boundary = u.boundaryText(c, a)
	if _, e := page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "10", "assigneeAgentId", a.ID), &d.Tasks); e != nil {
		c.fail(e)
		return
	}
	var runs []domain.Run
	if _, e := page(c, c.cl().Runs(c.cid), apiclient.Query("limit", "10", "agentId", a.ID), &runs); e != nil {
		c.fail(e)
		return
	}
	for _, r := range runs {
		d.Runs = append(d.Runs, newRunRow(r))
		d.CLIRuns = d.CLIRuns || r.SessionID != "" || r.Usage != nil
	}
	c.render(http.StatusOK, "agent", view{Title: a.Name, Nav: "agents",
		Crumbs: []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {a.Name, ""}}, Data: d})
}

// boundaryText describes a low-trust agent's work boundary.
func (u *UI) boundaryText(c *rc, a domain.Agent) string {
	b := a.Permissions.Boundary()
	if a.Permissions.TrustPreset != domain.TrustLowTrustReview {
		return ""
	}
	if b == nil || (len(b.ProjectIDs) == 0 && b.RootIssueID == "") {
		return "No work boundary yet"
	}
	if b.RootIssueID != "" {
		if t, err := c.cl().Issue(c.ctx(), b.RootIssueID); c.check(err) == nil {
			return "Root task: " + t.Title
		}
		return "Root task"
	}
	var ps []domain.Project
	_ = all(c, c.cl().Projects(c.cid), nil, &ps)
	for _, p := range ps {
		if p.ID == b.ProjectIDs[0] {
			return "Project: " + p.Name
		}
	}
	return "Project"
}

func (u *UI) agentStatus(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	st := c.form("status")
	if _, err := c.cl().PatchAgent(c.ctx(), a.ID, apiclient.AgentInput{Status: &st}); err != nil {
		c.fail(c.check(err))
		return
	}
	msg := "Agent resumed."
	if st == domain.AgentPaused {
		msg = "Agent paused."
	}
	c.redirect("/c/"+c.cid+"/agents/"+a.ID, msg)
}

func (u *UI) wakeAgent(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	run, err := c.cl().Wake(c.ctx(), a.ID, apiclient.Wakeup{Reason: "manual"})
	e := c.check(err)
	if e != nil && (e.Status == http.StatusForbidden || e.Status == http.StatusNotFound) {
		c.fail(e)
		return
	}
	c.redirect("/c/"+c.cid+"/agents/"+a.ID, wakeFlash("", run, e))
}

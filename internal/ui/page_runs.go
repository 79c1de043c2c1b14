package ui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

type runData struct {
	Run       domain.Run
	Log       apiclient.RunLog
	AgentName string
	// Adapter names the agent's adapter; Model is a CLI agent's model
	// setting ("" for the CLI's default or another adapter).
	Adapter, Model string
	// Cost and Tokens spell the run's usage, when its adapter reported it.
	Cost, Tokens string
	Task         *domain.Issue
	Active       bool
	PollMS       int
	Base         string
}

func (u *UI) runPage(c *rc) {
	rid, ok := c.requirePathID("rid")
	if !ok {
		return
	}
	d := runData{Base: "/c/" + c.cid + "/runs/" + rid}
	if e := into(c, &d.Run)(c.cl().Run(c.ctx(), rid)); e != nil {
		c.fail(e)
		return
	}
	if d.Run.CompanyID != c.cid {
		c.notFound()
		return
	}
	if e := into(c, &d.Log)(c.cl().RunLog(c.ctx(), rid)); e != nil {
		c.fail(e)
		return
	}
	if ag, err := c.cl().Agent(c.ctx(), d.Run.AgentID); c.check(err) == nil {
		d.AgentName, d.Adapter = ag.Name, adapterLabel(ag.AdapterType)
		if cfg := cliConfig(ag); cfg != nil {
			d.Model = cfg.Model
			if d.Model == "" {
				d.Model = "CLI default"
			}
		}
	}
	row := newRunRow(d.Run)
	d.Cost, d.Tokens = row.Cost, row.Tokens
	if d.Run.IssueID != "" {
		if t, err := c.cl().Issue(c.ctx(), d.Run.IssueID); c.check(err) == nil {
			d.Task = &t
		}
	}
	d.Active = !d.Run.Terminal()
	d.PollMS = u.pollInterval(2000)
	c.render(http.StatusOK, "run", view{Title: "Run " + shortID(rid), Nav: "runs",
		Crumbs: []crumb{{"Runs", "/c/" + c.cid + "/runs"}, {d.AgentName, "/c/" + c.cid + "/runs?agent=" + d.Run.AgentID}, {"Run " + shortID(rid), ""}}, Data: d})
}

// runsPerPage caps the company Runs page: the newest runs, like a CI list.
const runsPerPage = 100

// runListRow is one run of the company Runs page.
type runListRow struct {
	domain.Run
	AgentName, TaskTitle string
}

// runsData is the company Runs page: the newest runs with their agent,
// task, wake reason, duration and, on failure, error.
type runsData struct {
	Rows     []runListRow
	Agents   []domain.Agent
	Agent    string
	Status   string
	Filtered bool
	Capped   bool
	PollMS   int
	SelfHref string
	FragHref string
}

// runsPage lists the company's runs, newest first, filtered by agent (the
// API's filter) and status (applied to the newest runsPerPage).
func (u *UI) runsPage(c *rc) {
	q := c.r.URL.Query()
	d := runsData{Agent: q.Get("agent"), Status: q.Get("status"), PollMS: u.pollInterval(10000)}
	if d.Agent != "" && !store.ValidID(d.Agent) {
		d.Agent = ""
	}
	if _, ok := runStatusLabels[d.Status]; !ok {
		d.Status = ""
	}
	d.Filtered = d.Agent != "" || d.Status != ""
	api := url.Values{}
	api.Set("limit", strconv.Itoa(runsPerPage))
	if d.Agent != "" {
		api.Set("agentId", d.Agent)
	}
	var runs []domain.Run
	var tasks []domain.Issue
	var idx agentIndex
	var e1, e2, e3 *APIError
	parallel(func() { d.Agents, idx, e1 = c.agents() },
		func() { _, e2 = page(c, c.cl().Runs(c.cid), api, &runs) },
		func() {
			_, e3 = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "200", "sort", "updated"), &tasks)
		})
	for _, e := range []*APIError{e1, e2, e3} {
		if e != nil {
			c.fail(e)
			return
		}
	}
	titles := map[string]string{}
	for _, t := range tasks {
		titles[t.ID] = t.Title
	}
	d.Capped = len(runs) == runsPerPage
	for _, r := range runs {
		if d.Status != "" && string(r.Status) != d.Status {
			continue
		}
		d.Rows = append(d.Rows, runListRow{Run: r, AgentName: idx.Name(r.AgentID), TaskTitle: titles[r.IssueID]})
	}
	v := url.Values{}
	if d.Agent != "" {
		v.Set("agent", d.Agent)
	}
	if d.Status != "" {
		v.Set("status", d.Status)
	}
	d.SelfHref = "/c/" + c.cid + "/runs"
	if len(v) > 0 {
		d.SelfHref += "?" + v.Encode()
		d.FragHref = d.SelfHref + "&fragment=run-list"
	} else {
		d.FragHref = d.SelfHref + "?fragment=run-list"
	}
	c.render(http.StatusOK, "runs", view{Title: "Runs", Nav: "runs", Data: d})
}

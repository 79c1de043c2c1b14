package ui

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/domain"
)

type runLog struct {
	Content   string `json:"content"`
	SizeBytes int64  `json:"sizeBytes"`
	Truncated bool   `json:"truncated"`
}

type runData struct {
	Run       domain.Run
	Log       runLog
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
	if e := c.api("GET", "/heartbeat-runs/"+rid, nil, &d.Run); e != nil {
		c.fail(e)
		return
	}
	if d.Run.CompanyID != c.cid {
		c.notFound()
		return
	}
	if e := c.api("GET", "/heartbeat-runs/"+rid+"/log", nil, &d.Log); e != nil {
		c.fail(e)
		return
	}
	var ag domain.Agent
	if c.api("GET", "/agents/"+d.Run.AgentID, nil, &ag) == nil {
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
		var t domain.Issue
		if c.api("GET", "/issues/"+d.Run.IssueID, nil, &t) == nil {
			d.Task = &t
		}
	}
	d.Active = !d.Run.Terminal()
	d.PollMS = u.pollInterval(2000)
	c.render(http.StatusOK, "run", view{Title: "Run " + shortID(rid), Nav: "agents",
		Crumbs: []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {d.AgentName, "/c/" + c.cid + "/agents/" + d.Run.AgentID}, {"Run " + shortID(rid), ""}}, Data: d})
}

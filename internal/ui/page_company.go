package ui

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// company wraps a handler of a /c/{cid}/… page: the company must exist and
// be visible to the actor (else the 404 page, also for other companies).
func (u *UI) company(fn func(c *rc)) http.HandlerFunc {
	return u.page(func(c *rc) {
		cid := c.r.PathValue("cid")
		if !store.ValidID(cid) {
			c.notFound()
			return
		}
		co, e := c.chromeCompany(cid)
		if e != nil {
			c.fail(e)
			return
		}
		c.cid = cid
		c.company = companyView{ID: co.ID, Name: co.Name}
		c.caps = c.capsFor(cid)
		fn(c)
	})
}

// chromeCompany loads the page's company with the header's data (the
// actor, and for a whole page the company switcher's list). A whole page
// reads all of it with one /api/me?include=companies and takes the company
// from the list; a company missing from it is read on its own, so that the
// API's refusal (not found, forbidden) decides the page. A fragment, polled
// often, skips the list and reads the actor alongside the company.
func (c *rc) chromeCompany(cid string) (domain.Company, *APIError) {
	var co domain.Company
	if c.r.URL.Query().Get("fragment") == "" {
		for _, listed := range c.Companies() {
			if listed.ID == cid {
				return listed, nil
			}
		}
		return co, into(c, &co)(c.cl().Company(c.ctx(), cid))
	}
	var e *APIError
	parallel(func() { e = into(c, &co)(c.cl().Company(c.ctx(), cid)) }, func() { c.Me() })
	return co, e
}

// pathUUID returns the named path value when it is a UUID.
func (c *rc) pathUUID(name string) (string, bool) {
	v := c.r.PathValue(name)
	return v, store.ValidID(v)
}

// requirePathID is pathUUID that answers "not found" when the path value
// is not an id.
func (c *rc) requirePathID(name string) (string, bool) {
	v, ok := c.pathUUID(name)
	if !ok {
		c.notFound()
	}
	return v, ok
}

// agentIndex maps agent ids to agents.
type agentIndex map[string]domain.Agent

func (c *rc) agents() ([]domain.Agent, agentIndex, *APIError) {
	var list []domain.Agent
	if e := all(c, c.cl().Agents(c.cid), nil, &list); e != nil {
		return nil, nil, e
	}
	idx := agentIndex{}
	for _, a := range list {
		idx[a.ID] = a
	}
	return list, idx, nil
}

// Name returns the agent's name, or "—".
func (ix agentIndex) Name(id string) string {
	if a, ok := ix[id]; ok {
		return a.Name
	}
	if id == "" {
		return "—"
	}
	return "Unknown agent"
}

// inboxes returns the company's email addresses, or nil when email
// connections are off or not visible (email sections are then omitted).
func (c *rc) inboxes() []domain.EmailEndpointSummary {
	var list []domain.EmailEndpointSummary
	if e := all(c, c.cl().Inboxes(c.cid), nil, &list); e != nil {
		return nil
	}
	return list
}

// attentionItem is one "Needs attention" line: a badge, a text linking to
// Href or, when Action is set, a plain text followed by an Action link.
type attentionItem struct {
	Kind, Label, Text, Href, Tone, Action string
	// Reason says in plain words why (an inbox's health message).
	Reason string
}

type overviewData struct {
	Counts      api.IssueCounts
	Open        int
	AgentCount  int
	InboxCount  int
	EmailOn     bool
	Attention   []attentionItem
	RecentTasks []domain.Issue
	RecentRuns  []domain.Run
	Activity    []domain.Activity
	Agents      agentIndex
	PollMS      int
	HasAnyTask  bool
	CompanyPath string
}

func (u *UI) overview(c *rc) {
	d := overviewData{PollMS: u.pollInterval(10000), CompanyPath: "/c/" + c.cid}
	var (
		agents         []domain.Agent
		idx            agentIndex
		runs           []domain.Run
		inb            []domain.EmailEndpointSummary
		e1, e2, e3, e4 *APIError
		blocked        []domain.Issue
	)
	// Independent reads run concurrently: on PostgreSQL each is a few
	// round trips, and the page waits only for the slowest.
	parallel(
		func() { agents, idx, e1 = c.agents() },
		func() { e2 = into(c, &d.Counts)(c.cl().IssueCounts(c.ctx(), c.cid)) },
		func() { _, e3 = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "8"), &d.RecentTasks) },
		func() { _, e4 = page(c, c.cl().Runs(c.cid), apiclient.Query("limit", "50"), &runs) },
		func() { _, _ = page(c, c.cl().Activity(c.cid), apiclient.Query("limit", "8"), &d.Activity) },
		func() { inb = c.inboxes() },
		func() {
			_, _ = page(c, c.cl().Issues(c.cid), apiclient.Query("status", "blocked", "limit", "5"), &blocked)
		},
	)
	for _, e := range []*APIError{e1, e2, e3, e4} {
		if e != nil {
			c.fail(e)
			return
		}
	}
	d.Agents, d.AgentCount = idx, len(agents)
	for _, s := range openStatuses {
		d.Open += d.Counts.ByStatus[s]
	}
	d.HasAnyTask = d.Counts.Total > 0
	d.RecentRuns = runs[:min(len(runs), 8)]

	if inb != nil {
		d.EmailOn = true
		for _, ib := range inb {
			if ib.Status == "archived" {
				continue
			}
			d.InboxCount++
			addr := "An email address"
			if ib.Address != nil {
				addr = *ib.Address
			}
			href := "/c/" + c.cid + "/apps/agentmail/inboxes/" + ib.ID + "/settings"
			action := ""
			if ib.Status == "draft" {
				href, action = "/c/"+c.cid+"/apps/agentmail/setup/"+ib.ID, "Finish setup"
			}
			// The inbox's health gives the badge and, in plain words, the
			// reason; a healthy or still-connecting inbox needs nobody.
			switch ib.Health {
			case domain.HealthSetupIncomplete, domain.HealthPaused, domain.HealthAttention:
				d.Attention = append(d.Attention, attentionItem{Kind: "inbox", Label: labelOr(inboxHealthLabels, ib.Health),
					Tone: tones["health"][ib.Health], Text: addr + " · " + idx.Name(ib.AssignedAgentID), Href: href,
					Action: action, Reason: ib.HealthMessage})
			}
		}
	}
	if d.Counts.ByStatus[domain.IssueBlocked] > 0 {
		for _, t := range blocked {
			d.Attention = append(d.Attention, attentionItem{Kind: "task", Label: "Blocked", Tone: "red", Text: t.Title,
				Href: "/c/" + c.cid + "/tasks/" + t.ID})
		}
	}
	since := u.now().Add(-24 * time.Hour)
	for _, r := range runs {
		if slices.Contains([]string{domain.RunFailed, domain.RunTimedOut}, r.Status) && r.CreatedAt.After(since) {
			d.Attention = append(d.Attention, attentionItem{Kind: "run", Label: labelOr(runStatusLabels, r.Status), Tone: "red",
				Text: "Run " + shortID(r.ID) + " · " + idx.Name(r.AgentID), Href: "/c/" + c.cid + "/runs/" + r.ID})
		}
	}
	c.render(http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}

// parallel runs fns concurrently and waits for all of them. Each fn writes
// only its own variables.
func parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

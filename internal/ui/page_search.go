package ui

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/paperclipai/paperclipai/internal/api"
)

// searchResult is one hit of the company search (GET /api/…/search).
type searchResult api.SearchResult

// SnippetHTML is the snippet as HTML. Why it is trusted: the API (this
// process, api.SnippetHTML) escapes every character of the stored text and
// adds only balanced <mark> tags; TestSearchRanksFiltersAndIsolates checks
// that stored markup comes back escaped.
func (r searchResult) SnippetHTML() template.HTML { return template.HTML(r.Snippet) }

// searchGroup is the results of one kind.
type searchGroup struct {
	Kind, Label string
	Results     []searchResult
}

type searchData struct {
	Q, Kind  string
	Groups   []searchGroup
	Total    int
	NextHref string
	Err      *APIError
}

// Href is where a result opens: the task, at the comment or email card.
func (searchData) Href(cid string, r searchResult) string {
	base := "/c/" + cid + "/tasks/" + r.TaskID
	switch r.Kind {
	case "comment":
		return base + "#comment-" + r.ID
	case "email":
		return base + "#email-" + r.ID
	}
	return base
}

// searchKinds are the result groups, in page order.
var searchKinds = []struct{ Kind, Label string }{{"task", "Tasks"}, {"email", "Email"}, {"comment", "Comments"}}

func (u *UI) searchPage(c *rc) {
	q := c.r.URL.Query()
	d := searchData{Q: strings.TrimSpace(q.Get("q")), Kind: q.Get("kind")}
	if d.Q != "" {
		api := url.Values{"q": {d.Q}, "limit": {"50"}}
		if d.Kind != "" {
			api.Set("kind", d.Kind)
		}
		if cur := q.Get("cursor"); cur != "" {
			api.Set("cursor", cur)
		}
		page, err := c.cl().Search(c.ctx(), c.cid, api)
		if e := c.check(err); e != nil {
			if e.Status != http.StatusBadRequest {
				c.fail(e)
				return
			}
			d.Err = e
		}
		for _, k := range searchKinds {
			g := searchGroup{Kind: k.Kind, Label: k.Label}
			for _, r := range page.Items {
				if r.Kind == k.Kind {
					g.Results = append(g.Results, searchResult(r))
				}
			}
			if len(g.Results) > 0 {
				d.Groups = append(d.Groups, g)
			}
		}
		d.Total = len(page.Items)
		if page.NextCursor != nil {
			next := url.Values{"q": {d.Q}, "cursor": {*page.NextCursor}}
			if d.Kind != "" {
				next.Set("kind", d.Kind)
			}
			d.NextHref = "/c/" + c.cid + "/search?" + next.Encode()
		}
	}
	c.render(http.StatusOK, "search", view{Title: "Search", Nav: "search", Data: d})
}

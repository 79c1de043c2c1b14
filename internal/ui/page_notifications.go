package ui

import (
	"net/http"
	"net/url"
	"time"
)

// Company notification webhooks (docs/email-setup.md, "Notifications"):
// the list with a create form (the signing secret shown once, in the
// creation answer only), delete, and each webhook's delivery log, paged.
// Owners and admins only: the API decides, and refuses everyone else.

const flashWebhookDeleted = "Notification webhook deleted."

// notificationWebhook is a webhook as the API lists it (never its secret).
type notificationWebhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"createdAt"`
}

// notificationsData is the webhooks page.
type notificationsData struct {
	Items     []notificationWebhook
	Events    []string
	NextHref  string
	FirstHref string
	ListErr   *APIError
	CreateErr *APIError
	// Secret and SecretFor are the creation answer: shown on this one page.
	Secret    string
	SecretFor string
	// Form is the submitted create form when it failed.
	FormURL    string
	FormEvents []string
	FormFormat string
}

// webhookDelivery is one entry of a webhook's delivery log.
type webhookDelivery struct {
	ID            string     `json:"id"`
	Event         string     `json:"event"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastStatus    *int       `json:"lastStatus"`
	LastError     *string    `json:"lastError"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	CreatedAt     time.Time  `json:"createdAt"`
	DeliveredAt   *time.Time `json:"deliveredAt"`
}

// webhookDeliveriesData is one webhook's delivery log page.
type webhookDeliveriesData struct {
	Webhook   notificationWebhook
	Items     []webhookDelivery
	NextHref  string
	FirstHref string
	Err       *APIError
}

func (u *UI) notificationRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /c/{cid}/notifications", u.company(u.notificationsPage))
	m.HandleFunc("POST /c/{cid}/notifications", u.company(u.createWebhook))
	m.HandleFunc("POST /c/{cid}/notifications/{wid}/delete", u.company(u.deleteWebhook))
	m.HandleFunc("GET /c/{cid}/notifications/{wid}", u.company(u.webhookDeliveriesPage))
}

func (u *UI) notificationsPage(c *rc) { u.renderNotifications(c, http.StatusOK, notificationsData{}) }

// pageHrefs sets the Load more and first-page links of a cursor-paged page.
func pageHrefs(base, cursor string, next *string) (nextHref, firstHref string) {
	if next != nil {
		nextHref = base + "?cursor=" + url.QueryEscape(*next)
	}
	if cursor != "" {
		firstHref = base
	}
	return nextHref, firstHref
}

func (u *UI) renderNotifications(c *rc, status int, d notificationsData) {
	cursor := c.r.URL.Query().Get("cursor")
	path := "/companies/" + c.cid + "/notification-webhooks"
	if cursor != "" && c.r.Method == http.MethodGet {
		path += "?cursor=" + url.QueryEscape(cursor)
	} else {
		cursor = ""
	}
	var got struct {
		Items      []notificationWebhook `json:"items"`
		NextCursor *string               `json:"nextCursor"`
		Events     []string              `json:"events"`
	}
	if e := c.api("GET", path, nil, &got); e != nil {
		if e.Status == http.StatusForbidden || e.Status == http.StatusNotFound {
			c.fail(e)
			return
		}
		d.ListErr = e
	}
	d.Items, d.Events = got.Items, got.Events
	d.NextHref, d.FirstHref = pageHrefs("/c/"+c.cid+"/notifications", cursor, got.NextCursor)
	if d.FormFormat == "" {
		d.FormFormat = "standard"
	}
	c.render(status, "notifications", view{Title: "Notifications", Nav: "members", Data: d})
}

// createWebhook sends the form to the API and shows the new webhook's
// secret on the answer page itself (never in a redirect, a flash or a
// URL).
func (u *UI) createWebhook(c *rc) {
	d := notificationsData{FormURL: c.form("url"), FormFormat: c.form("format")}
	d.FormEvents = c.r.PostForm["event"] // parsed by c.form
	body := map[string]any{"url": d.FormURL, "events": append([]string{}, d.FormEvents...), "format": d.FormFormat}
	var out struct {
		notificationWebhook
		Secret string `json:"secret"`
	}
	if e := c.api("POST", "/companies/"+c.cid+"/notification-webhooks", body, &out); e != nil {
		if c.refusedUnseen(e, c.caps.Admin) {
			return
		}
		d.CreateErr = e
		u.renderNotifications(c, e.Status, d)
		return
	}
	u.d.Redact(out.Secret)
	u.renderNotifications(c, http.StatusCreated, notificationsData{Secret: out.Secret, SecretFor: out.URL})
}

func (u *UI) deleteWebhook(c *rc) {
	wid, ok := c.pathUUID("wid")
	if !ok {
		c.notFound()
		return
	}
	if e := c.api("DELETE", "/companies/"+c.cid+"/notification-webhooks/"+wid, nil, nil); e != nil {
		if c.refusedUnseen(e, c.caps.Admin) {
			return
		}
		u.renderNotifications(c, e.Status, notificationsData{ListErr: e})
		return
	}
	c.redirect("/c/"+c.cid+"/notifications", flashWebhookDeleted)
}

// webhookDeliveriesPage is one webhook's delivery log, newest first, one
// page at a time ("Load more" follows the API's cursor).
func (u *UI) webhookDeliveriesPage(c *rc) {
	wid, ok := c.pathUUID("wid")
	if !ok {
		c.notFound()
		return
	}
	var d webhookDeliveriesData
	// The webhook itself: found by paging the (at most 20) webhooks.
	var hooks struct {
		Items []notificationWebhook `json:"items"`
	}
	if e := c.api("GET", "/companies/"+c.cid+"/notification-webhooks?limit=200", nil, &hooks); e != nil {
		c.fail(e)
		return
	}
	found := false
	for _, h := range hooks.Items {
		if h.ID == wid {
			d.Webhook, found = h, true
		}
	}
	if !found {
		c.notFound()
		return
	}
	cursor := c.r.URL.Query().Get("cursor")
	path := "/companies/" + c.cid + "/notification-webhooks/" + wid + "/deliveries"
	if cursor != "" {
		path += "?cursor=" + url.QueryEscape(cursor)
	}
	var got struct {
		Items      []webhookDelivery `json:"items"`
		NextCursor *string           `json:"nextCursor"`
	}
	d.Err = c.api("GET", path, nil, &got)
	d.Items = got.Items
	d.NextHref, d.FirstHref = pageHrefs("/c/"+c.cid+"/notifications/"+wid, cursor, got.NextCursor)
	c.render(http.StatusOK, "notification_deliveries", view{Title: "Webhook deliveries", Nav: "members",
		Crumbs: []crumb{{Label: "Notifications", Href: "/c/" + c.cid + "/notifications"}}, Data: d})
}

package ui

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/retention"
)

const flashRetentionSaved = "Retention settings saved."

// retentionData is the data retention page: the company's settings (days,
// or nil to keep for ever) and the space each kind of data uses now.
type retentionData struct {
	Settings retention.Settings
	Usage    retention.Usage
	// Form holds the submitted values when a save failed.
	Form map[string]string
	Err  *APIError
}

func (d retentionData) value(name string, v *int) string {
	if s, ok := d.Form[name]; ok {
		return s
	}
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}

// Values are the form's field values.
func (d retentionData) Values() map[string]string {
	return map[string]string{"emailDays": d.value("emailDays", d.Settings.EmailDays),
		"runLogDays": d.value("runLogDays", d.Settings.RunLogDays), "taskDirDays": d.value("taskDirDays", d.Settings.TaskDirDays)}
}

func (u *UI) retentionPage(c *rc) { u.renderRetention(c, http.StatusOK, retentionData{}) }

func (u *UI) renderRetention(c *rc, status int, d retentionData) {
	got, err := c.cl().Retention(c.ctx(), c.cid)
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	d.Settings = got.Settings
	d.Usage = got.Usage
	c.render(status, "retention", view{Title: "Data retention", Nav: "members", Data: d})
}

// saveRetention sends the form to the API (owners only; the API decides):
// an empty field keeps that kind of data for ever.
func (u *UI) saveRetention(c *rc) {
	form := map[string]string{}
	var body retention.Settings
	for _, f := range []struct {
		name string
		dst  **int
	}{{"emailDays", &body.EmailDays}, {"runLogDays", &body.RunLogDays}, {"taskDirDays", &body.TaskDirDays}} {
		name, dst := f.name, f.dst
		v := strings.TrimSpace(c.form(name))
		form[name] = v
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			u.renderRetention(c, http.StatusBadRequest, retentionData{Form: form,
				Err: &APIError{Status: http.StatusBadRequest, Message: "Days must be whole numbers, or empty to keep for ever."}})
			return
		}
		*dst = &n
	}
	if _, err := c.cl().PutRetention(c.ctx(), c.cid, body); err != nil {
		e := c.check(err)
		if e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		u.renderRetention(c, e.Status, retentionData{Form: form, Err: e})
		return
	}
	c.redirect("/c/"+c.cid+"/retention", flashRetentionSaved)
}

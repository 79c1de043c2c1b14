package ui

import (
	"net/http"
	"strconv"
	"strings"
)

const flashRetentionSaved = "Retention settings saved."

// retentionData is the data retention page: the company's settings (days,
// or nil to keep for ever) and the space each kind of data uses now.
type retentionData struct {
	Settings struct {
		EmailDays   *int `json:"emailDays"`
		RunLogDays  *int `json:"runLogDays"`
		TaskDirDays *int `json:"taskDirDays"`
	}
	Usage struct {
		EmailBytes      int64 `json:"emailBytes"`
		AttachmentBytes int64 `json:"attachmentBytes"`
		RunLogBytes     int64 `json:"runLogBytes"`
		TaskDirBytes    int64 `json:"taskDirBytes"`
	}
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
	var got struct {
		EmailDays   *int `json:"emailDays"`
		RunLogDays  *int `json:"runLogDays"`
		TaskDirDays *int `json:"taskDirDays"`
		Usage       struct {
			EmailBytes      int64 `json:"emailBytes"`
			AttachmentBytes int64 `json:"attachmentBytes"`
			RunLogBytes     int64 `json:"runLogBytes"`
			TaskDirBytes    int64 `json:"taskDirBytes"`
		} `json:"usage"`
	}
	if e := c.api("GET", "/companies/"+c.cid+"/retention", nil, &got); e != nil {
		c.fail(e)
		return
	}
	d.Settings.EmailDays, d.Settings.RunLogDays, d.Settings.TaskDirDays = got.EmailDays, got.RunLogDays, got.TaskDirDays
	d.Usage = got.Usage
	c.render(status, "retention", view{Title: "Data retention", Nav: "members", Data: d})
}

// saveRetention sends the form to the API (owners only; the API decides):
// an empty field keeps that kind of data for ever.
func (u *UI) saveRetention(c *rc) {
	form := map[string]string{}
	body := map[string]any{}
	for _, name := range []string{"emailDays", "runLogDays", "taskDirDays"} {
		v := strings.TrimSpace(c.form(name))
		form[name] = v
		if v == "" {
			body[name] = nil
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			u.renderRetention(c, http.StatusBadRequest, retentionData{Form: form,
				Err: &APIError{Status: http.StatusBadRequest, Message: "Days must be whole numbers, or empty to keep for ever."}})
			return
		}
		body[name] = n
	}
	if e := c.api("PUT", "/companies/"+c.cid+"/retention", body, nil); e != nil {
		if e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		u.renderRetention(c, e.Status, retentionData{Form: form, Err: e})
		return
	}
	c.redirect("/c/"+c.cid+"/retention", flashRetentionSaved)
}

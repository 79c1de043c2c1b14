package ui

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// funcMap returns the template functions: the general ones here and each
// page family's (emailFuncs, taskEmailFuncs, emailListFuncs). None of them
// turns request or stored data into template.HTML except
// RenderComment/RenderPlainText (text.go), which escape first.
func funcMap() template.FuncMap {
	m := baseFuncs()
	for _, more := range []template.FuncMap{emailFuncs(), taskEmailFuncs(), emailListFuncs()} {
		for name, fn := range more {
			if _, dup := m[name]; dup {
				panic("ui: template function " + name + " defined twice")
			}
			m[name] = fn
		}
	}
	return m
}

// baseFuncs are the template functions every page uses.
func baseFuncs() template.FuncMap {
	return template.FuncMap{
		"asset":       assetPath,
		"fieldErr":    fieldError,
		"formErr":     formError,
		"taskStatus":  func(s string) string { return labelOr(taskStatusLabels, s) },
		"priority":    func(s string) string { return labelOr(priorityLabels, s) },
		"runStatus":   func(s string) string { return labelOr(runStatusLabels, s) },
		"refusal":     func(s string) string { return labelOr(refusalLabels, s) },
		"wakeReason":  func(s string) string { return labelOr(wakeReasonLabels, s) },
		"agentStatus": func(s string) string { return labelOr(agentStatusLabels, s) },
		"trust":       func(s string) string { return labelOr(trustLabels, s) },
		"role":        func(s string) string { return labelOr(roleLabels, s) },
		"envStatus":   func(s string) string { return labelOr(envStatusLabels, s) },
		"activity":    func(s string) string { return labelOr(activityLabels, s) },
		"inboxStatus": func(s string) string { return labelOr(inboxStatusLabels, s) },
		"inboxHealth": func(s string) string { return labelOr(inboxHealthLabels, s) },
		"statuses":    func() []string { return taskStatusOrder },
		"priorities":  func() []string { return priorityOrder },
		"iso":         func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"when":        formatTime,
		"whenp":       func(t *time.Time) string { return formatTime(deref(t)) },
		"isop": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"duration":    runDuration,
		"runStatuses": func() []string { return runStatusOrder },
		"bytes":       humanBytes,
		"short":       shortID,
		"comment":     RenderComment,
		"plain":       RenderPlainText,
		"join":        strings.Join,
		// vis shows Unicode format characters (bidirectional overrides,
		// zero-width characters) as visible escapes instead of applying them:
		// used on sender names, subjects, titles and file names.
		"vis":        safetext.ShowFormat,
		"add":        func(a, b int) int { return a + b },
		"prettyJSON": prettyJSON,
		"deref":      deref,
		"list":       func(v ...string) []string { return v },
		"person":     personName,
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
		"contains": func(list []string, s string) bool {
			for _, v := range list {
				if v == s {
					return true
				}
			}
			return false
		},
		"tone": tone,
	}
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// formatTime is the server-side rendering of a time (UTC); app.js rewrites
// it to the browser's locale.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func runDuration(start, end *time.Time) string {
	if start == nil {
		return "—"
	}
	e := time.Now()
	if end != nil {
		e = *end
	}
	d := e.Sub(*start)
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}

func humanBytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func prettyJSON(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return ""
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// tones colour a badge; the badge always carries its text label too.
var tones = map[string]map[string]string{
	"task": {"backlog": "gray", "todo": "slate", "in_progress": "blue", "in_review": "violet", "blocked": "red",
		"done": "green", "cancelled": "gray"},
	"run": {"queued": "slate", "running": "blue", "succeeded": "green", "failed": "red", "cancelled": "gray",
		"timed_out": "amber", "refused": "amber"},
	"agent":    {"active": "green", "paused": "amber", "terminated": "gray", "pending_approval": "amber"},
	"priority": {"critical": "red", "high": "amber", "medium": "slate", "low": "gray"},
	"env":      {"active": "green", "inactive": "gray", "error": "red"},
	"trust":    {"standard": "slate", "low_trust_review": "violet"},
	"inbox":    {"active": "green", "paused": "amber", "draft": "amber", "archived": "gray"},
	"health": {"ok": "green", "connecting": "slate", "attention": "red", "paused": "amber",
		"setup_incomplete": "amber", "disconnected": "gray"},
	// The email list's conversation states (emailListStateLabels).
	"conversation": {"new": "blue", "agent_working": "violet", "reply_pending": "amber",
		"replied": "green", "delivery_failed": "red", "awaiting_review": "slate"},
}

// tone is the colour of value v of a kind of state (tones).
func tone(kind, v string) string {
	if t, ok := tones[kind][v]; ok {
		return t
	}
	return "gray"
}

// personName shows a user: the implicit local-board user by its role, everyone
// else by email.
func personName(email string) string {
	if email == store.LocalBoardEmail {
		return "Local board"
	}
	return email
}

package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// emailFuncs are the template functions of the email pages.
func emailFuncs() template.FuncMap {
	return template.FuncMap{
		"outcomeLabel": func(s string) string {
			if l, ok := taskEmailOutcomeLabels[domain.SendOutcome(s)]; ok {
				return l
			}
			return s
		},
		"deliveryLabel": func(s string) string { return labelOr(deliveryStateLabels, s) },
		"eventLabel":    func(s string) string { return labelOr(eventKindLabels, s) },
		"receiveLabel":  func(s string) string { return labelOr(receiveLabels, s) },
		"receiveReview": func(s string) string { return labelOr(receiveReviewLabels, s) },
		"convState":     func(s string) string { return labelOr(conversationStateLabels, s) },
		"scopeLabel":    scopeLabel,
		"agentText":     agentText,
		"day":           func(t time.Time) string { return t.UTC().Format("2006-01-02") },
		"str":           func(v any) string { return fmt.Sprint(v) },
		"diag":          diagnostics,
	}
}

// scopeLabel names a credential scope; an inbox key names its inbox.
func scopeLabel(scope, inbox string) string {
	if scope == "inbox" && inbox != "" {
		return scopeLabels["inbox"] + " · " + inbox
	}
	return labelOr(scopeLabels, scope)
}

// agentText fills a copy template's {Agent} (and {address}, {inbox}).
func agentText(tmpl, agent string) string {
	return strings.ReplaceAll(tmpl, "{Agent}", agent)
}

func fillText(tmpl string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		tmpl = strings.ReplaceAll(tmpl, "{"+kv[i]+"}", kv[i+1])
	}
	return tmpl
}

// diagView is a provider error's safe diagnostics.
type diagView struct {
	Operation, Status, Code, RequestID string
}

// diagnostics returns the diagnostics of an API error that has any.
func diagnostics(e *APIError) *diagView {
	if e == nil {
		return nil
	}
	d := &diagView{RequestID: e.RequestID}
	if v, ok := e.Details["operation"].(string); ok {
		d.Operation = v
	}
	if v, ok := e.Details["providerStatus"].(float64); ok && v > 0 {
		d.Status = fmt.Sprint(int(v))
	}
	if v, ok := e.Details["code"].(string); ok {
		d.Code = v
	}
	if d.Operation == "" && d.Status == "" && d.Code == "" {
		return nil
	}
	return d
}

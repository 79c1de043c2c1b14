package ui

// Labels and fixed copy of the task email view (the email cards, send
// intents and delivery resolution on the task page).

import (
	"html/template"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// Fixed copy of the task email view.
const (
	taskEmailReceived       = "Email received"
	taskEmailSent           = "Email sent"
	taskEmailIntent         = "Email send intent"
	taskEmailOutgoing       = "Outgoing email"
	taskEmailExternal       = "External"
	taskEmailAutomatic      = "Automatic reply"
	taskEmailAutomaticHint  = "Automatic replies don’t wake the agent."
	taskEmailNoText         = "(No text body)"
	taskEmailShowFull       = "Show full email"
	taskEmailHideFull       = "Hide full email"
	taskEmailDetails        = "Email details"
	taskEmailAttUnavailable = "Attachment unavailable"
	taskEmailReplySubject   = "Email reply"
	taskEmailReplyAll       = "Reply to all"
	taskEmailCancelled      = "This task is cancelled; new email is kept but the agent isn’t woken."
	taskEmailDisabled       = "Email connections are turned off; this task’s email history is hidden until an instance administrator turns them on."
	taskEmailFailedAgain    = "A new send is a new explicit action by the agent."

	taskEmailResolveSummary = "Resolve delivery after checking AgentMail"
	taskEmailResolveIntro   = "Confirm the outcome in AgentMail before resolving. This action does not resend."
	taskEmailResolveOthers  = "A connection manager can resolve this delivery after checking AgentMail."
	taskEmailResolveChecked = "I checked AgentMail: this email was not sent."
	taskEmailResolveNeedBox = "Tick “" + taskEmailResolveChecked + "” to confirm that the email was not sent."
	taskEmailResolveBadID   = "The provider message ID can be at most 998 characters."
	taskEmailExpired        = "Automatic retries stopped: the confirmation window has expired."
	// taskEmailRetrying is the badge of a send the worker still owns after
	// a failed attempt (a provider 503, a timeout): it is retried with the
	// same idempotency key, so nothing needs resolving yet.
	taskEmailRetrying     = "Retrying"
	taskEmailRetryingText = "AgentMail didn’t confirm the last attempt. Paperclip retries with the same idempotency key, so the email goes out at most once."
	// taskEmailPending marks a task whose reply is not sent yet (queued,
	// retrying or uncertain), on the task and in the lists.
	taskEmailPending = "Reply pending"

	flashDeliverySent    = "Delivery marked sent."
	flashDeliveryNotSent = "Delivery marked not sent. Ask the agent to send again if it is still needed."
)

// taskEmailOutcomeLabels are the send outcome badges.
var taskEmailOutcomeLabels = map[domain.SendOutcome]string{
	domain.OutcomeQueued:    "Queued",
	domain.OutcomeSent:      "Sent",
	domain.OutcomeDelivered: "Delivered",
	domain.OutcomeFailed:    "Delivery failed",
	domain.OutcomeUncertain: "Delivery uncertain",
}

// taskEmailOutcomeText explains each outcome in one sentence (failed sends
// show their error instead).
var taskEmailOutcomeText = map[domain.SendOutcome]string{
	domain.OutcomeQueued:    "Paperclip will send this email shortly.",
	domain.OutcomeSent:      "AgentMail accepted the email. Waiting for delivery confirmation.",
	domain.OutcomeDelivered: "The recipient’s mail server accepted the email.",
	domain.OutcomeFailed:    "The email was not sent.",
	domain.OutcomeUncertain: "Paperclip lost confirmation after sending. Check AgentMail before resolving.",
}

// taskEmailOutcomeTones colour the outcome badge (always with its text).
var taskEmailOutcomeTones = map[domain.SendOutcome]string{
	domain.OutcomeQueued: "slate", domain.OutcomeSent: "blue", domain.OutcomeDelivered: "green",
	domain.OutcomeFailed: "red", domain.OutcomeUncertain: "amber",
}

// taskEmailInboxNotes explain an inbox that is not receiving, on the
// task's email box.
var taskEmailInboxNotes = map[string]string{
	"paused":   "new email won’t reach this task until the inbox resumes.",
	"archived": "this inbox is disconnected; new email won’t reach this task.",
	"draft":    "this inbox’s setup is incomplete.",
}

// taskEmailCopyT carries the fixed copy to the templates
// ({{(taskEmailCopy).ShowFull}}), so pages and tests share one spelling.
type taskEmailCopyT struct {
	Received, Sent, Intent, Outgoing, External, Automatic, AutomaticHint, NoText, ShowFull, HideFull, Details,
	AttUnavailable, ReplySubject, ReplyAll, Cancelled, Disabled, FailedAgain, ResolveSummary, ResolveIntro,
	ResolveOthers, ResolveChecked, Expired string
}

var taskEmailCopy = taskEmailCopyT{Received: taskEmailReceived, Sent: taskEmailSent, Intent: taskEmailIntent,
	Outgoing: taskEmailOutgoing, External: taskEmailExternal, Automatic: taskEmailAutomatic,
	AutomaticHint: taskEmailAutomaticHint, NoText: taskEmailNoText, ShowFull: taskEmailShowFull,
	HideFull: taskEmailHideFull, Details: taskEmailDetails, AttUnavailable: taskEmailAttUnavailable,
	ReplySubject: taskEmailReplySubject, ReplyAll: taskEmailReplyAll, Cancelled: taskEmailCancelled,
	Disabled: taskEmailDisabled, FailedAgain: taskEmailFailedAgain, ResolveSummary: taskEmailResolveSummary,
	ResolveIntro: taskEmailResolveIntro, ResolveOthers: taskEmailResolveOthers, ResolveChecked: taskEmailResolveChecked,
	Expired: taskEmailExpired}

// taskEmailFuncs are the template functions of a task's email section.
func taskEmailFuncs() template.FuncMap {
	return template.FuncMap{
		"taskEmailCopy": func() taskEmailCopyT { return taskEmailCopy },
		"pendingLabel":  func() string { return taskEmailPending },
	}
}

package receive

import "github.com/paperclipai/paperclipai/internal/domain"

// facts are what receiving knows about one message of a delivery. They
// grow as the transaction learns more: the conversation lookup sets known
// and status, retention sets retained and claimed, a reopen sets reopened.
type facts struct {
	receipt   bool   // message.sent/delivered/bounced/…: a receipt of our own send, not received mail
	known     bool   // the inbox already has a conversation (a task) for the thread
	automatic bool   // RFC 3834 auto-reply, bounce, list or robot mail (see automatic)
	own       bool   // sent by this inbox (see own)
	retained  bool   // the message is retained on the task
	claimed   bool   // this delivery holds the message's link: its one wake is ours to give
	status    string // the task's status when known
	reopened  bool   // the reopen rule has run for this message
}

// action is the next step of receiving one message.
type action int

const (
	actReceipt action = iota // hand the receipt to the send side; keep the message as context if the thread is known; no task, no wake
	actDrop                  // finish as filtered: no task, no wake
	actCreate                // create the thread's task and conversation
	actRetain                // retain the thread's messages and claim this message's link
	actReopen                // reopen the done task (the reopen limiter may keep it done)
	actKeep                  // finish: the mail stays on the task, nobody is woken
	actWake                  // finish by waking the assigned agent
)

var actionNames = [...]string{"receipt", "drop", "create", "retain", "reopen", "keep", "wake"}

func (a action) String() string { return actionNames[a] }

// decide is the whole receiving policy (docs/email-pipeline.md, "Receiving
// rules"): one task per thread, one wake per eligible message, and
// automatic mail and our own mail never create a task, wake an agent or
// reopen a task. The processing transaction calls it repeatedly, doing
// what each action says and adding what it learned to f, until it returns
// actReceipt, actDrop, actKeep or actWake.
func decide(f facts) action {
	switch {
	case f.receipt:
		return actReceipt
	case !f.known && (f.automatic || f.own):
		return actDrop
	case !f.known:
		return actCreate
	case !f.retained:
		return actRetain
	case !f.claimed || f.automatic || f.own:
		// Context only: another delivery of the message holds its wake, or
		// the mail must never advance work.
		return actKeep
	case f.status == domain.IssueDone && !f.reopened:
		return actReopen
	case f.status == domain.IssueDone || f.status == domain.IssueCancelled:
		// Cancelled tasks are never woken; a task still done after the
		// reopen rule was kept done by the reopen limiter.
		return actKeep
	}
	return actWake
}

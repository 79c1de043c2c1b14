package ui

// Every user-visible state label and fixed sentence of the UI lives here,
// so pages and tests share one spelling (typographic apostrophes included).

// Fixed messages.
const (
	msgRemote           = "This Paperclip instance runs in local_trusted mode and accepts only local connections."
	msgSessionExpired   = "Your session has expired. Sign in again."
	msgFormExpired      = "This form has expired. Reload the page and try again."
	msgMultipartRefused = "This form cannot be sent as a file upload. Reload the page and try again."
	msgSomethingWrong   = "Something went wrong."
	msgNotFound         = "Not found"
	msgNotFoundText     = "This page doesn’t exist, or you don’t have access to it."
	msgLoginInvalid     = "That key isn’t valid. Check it and try again."
	msgLoginRunToken    = "Agent run tokens can’t sign in to the board."
	msgLoginRateLimited = "Too many sign-in attempts. Wait a few minutes."
	msgSignedOut        = "Signed out."

	flashCompanyCreated = "Company created."
	flashSettingsSaved  = "Settings saved."
	flashTaskCreated    = "Task created."
	flashMemberRemoved  = "Member removed."
	flashKeyRevoked     = "Board key revoked. Sessions signed in with it have ended."
	flashTaskSaved      = "Task saved."
	flashCommentAdded   = "Comment added."
	flashAgentCreated   = "Agent created."
	flashAgentSaved     = "Agent saved."
	flashTrustSaved     = "Trust settings saved."
	flashProjectCreated = "Project created."
	flashEnvCreated     = "Environment created."
	flashMemberAdded    = "Member saved."
	flashUploaded       = "Attachment uploaded."

	msgNeedBoundary = "Choose a project or task boundary."
	msgKeyOnce      = "Copy this key now. It won’t be shown again."
)

// taskStatusLabels maps task statuses to labels, in workflow order.
var taskStatusLabels = map[string]string{
	"backlog": "Backlog", "todo": "To do", "in_progress": "In progress", "in_review": "In review",
	"blocked": "Blocked", "done": "Done", "cancelled": "Cancelled",
}

// taskStatusOrder is the order statuses are offered in.
var taskStatusOrder = []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"}

// openStatuses count as "open" on the overview.
var openStatuses = []string{"todo", "in_progress", "in_review", "blocked"}

var priorityLabels = map[string]string{"critical": "Critical", "high": "High", "medium": "Medium", "low": "Low"}

var priorityOrder = []string{"critical", "high", "medium", "low"}

// runStatusOrder lists run statuses for filters, in their life order.
var runStatusOrder = []string{"queued", "running", "succeeded", "failed", "cancelled", "timed_out", "refused"}

var runStatusLabels = map[string]string{
	"queued": "Queued", "running": "Running", "succeeded": "Succeeded", "failed": "Failed",
	"cancelled": "Cancelled", "timed_out": "Timed out", "refused": "Refused",
}

var refusalLabels = map[string]string{
	"agent_paused": "Agent paused", "agent_terminated": "Agent terminated", "agent_not_active": "Agent not active",
	"budget_exceeded": "Budget exceeded", "issue_state_changed": "Task state changed", "issue_not_found": "Task not found",
}

var wakeReasonLabels = map[string]string{"email_received": "Email received", "manual": "Manual", "comment": "Comment", "assignment": "Assignment"}

var agentStatusLabels = map[string]string{
	"active": "Active", "paused": "Paused", "terminated": "Terminated", "pending_approval": "Pending approval",
}

var trustLabels = map[string]string{"standard": "Standard", "low_trust_review": "Low-trust review"}

var roleLabels = map[string]string{"owner": "Owner", "admin": "Admin", "member": "Member", "viewer": "Viewer"}

var envStatusLabels = map[string]string{"active": "Active", "inactive": "Inactive", "error": "Error"}

// activityLabels names audit actions; unknown actions show verbatim.
var activityLabels = map[string]string{
	"email.received": "Email received", "email.queued": "Email queued", "email.sent": "Email sent",
	"email.failed": "Email failed", "email.uncertain": "Delivery uncertain", "email.resolved": "Delivery resolved",
	"email_endpoint.draft_created": "Inbox setup started", "email_endpoint.connected": "Inbox connected",
	"email_endpoint.pause": "Inbox paused", "email_endpoint.resume": "Inbox resumed",
	"email_endpoint.reconnect": "Inbox reconnected", "email_endpoint.remove": "Inbox disconnected",
	"email.connection.created": "AgentMail connection saved", "email.connection.agent_added": "Connection agents changed",
	"email.connection.agents_updated": "Connection agents changed", "email.connection.grant_added": "Connection access changed",
	"email.connection.grant_revoked": "Connection access changed",
	"issue.created":                  "Task created", "issue.updated": "Task updated", "issue.reopened": "Task reopened by email",
	"issue.comment_added": "Comment added", "issue.attachment_added": "Attachment added",
	"heartbeat.wakeup": "Agent woken", "heartbeat.refused": "Wake refused", "heartbeat.finished": "Run finished",
	"agent.created": "Agent created", "agent.updated": "Agent updated", "company.created": "Company created",
	"policy.decided": "Policy decision", "company.member_put": "Member changed", "board_key.created": "Board key created",
	"company.renamed": "Company renamed", "company.delete_started": "Company deletion started",
	"project.created": "Project created", "environment.created": "Environment created",
	"instance.settings_updated": "Instance settings changed", "secret.created": "Secret created",
	"secret.rotated": "Secret rotated", "secret.deleted": "Secret deleted",
	"action_policy.created": "Action policy created", "action_policy.deleted": "Action policy deleted",
	"agent.spend_reset": "Agent spend reset", "board_key.revoked": "Board key revoked",
	"company.member_removed": "Member removed", "environment.updated": "Environment updated",
	"email.receipt": "Delivery receipt", "email.review_approved": "Email approved in review",
	"email.review_rejected": "Email rejected in review", "email.review_expired": "Email review expired",
	"email.send_policy_updated": "Send policy changed", "email.sender_rules.updated": "Sender rules changed",
	"email.quarantine_released": "Held email released", "email.suppression_lifted": "Recipient suppression lifted",
	"heartbeat.cancelled": "Run cancelled", "heartbeat.orphaned": "Run lost when its server stopped",
	"notification_webhook.created": "Notification webhook added", "notification_webhook.deleted": "Notification webhook removed",
	"retention.updated": "Retention settings changed", "retention.purged": "Old data purged",
	"retention.purged_sender": "One address's email purged",
}

func labelOr(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return k
}

// inboxHealthLabels are the email address health badges
// (EmailEndpointSummary.Health); the health message gives the reason.
var inboxHealthLabels = map[string]string{"ok": "Receiving email", "connecting": "Connecting",
	"attention": "Needs attention", "paused": "Paused", "setup_incomplete": "Setup incomplete",
	"disconnected": "Disconnected"}

// inboxStatusLabels are the email address (endpoint) status badges.
var inboxStatusLabels = map[string]string{"active": "Receiving email", "paused": "Paused", "draft": "Setup incomplete",
	"archived": "Disconnected"}

package ui

import "net/http"

// A refused request's page names what was refused: "You don’t have
// permission to {action}." The action is the route's, looked up by the
// pattern the mux matched, so an API 403 deep inside a handler still names
// what the person tried to do.

// routeActions names the action of every UI route (by its mux pattern).
var routeActions = map[string]string{
	"POST /logout":           "sign out",
	"GET /{$}":               "see the companies",
	"POST /companies":        "create companies",
	"GET /go":                "open this company",
	"GET /settings":          "see instance settings",
	"POST /settings":         "change instance settings",
	"GET /c/{cid}":           "see this company",
	"GET /c/{cid}/tasks":     "see this company’s tasks",
	"GET /c/{cid}/tasks/new": "create tasks",
	"POST /c/{cid}/tasks":    "create tasks",

	"GET /c/{cid}/tasks/{tid}":                               "see this task",
	"POST /c/{cid}/tasks/{tid}":                              "change this task",
	"POST /c/{cid}/tasks/{tid}/comments":                     "comment on this task",
	"POST /c/{cid}/tasks/{tid}/wake":                         "wake this task’s agent",
	"POST /c/{cid}/tasks/{tid}/attachments":                  "add attachments to this task",
	"GET /c/{cid}/tasks/{tid}/attachments/{aid}":             "download this attachment",
	"GET /c/{cid}/attachments/{aid}":                         "download this attachment",
	"POST /c/{cid}/tasks/{tid}/deliveries/{pid}/resolve":     "resolve this delivery",
	"GET /c/{cid}/review":                                    "load the review queue",
	"GET /c/{cid}/review/{pid}":                              "load this email's review",
	"POST /c/{cid}/review/{pid}":                             "review this email",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/send-policy": "save the send policy",
	"GET /c/{cid}/runs/{rid}":                                "see this run",
	"GET /c/{cid}/agents":                                    "see this company’s agents",
	"GET /c/{cid}/agents/new":                                "create agents",
	"POST /c/{cid}/agents":                                   "create agents",
	"GET /c/{cid}/agents/{aid}":                              "see this agent",
	"POST /c/{cid}/agents/{aid}":                             "change this agent",
	"GET /c/{cid}/agents/{aid}/edit":                         "change this agent",
	"POST /c/{cid}/agents/{aid}/status":                      "pause or resume this agent",
	"POST /c/{cid}/agents/{aid}/wake":                        "wake this agent",
	"GET /c/{cid}/agents/{aid}/trust":                        "change this agent’s trust settings",
	"POST /c/{cid}/agents/{aid}/trust":                       "change this agent’s trust settings",
	"GET /c/{cid}/projects":                                  "see projects and environments",
	"POST /c/{cid}/projects":                                 "create projects",
	"POST /c/{cid}/environments":                             "create environments",
	"GET /c/{cid}/activity":                                  "see the activity log",
	"GET /c/{cid}/search":                                    "search this company",
	"GET /c/{cid}/members":                                   "see members",
	"POST /c/{cid}/members":                                  "add members",
	"GET /c/{cid}/retention":                                 "see data retention",
	"GET /c/{cid}/company":                                   "see the company settings",
	"POST /c/{cid}/company":                                  "rename this company",
	"POST /c/{cid}/company/delete":                           "delete this company",
	"POST /c/{cid}/members/{uid}/role":                       "change member roles",
	"POST /c/{cid}/retention":                                "change data retention",
	"POST /c/{cid}/board-keys":                               "create board keys",
	"GET /c/{cid}/notifications":                             "see notification webhooks",
	"POST /c/{cid}/notifications":                            "create notification webhooks",
	"POST /c/{cid}/notifications/{wid}/delete":               "delete notification webhooks",
	"GET /c/{cid}/notifications/{wid}":                       "see notification deliveries",
	"GET /c/{cid}/apps":                                      "see apps",
	"POST /c/{cid}/apps/enable-email":                        "turn on email connections",
	"GET /c/{cid}/apps/agentmail":                            "see AgentMail",
	"GET /c/{cid}/runs":                                      "see runs",
	"GET /c/{cid}/email":                                     "see email",
	"GET /c/{cid}/events":                                    "follow live updates",
	"POST /c/{cid}/board-keys/{kid}/revoke":                  "revoke board keys",
	"POST /c/{cid}/members/{uid}/remove":                     "remove members",

	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/discard":                    "discard this setup",
	"GET /c/{cid}/apps/agentmail/connect":                                   "connect AgentMail",
	"GET /c/{cid}/apps/agentmail/connect/key":                               "connect AgentMail",
	"POST /c/{cid}/apps/agentmail/connect":                                  "connect AgentMail",
	"GET /c/{cid}/apps/agentmail/connections/{conn}/connected":              "see AgentMail connections",
	"GET /c/{cid}/apps/agentmail/connections/{conn}":                        "see AgentMail connections",
	"POST /c/{cid}/apps/agentmail/connections/{conn}/grants":                "manage AgentMail connections",
	"POST /c/{cid}/apps/agentmail/connections/{conn}/grants/{gid}/revoke":   "manage AgentMail connections",
	"POST /c/{cid}/apps/agentmail/connections/{conn}/installs":              "manage AgentMail connections",
	"POST /c/{cid}/apps/agentmail/connections/{conn}/installs/{iid}/remove": "manage AgentMail connections",
	"GET /c/{cid}/apps/agentmail/setup":                                     "give agents email addresses",
	"GET /c/{cid}/apps/agentmail/setup/{rid}":                               "give agents email addresses",
	"GET /c/{cid}/apps/agentmail/setup/{rid}/done":                          "give agents email addresses",
	"POST /c/{cid}/apps/agentmail/setup/{rid}/agent":                        "give agents email addresses",
	"POST /c/{cid}/apps/agentmail/setup/{rid}/address":                      "give agents email addresses",
	"POST /c/{cid}/apps/agentmail/setup/{rid}/check":                        "give agents email addresses",
	"POST /c/{cid}/apps/agentmail/setup/{rid}/create":                       "give agents email addresses",
	"POST /c/{cid}/apps/agentmail/setup/{rid}/restart":                      "give agents email addresses",
	"GET /c/{cid}/apps/agentmail/inboxes/{eid}":                             "see this email address",
	"GET /c/{cid}/apps/agentmail/inboxes/{eid}/{tab}":                       "see this email address",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/pause":                      "change this inbox",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/resume":                     "change this inbox",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/reconnect":                  "change this inbox",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/disconnect":                 "disconnect this inbox",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/quarantine":                 "release or block quarantined email",
	"POST /c/{cid}/apps/agentmail/inboxes/{eid}/senders":                    "change who may write to this inbox",
	"GET /c/{cid}/apps/agentmail/quarantine":                                "see the quarantine",
	"POST /c/{cid}/apps/agentmail/quarantine":                               "release or block quarantined email",
	"GET /c/{cid}/apps/agentmail/quarantine/{qid}":                          "see this quarantined email",
	"POST /c/{cid}/apps/agentmail/suppressions/lift":                        "lift a suppression",
}

// routeAction is the action of the request's route, or a general one for a
// route without an entry (a test keeps every route listed).
func (c *rc) routeAction() string {
	if a, ok := routeActions[c.r.Pattern]; ok {
		return a
	}
	if c.r.Method == http.MethodGet || c.r.Method == http.MethodHead {
		return "see this page"
	}
	return "do this"
}

// forbiddenText is the 403 page's sentence for action.
func forbiddenText(action string) string { return "You don’t have permission to " + action + "." }

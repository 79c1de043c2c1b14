package mcpserver

import (
	"sort"
	"strings"
)

// Operation is one entry of the agent-callable API catalog.
type Operation struct {
	OperationID string   `json:"operationId"`
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Summary     string   `json:"summary"`
	PathParams  []string `json:"pathParams,omitempty"`
	HasBody     bool     `json:"hasBody"`
	// SuccessStatus is the status of a successful call.
	SuccessStatus int `json:"successStatus"`
	// Responses lists the other statuses the operation documents.
	Responses []int `json:"responses,omitempty"`
	// BoardOnly operations are listed for discovery but refuse agent callers.
	BoardOnly bool `json:"boardOnly,omitempty"`
}

// Catalog is the runtime API catalog offered through search_api/call_api.
// Paths are relative to /api; {companyId} defaults to the run's company.
var Catalog = []Operation{
	{OperationID: "email.listInboxes", Method: "GET", Path: "/companies/{companyId}/email/inboxes", Summary: "List the caller's active assigned email inboxes", SuccessStatus: 200},
	{OperationID: "email.readThread", Method: "GET", Path: "/companies/{companyId}/email/tasks/{taskId}", Summary: "Read the email thread bound to a task (or null)", PathParams: []string{"taskId"}, SuccessStatus: 200},
	{OperationID: "email.send", Method: "POST", Path: "/companies/{companyId}/email/send", Summary: "Start an email conversation or reply in a bound one (explicit, idempotent; returns the publication)", HasBody: true, SuccessStatus: 202, Responses: []int{400, 403, 404, 409, 429}},
	{OperationID: "email.delivery", Method: "GET", Path: "/companies/{companyId}/email/deliveries/{publicationId}", Summary: "Read a send's outcome: queued, sent, delivered, failed, uncertain, awaiting_review, rejected or expired", PathParams: []string{"publicationId"}, SuccessStatus: 200},
	{OperationID: "email.inspectKey", Method: "POST", Path: "/companies/{companyId}/email/inspect", Summary: "Inspect an AgentMail API key (connection managers only)", HasBody: true, SuccessStatus: 200, BoardOnly: true},
	{OperationID: "email.checkAddress", Method: "POST", Path: "/companies/{companyId}/email/connections/{connectionId}/check-address", Summary: "Check whether an address is taken (connection managers only)", PathParams: []string{"connectionId"}, HasBody: true, SuccessStatus: 200, Responses: []int{429}, BoardOnly: true},
	{OperationID: "issues.get", Method: "GET", Path: "/issues/{issueId}", Summary: "Read a task", PathParams: []string{"issueId"}, SuccessStatus: 200},
	{OperationID: "issues.update", Method: "PATCH", Path: "/issues/{issueId}", Summary: "Update a task assigned to the caller (status, title, description)", PathParams: []string{"issueId"}, HasBody: true, SuccessStatus: 200},
	{OperationID: "issues.listComments", Method: "GET", Path: "/issues/{issueId}/comments", Summary: "List a task's comments", PathParams: []string{"issueId"}, SuccessStatus: 200},
	{OperationID: "issues.addComment", Method: "POST", Path: "/issues/{issueId}/comments", Summary: "Comment on a task assigned to the caller (internal; never sent as email)", PathParams: []string{"issueId"}, HasBody: true, SuccessStatus: 201},
	{OperationID: "issues.listAttachments", Method: "GET", Path: "/issues/{issueId}/attachments", Summary: "List a task's attachments", PathParams: []string{"issueId"}, SuccessStatus: 200},
}

// lookup returns the operation with id.
func lookup(id string) (Operation, bool) {
	for _, op := range Catalog {
		if op.OperationID == id {
			return op, true
		}
	}
	return Operation{}, false
}

// search returns operations whose id, path or summary contain every word of
// query (case-insensitive); an empty query lists everything.
func search(query string) []Operation {
	words := strings.Fields(strings.ToLower(query))
	var out []Operation
	for _, op := range Catalog {
		hay := strings.ToLower(op.OperationID + " " + op.Method + " " + op.Path + " " + op.Summary)
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(hay, w)
		}
		if ok {
			out = append(out, op)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].OperationID < out[j].OperationID })
	return out
}

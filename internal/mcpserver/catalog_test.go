package mcpserver

import "testing"

// The runtime API catalog has the send operation (POST, with
// a body, 202); inspect and check-address are board-only, and check-address
// documents its 429.
func TestCatalog(t *testing.T) {
	send, ok := lookup("email.send")
	if !ok || send.Method != "POST" || !send.HasBody || send.SuccessStatus != 202 || send.BoardOnly {
		t.Fatalf("send operation: %+v", send)
	}
	inspect, _ := lookup("email.inspectKey")
	check, _ := lookup("email.checkAddress")
	if !inspect.BoardOnly || !check.BoardOnly {
		t.Fatal("inspect and check-address must be board-only")
	}
	has429 := false
	for _, s := range check.Responses {
		has429 = has429 || s == 429
	}
	if !has429 {
		t.Fatal("check-address must document 429")
	}
	if got := search("email delivery"); len(got) != 1 || got[0].OperationID != "email.delivery" {
		t.Fatalf("search: %+v", got)
	}
	if len(search("")) != len(Catalog) {
		t.Fatal("an empty query lists the whole catalog")
	}
}

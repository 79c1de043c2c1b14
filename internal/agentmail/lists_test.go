package agentmail

import (
	"errors"
	"testing"
)

// The inbox list methods against the emulator: create (twice is fine),
// list every page, delete (twice is fine), and an out-of-scope inbox is a
// not-found error.
func TestInboxListEntries(t *testing.T) {
	e := startEmulator(t)
	ctx := testContext(t)
	in := e.createInbox("lists").InboxID
	for _, v := range []string{"a@x.example", "y.example", "a@x.example"} {
		if err := e.client.CreateInboxListEntry(ctx, in, ListReceive, ListBlock, CreateListEntryRequest{Entry: v}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.client.AllInboxListEntries(ctx, in, ListReceive, ListBlock)
	if err != nil || len(got) != 2 {
		t.Fatalf("entries: %+v %v", got, err)
	}
	for _, g := range got {
		if g.InboxID != in || g.Direction != ListReceive || g.ListType != ListBlock || (g.EntryType != "email" && g.EntryType != "domain") {
			t.Fatalf("entry: %+v", g)
		}
	}
	for range 2 {
		if err := e.client.DeleteInboxListEntry(ctx, in, ListReceive, ListBlock, "y.example"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := e.client.AllInboxListEntries(ctx, in, ListReceive, ListBlock); len(got) != 1 || got[0].Entry != "a@x.example" {
		t.Fatalf("after delete: %+v", got)
	}
	if _, err := e.client.AllInboxListEntries(ctx, "nobody@agentmail.to", ListReply, ListAllow); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown inbox: %v", err)
	}
}

package mcpserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// TestToolErrorShowsTheRefusalMessage: a tool shows a service's refusal by
// its message, also when it is wrapped, and any other error by its text.
func TestToolErrorShowsTheRefusalMessage(t *testing.T) {
	refused := domain.Refuse(domain.KindConflict, "This email inbox is paused")
	for _, c := range []struct {
		err  error
		want string
	}{
		{refused, "This email inbox is paused"},
		{fmt.Errorf("thread: %w", refused), "This email inbox is paused"},
		{errUnassigned, "This connector is no longer assigned or authorized"},
		{errors.New("unknown operationId"), "unknown operationId"},
	} {
		res, _, err := toolError(c.err)
		if err != nil || !res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != c.want {
			t.Errorf("toolError(%v) = %+v, %v; want the text %q", c.err, res, err, c.want)
		}
	}
}

// TestDeliveryArgsTakeEitherName: agentmail_delivery takes the send's id as
// sendId or publicationId, and refuses two different ids or a malformed one.
func TestDeliveryArgsTakeEitherName(t *testing.T) {
	const id, other = "0b6f1c1e-0000-4000-8000-000000000001", "0b6f1c1e-0000-4000-8000-000000000002"
	for _, c := range []struct {
		in      DeliveryArgs
		want    string
		wantErr string
	}{
		{DeliveryArgs{SendID: id}, id, ""},
		{DeliveryArgs{PublicationID: id}, id, ""},
		{DeliveryArgs{SendID: id, PublicationID: id}, id, ""},
		{DeliveryArgs{SendID: id, PublicationID: other}, "", "sendId and publicationId name different sends; give one"},
		{DeliveryArgs{SendID: "x"}, "", "sendId must be a UUID"},
		{DeliveryArgs{}, "", "publicationId must be a UUID"},
	} {
		got, err := c.in.id()
		if got != c.want || (err == nil) != (c.wantErr == "") || (err != nil && err.Error() != c.wantErr) {
			t.Errorf("%+v: %q, %v; want %q, %q", c.in, got, err, c.want, c.wantErr)
		}
	}
}

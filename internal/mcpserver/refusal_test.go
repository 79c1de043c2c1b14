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

package email

import (
	"context"

	"github.com/paperclipai/paperclipai/internal/agentmail"
)

// maxListPages bounds a full listing (100 items a page): enough for any
// account a person manages, and a stop if a provider kept returning
// page tokens.
const maxListPages = 100

// allInboxes lists every inbox the key can see, following page tokens:
// an address check or an inspection that read only the first page would
// call a taken address "unknown" and hide inboxes from the picker.
func allInboxes(ctx context.Context, c *agentmail.Client) ([]agentmail.Inbox, error) {
	var out []agentmail.Inbox
	token := ""
	for range maxListPages {
		page, err := c.ListInboxes(ctx, agentmail.ListParams{Limit: 100, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Inboxes...)
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	return out, nil
}

// allDomains lists every custom domain the key can see, following page
// tokens.
func allDomains(ctx context.Context, c *agentmail.Client) ([]agentmail.DomainItem, error) {
	var out []agentmail.DomainItem
	token := ""
	for range maxListPages {
		page, err := c.ListDomains(ctx, agentmail.ListParams{Limit: 100, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Domains...)
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	return out, nil
}

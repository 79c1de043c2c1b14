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
	return allPages(func(p agentmail.ListParams) ([]agentmail.Inbox, string, error) {
		page, err := c.ListInboxes(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return page.Inboxes, page.NextPageToken, nil
	})
}

// allDomains lists every custom domain the key can see, following page
// tokens.
func allDomains(ctx context.Context, c *agentmail.Client) ([]agentmail.DomainItem, error) {
	return allPages(func(p agentmail.ListParams) ([]agentmail.DomainItem, string, error) {
		page, err := c.ListDomains(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return page.Domains, page.NextPageToken, nil
	})
}

// allPages follows a listing's page tokens, 100 items a page, for at most
// maxListPages pages.
func allPages[T any](list func(agentmail.ListParams) ([]T, string, error)) ([]T, error) {
	var out []T
	token := ""
	for range maxListPages {
		items, next, err := list(agentmail.ListParams{Limit: 100, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			break
		}
		token = next
	}
	return out, nil
}

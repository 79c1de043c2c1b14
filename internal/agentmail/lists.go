package agentmail

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// List directions and types of the allow/block lists API
// (/inboxes/{id}/lists/{direction}/{type}).
const (
	ListReceive = "receive"
	ListReply   = "reply"
	ListSend    = "send"
	ListAllow   = "allow"
	ListBlock   = "block"
)

// ListEntry is one allow/block list entry (the SDK's PodListEntry for the
// inbox scope). Entry is a lower-case address or domain; EntryType is
// "email" or "domain".
type ListEntry struct {
	Entry          string    `json:"entry"`
	OrganizationID string    `json:"organization_id"`
	Reason         string    `json:"reason,omitempty"`
	Direction      string    `json:"direction"`
	ListType       string    `json:"list_type"`
	EntryType      string    `json:"entry_type"`
	CreatedAt      time.Time `json:"created_at"`
	ReadOnly       bool      `json:"read_only,omitempty"`
	PodID          string    `json:"pod_id,omitempty"`
	InboxID        string    `json:"inbox_id,omitempty"`
}

// ListEntriesResponse is one page of list entries.
type ListEntriesResponse struct {
	Count         int         `json:"count"`
	Limit         int         `json:"limit,omitempty"`
	NextPageToken string      `json:"next_page_token,omitempty"`
	Entries       []ListEntry `json:"entries"`
}

// CreateListEntryRequest is the body of a list entry creation.
type CreateListEntryRequest struct {
	Entry  string `json:"entry"`
	Reason string `json:"reason,omitempty"`
}

// ListInboxListEntries returns one page of an inbox's list (GET
// /inboxes/{id}/lists/{direction}/{type}, operation list_list_entries).
func (c *Client) ListInboxListEntries(ctx context.Context, inboxID, direction, listType string, p ListParams) (*ListEntriesResponse, error) {
	path, err := pathOf(OpListListEntries, lit("inboxes"), id("inbox id", inboxID), lit("lists"), id("direction", direction), id("list type", listType))
	if err != nil {
		return nil, err
	}
	var out ListEntriesResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: p.query(), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllInboxListEntries follows the pages of an inbox's list (at most 100
// pages of 100 entries).
func (c *Client) AllInboxListEntries(ctx context.Context, inboxID, direction, listType string) ([]ListEntry, error) {
	var out []ListEntry
	token := ""
	for range 100 {
		page, err := c.ListInboxListEntries(ctx, inboxID, direction, listType, ListParams{Limit: 100, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Entries...)
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	return out, nil
}

// CreateInboxListEntry adds an entry to an inbox's list (POST
// /inboxes/{id}/lists/{direction}/{type}, operation create_list_entry). An
// entry the list already holds is not an error (409 counts as done).
func (c *Client) CreateInboxListEntry(ctx context.Context, inboxID, direction, listType string, in CreateListEntryRequest) error {
	path, err := pathOf(OpCreateListEntry, lit("inboxes"), id("inbox id", inboxID), lit("lists"), id("direction", direction), id("list type", listType))
	if err != nil {
		return err
	}
	err = c.do(ctx, request{method: http.MethodPost, path: path, body: in})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// DeleteInboxListEntry removes an entry from an inbox's list (DELETE
// /inboxes/{id}/lists/{direction}/{type}/{entry}, operation
// delete_list_entry). An entry already gone is not an error.
func (c *Client) DeleteInboxListEntry(ctx context.Context, inboxID, direction, listType, entry string) error {
	path, err := pathOf(OpDeleteListEntry, lit("inboxes"), id("inbox id", inboxID), lit("lists"), id("direction", direction),
		id("list type", listType), id("entry", entry))
	if err != nil {
		return err
	}
	err = c.do(ctx, request{method: http.MethodDelete, path: path})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

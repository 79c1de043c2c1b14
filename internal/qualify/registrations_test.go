package qualify

import (
	"context"
	"fmt"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/emulator"
)

// The cleanup check reads every page of an inbox's webhooks and API keys
// (the emulator's pages hold two here), so a registration this run left
// is found wherever the provider lists it. No database is involved: this
// is the provider side of the check.
func TestRegistrationsReadEveryPage(t *testing.T) {
	ctx := context.Background()
	em, err := emulator.Start(ctx, emulator.Options{DeliveryDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	_, key := em.CreateOrganization("Pages")
	prov, err := agentmail.New(agentmail.Options{BaseURL: em.APIURL(), APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	in, err := prov.CreateInbox(ctx, agentmail.CreateInboxRequest{Username: "paged"})
	if err != nil {
		t.Fatal(err)
	}
	wantHooks, wantKeys := map[string]bool{}, map[string]bool{}
	for i := range 5 {
		wh, err := prov.CreateInboxWebhook(ctx, in.InboxID, agentmail.CreateWebhookRequest{
			URL: fmt.Sprintf("https://hooks%d.example/in", i), EventTypes: []string{"message.received"}})
		if err != nil {
			t.Fatal(err)
		}
		wantHooks[wh.WebhookID] = true
		k, err := prov.CreateInboxAPIKey(ctx, in.InboxID, agentmail.CreateAPIKeyRequest{Name: fmt.Sprintf("key %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		wantKeys[k.APIKeyID] = true
	}
	em.SetMaxPageSize(2)
	r := &runner{prov: prov}
	got, err := r.registrations(ctx, in.InboxID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.webhooks) != len(wantHooks) || len(got.keys) != len(wantKeys) || got.keysHidden {
		t.Fatalf("registrations: %d webhooks, %d keys (hidden %v); want %d and %d", len(got.webhooks), len(got.keys), got.keysHidden,
			len(wantHooks), len(wantKeys))
	}
	for id := range wantHooks {
		if !got.webhooks[id] {
			t.Errorf("webhook %s not listed", id)
		}
	}
	for id := range wantKeys {
		if !got.keys[id] {
			t.Errorf("API key %s not listed", id)
		}
	}

	// A key that may not list inbox keys: every webhook page still read,
	// the keys reported hidden.
	yes := true
	narrow, err := prov.CreateInboxAPIKey(ctx, in.InboxID, agentmail.CreateAPIKeyRequest{Name: "narrow",
		Permissions: &agentmail.APIKeyPermissions{InboxRead: &yes, WebhookRead: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	r = &runner{prov: prov.WithAPIKey(narrow.APIKey)}
	got, err = r.registrations(ctx, in.InboxID)
	if err != nil || !got.keysHidden || len(got.webhooks) != len(wantHooks) {
		t.Fatalf("a key without api_key_read: %+v %v", got, err)
	}
}

func TestEachPageStops(t *testing.T) {
	calls := 0
	err := eachPage("things", func(token string) (string, error) {
		calls++
		return "same", nil
	})
	if err == nil || calls != 2 {
		t.Fatalf("a repeated token: %v after %d calls", err, calls)
	}
	calls = 0
	err = eachPage("things", func(token string) (string, error) {
		calls++
		return fmt.Sprint(calls), nil
	})
	if err == nil || calls != maxRegistrationPages {
		t.Fatalf("an endless listing: %v after %d calls", err, calls)
	}
}

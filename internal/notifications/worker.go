package notifications

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/netguard"
	"github.com/paperclipai/paperclipai/internal/store"
)

var (
	// guardedClient reaches public addresses only (checked on the address
	// dialled); approvedClient serves the webhooks an instance
	// administrator pointed at a private address. Neither follows
	// redirects nor uses a proxy.
	guardedClient  = &http.Client{Transport: netguard.Transport(false), CheckRedirect: noRedirect, Timeout: requestTimeout}
	approvedClient = &http.Client{Transport: directTransport(), CheckRedirect: noRedirect, Timeout: requestTimeout}
)

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func directTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

// Start starts the delivery loop; ctx bounds only the start.
func (s *Service) Start(ctx context.Context) error {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		err := s.Store.DB.Follow(lctx, notifyChannel, s.Notify, func(err error) {
			s.Log.Warn("notification signals interrupted; reconnecting", "err", err)
		})
		if err != nil && !errors.Is(err, db.ErrNoListen) {
			s.Log.Error("notification signals", "err", err)
		}
	}()
	go func() {
		defer close(s.done)
		s.run(lctx)
	}()
	return nil
}

// Shutdown stops the loop and waits for it, at most until ctx ends.
func (s *Service) Shutdown(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("notifications: shutdown: %w", ctx.Err())
	}
}

// run delivers due events until ctx ends, sleeping until the next retry or
// a signal; while nothing is pending it makes no queries.
func (s *Service) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, err := s.deliverDue(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := 24 * time.Hour
		if err != nil {
			s.Log.Error("notification deliveries", "err", err)
			wait = time.Second
		} else if !next.IsZero() {
			wait = max(time.Until(next), 10*time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.Work:
		case <-timer.C:
		}
	}
}

// deliverDue attempts every due delivery and returns the next retry time.
func (s *Service) deliverDue(ctx context.Context) (time.Time, error) {
	now := s.Store.Now()
	list, err := s.Store.DueNotificationDeliveries(ctx, s.Store.DB, now, 50)
	if err != nil {
		return time.Time{}, err
	}
	for _, d := range list {
		// Another replica may be attempting it: only the claimer does.
		claimed, err := s.Store.ClaimNotificationDelivery(ctx, s.Store.DB, d.ID, s.Store.Now(), s.Store.Now().Add(2*requestTimeout))
		if err != nil {
			return time.Time{}, err
		}
		if !claimed {
			continue
		}
		if err := s.attempt(ctx, d); err != nil {
			return time.Time{}, err
		}
	}
	next, _, err := s.Store.NextNotificationAttempt(ctx, s.Store.DB)
	return next, err
}

// attempt makes one delivery attempt and records its result. A 2xx is
// delivered; anything else is retried with backoff until 24 hours after the
// event, then failed. Why at-least-once: the receiver deduplicates by
// webhook-id, which stays the same on every attempt.
func (s *Service) attempt(ctx context.Context, d store.NotificationDelivery) error {
	h, err := s.Store.GetNotificationWebhook(ctx, s.Store.DB, d.WebhookID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted meanwhile: its deliveries went with it
	}
	if err != nil {
		return fmt.Errorf("notification webhook: %w", err)
	}
	secret, err := s.Vault.Open(h.SecretSealed, sealAAD(d.WebhookID))
	if err != nil {
		return s.record(ctx, d, 0, "the webhook's secret could not be read", false)
	}
	body := []byte(d.Payload)
	if h.Format == "slack" {
		var p struct {
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		body, _ = json.Marshal(map[string]string{"text": slackText(d.Event, p.Data)})
	}
	ts := s.Store.Now()
	sig, err := Sign(string(secret), d.ID, ts, body)
	if err != nil {
		return s.record(ctx, d, 0, "the webhook's secret is malformed", false)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return s.record(ctx, d, 0, "invalid webhook URL", false)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Paperclip-Notifications/1")
	req.Header.Set("webhook-id", d.ID)
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	req.Header.Set("webhook-signature", sig)
	client := guardedClient
	if h.PrivateAllowed {
		client = approvedClient
	}
	resp, err := client.Do(req)
	if ctx.Err() != nil {
		return nil // stopping: the claim lapses and the attempt is repeated
	}
	if err != nil {
		msg := "the webhook request failed"
		if errors.Is(err, netguard.ErrBlocked) {
			msg = "refused: the URL does not resolve to a public address"
		}
		return s.record(ctx, d, 0, msg, false)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return s.record(ctx, d, resp.StatusCode, "", true)
	}
	return s.record(ctx, d, resp.StatusCode, fmt.Sprintf("the webhook answered %d", resp.StatusCode), false)
}

// record stores an attempt's result: delivered, a retry after backoff, or
// failed once the 24-hour window is over. Errors are our fixed sentences,
// never the receiver's text.
func (s *Service) record(ctx context.Context, d store.NotificationDelivery, status int, msg string, ok bool) error {
	now := s.Store.Now()
	if ok {
		return s.Store.RecordNotificationDelivered(ctx, s.Store.DB, d.ID, status, now)
	}
	next := now.Add(backoff(d.Attempts + 1))
	state := store.NotificationPending
	if next.Sub(d.CreatedAt) > retryWindow {
		state = store.NotificationFailed
	}
	return s.Store.RecordNotificationAttempt(ctx, s.Store.DB, d.ID, state, status, msg, next)
}

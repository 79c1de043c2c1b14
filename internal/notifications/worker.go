package notifications

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/netguard"
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

type due struct {
	id, companyID, webhookID, event, payload string
	attempts                                 int
	createdAt                                time.Time
}

// deliverDue attempts every due delivery and returns the next retry time.
func (s *Service) deliverDue(ctx context.Context) (time.Time, error) {
	now := s.Store.Now()
	rows, err := s.Store.DB.QueryContext(ctx, `SELECT id, company_id, webhook_id, event, payload, attempts, created_at
		FROM notification_deliveries WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT 50`, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("due notifications: %w", err)
	}
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.id, &d.companyID, &d.webhookID, &d.event, &d.payload, &d.attempts, &d.createdAt); err != nil {
			rows.Close()
			return time.Time{}, fmt.Errorf("due notifications: %w", err)
		}
		list = append(list, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, err
	}
	for _, d := range list {
		if err := s.attempt(ctx, d); err != nil {
			return time.Time{}, err
		}
	}
	// Why ORDER BY … LIMIT 1 and not MIN(): SQLite returns an aggregate of
	// a timestamp as text.
	var next time.Time
	err = s.Store.DB.QueryRowContext(ctx, `SELECT next_attempt_at FROM notification_deliveries WHERE state = 'pending'
		ORDER BY next_attempt_at LIMIT 1`).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("next notification: %w", err)
	}
	return next.UTC(), nil
}

// attempt makes one delivery attempt and records its result. A 2xx is
// delivered; anything else is retried with backoff until 24 hours after the
// event, then failed. Why at-least-once: the receiver deduplicates by
// webhook-id, which stays the same on every attempt.
func (s *Service) attempt(ctx context.Context, d due) error {
	var url, format, sealed string
	var private bool
	err := s.Store.DB.QueryRowContext(ctx, `SELECT url, format, secret_sealed, private_allowed FROM notification_webhooks WHERE id = $1`,
		d.webhookID).Scan(&url, &format, &sealed, &private)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // deleted meanwhile: its deliveries went with it
	}
	if err != nil {
		return fmt.Errorf("notification webhook: %w", err)
	}
	secret, err := s.Vault.Open(sealed, sealAAD(d.webhookID))
	if err != nil {
		return s.record(ctx, d, 0, "the webhook's secret could not be read", false)
	}
	body := []byte(d.payload)
	if format == "slack" {
		var p struct {
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		body, _ = json.Marshal(map[string]string{"text": slackText(d.event, p.Data)})
	}
	ts := s.Store.Now()
	sig, err := Sign(string(secret), d.id, ts, body)
	if err != nil {
		return s.record(ctx, d, 0, "the webhook's secret is malformed", false)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return s.record(ctx, d, 0, "invalid webhook URL", false)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Paperclip-Notifications/1")
	req.Header.Set("webhook-id", d.id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	req.Header.Set("webhook-signature", sig)
	client := guardedClient
	if private {
		client = approvedClient
	}
	resp, err := client.Do(req)
	if ctx.Err() != nil {
		return nil // stopping: the attempt is repeated after restart
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
func (s *Service) record(ctx context.Context, d due, status int, msg string, ok bool) error {
	now := s.Store.Now()
	var st any
	if status != 0 {
		st = status
	}
	if ok {
		_, err := s.Store.DB.ExecContext(ctx, `UPDATE notification_deliveries SET state = 'delivered', attempts = attempts + 1,
			last_status = $2, last_error = NULL, next_attempt_at = NULL, delivered_at = $3 WHERE id = $1`, d.id, st, now)
		return err
	}
	next := now.Add(backoff(d.attempts + 1))
	state := "pending"
	if next.Sub(d.createdAt.UTC()) > retryWindow {
		state = "failed"
	}
	_, err := s.Store.DB.ExecContext(ctx, `UPDATE notification_deliveries SET state = $2, attempts = attempts + 1, last_status = $3,
		last_error = $4, next_attempt_at = $5 WHERE id = $1`, d.id, state, st, msg, next)
	return err
}

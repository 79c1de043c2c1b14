package agentmail_test

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
)

// A send worker classifies the outcome of one attempt (docs/email-pipeline.md,
// "The provider client").
func ExampleClient_SendMessage() {
	ctx := context.Background()
	c, err := agentmail.New(agentmail.Options{BaseURL: "http://127.0.0.1:3199/v0", APIKey: "am_runtime_key"})
	if err != nil {
		return
	}
	publicationID := "0b6f1c1e-0000-4000-8000-000000000001"
	res, err := c.SendMessage(ctx, "agent@agentmail.to", agentmail.SendMessageRequest{
		To:      []string{"customer@example.com"},
		Subject: "Hello",
		Text:    "Hi there",
		Headers: map[string]string{"X-Paperclip-Publication-Id": publicationID},
	}, publicationID)
	switch {
	case err == nil:
		slog.Info("sent", "thread", res.ThreadID)
	case agentmail.IsTransient(err):
		// Retry later with the same request and the same key.
		delay, _ := agentmail.RetryAfter(err)
		slog.Warn("send will be retried", "err", err, "min_delay", delay, "maybe_sent", agentmail.MayHaveBeenSent(err))
	default:
		// err.Error() is log-safe: no provider text, ids or keys.
		slog.Error("send failed", "err", err)
	}
}

// A live-receiving loop: one Stream per connection, backoff and catch-up
// belong to the caller.
func ExampleDial() {
	ctx := context.Background()
	backoff := time.Second
	for ctx.Err() == nil {
		s, err := agentmail.Dial(ctx, "ws://127.0.0.1:3199/v0", "am_runtime_key", []string{"agent@agentmail.to"}, nil)
		if agentmail.IsAuthFailure(err) {
			slog.Error("stopping: the key was refused", "err", err)
			return
		}
		if err == nil {
			backoff = time.Second // subscribed: reset, then run a catch-up scan
			for {
				f, err := s.Next(ctx)
				if err != nil {
					if errors.Is(err, agentmail.ErrStreamClosed) {
						slog.Warn("stream ended", "err", err)
					}
					break
				}
				ev, err := f.Event()
				if err != nil || ev == nil {
					continue // not admissible / not a channel event
				}
				slog.Info("admit", "kind", ev.Kind, "dedup", ev.DedupKey())
			}
			_ = s.Close()
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Minute)
	}
}

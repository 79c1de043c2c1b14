package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/paperclipai/paperclipai/internal/attachment"
)

// attachmentBackfill moves the attachment files of a home from before
// content moved into the database there, once per start and in the
// background: a large home must not delay serving, and a read of content
// not yet moved moves it itself (attachment.Store.Open). First it removes
// staged uploads that a killed process left behind.
type attachmentBackfill struct {
	store  attachment.Store
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

var _ Service = (*attachmentBackfill)(nil)

// Start begins the backfill and returns.
func (b *attachmentBackfill) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		if n, err := b.store.SweepStaged(time.Hour); err != nil {
			b.log.Warn("remove stale staged uploads", "err", err)
		} else if n > 0 {
			b.log.Info("removed staged uploads left by an earlier process", "files", n)
		}
		if _, err := b.store.Backfill(ctx); err != nil && ctx.Err() == nil {
			// The next start tries again; until then reads backfill
			// what they need.
			b.log.Error("attachment backfill failed", "err", err)
		}
	}()
	return nil
}

// Shutdown stops the backfill (what it stored stays: each file is its own
// transaction) and waits for it.
func (b *attachmentBackfill) Shutdown(ctx context.Context) error {
	if b.cancel == nil {
		return nil
	}
	b.cancel()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

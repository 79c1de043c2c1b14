package inbound

import (
	"context"
	"database/sql"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
)

// WakeFunc records a wake request inside tx, like heartbeat's WakeupTx.
type WakeFunc = func(ctx context.Context, tx *sql.Tx, agentID string, req heartbeat.WakeRequest) (domain.Run, bool, error)

// SetWake replaces the worker's wake request function, so a test can make
// a wake fail. Tests only: production wiring is Options.Wake.
func (w *Worker) SetWake(f WakeFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeFn = f
}

// SetReceiveFault makes every receiving transaction call f first with the
// delivery's id, failing the transaction when f returns an error; nil
// removes it. It applies to every worker of the test binary.
func SetReceiveFault(f func(tx *sql.Tx, deliveryID string) error) {
	if f == nil {
		receiveFault.Store(nil)
		return
	}
	receiveFault.Store(&f)
}

// Bounded is bounded, for tests that set many inboxes up in parallel.
func Bounded(limit, n int, fn func(i int)) { bounded(limit, n, fn) }

// SetStageTrace makes every worker of the test binary report each stage a
// delivery passes (and each scheduling round, with id "") to f; nil
// removes it. f must be safe for concurrent use.
func SetStageTrace(f func(stage, id string)) {
	if f == nil {
		stageTrace.Store(nil)
		return
	}
	stageTrace.Store(&f)
}

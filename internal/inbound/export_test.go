package inbound

import (
	"database/sql"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"

	"github.com/paperclipai/paperclipai/internal/inbound/receive"
)

// WakeFunc records a wake request inside tx, like heartbeat's WakeupTx.
type WakeFunc = receive.WakeFunc

// SetWake replaces the worker's wake request function, so a test can make
// a wake fail. Tests only: production wiring is Options.Wake.
func (w *Worker) SetWake(f WakeFunc) { w.recv.SetWake(f) }

// SetReceiveFault is receive.SetReceiveFault. It applies to every worker of
// the test binary.
func SetReceiveFault(f func(tx *sql.Tx, deliveryID string) error) { receive.SetReceiveFault(f) }

// Bounded is receive.Bounded, for tests that set many inboxes up in
// parallel.
func Bounded(limit, n int, fn func(i int)) { receive.Bounded(limit, n, fn) }

// SetStageTrace makes every worker of the test binary report each stage a
// delivery passes (and each scheduling round, with id "") to f; nil
// removes it. f must be safe for concurrent use.
func SetStageTrace(f func(stage, id string)) {
	if f == nil {
		queue.StageTrace.Store(nil)
		return
	}
	queue.StageTrace.Store(&f)
}

// SetRescanHold makes every worker of the test binary run f at the start
// of each rescan read (f may block to hold the read open); nil removes it.
func SetRescanHold(f func()) {
	if f == nil {
		rescanHold.Store(nil)
		return
	}
	rescanHold.Store(&f)
}

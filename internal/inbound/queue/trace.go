package queue

import (
	"sync/atomic"
)

// StageTrace, when set (tests and diagnosis only, see export_test.go), is
// told every stage a delivery passes in this process's worker, in order,
// as it happens: tests assert on the order and number of stages (how many
// scheduling rounds an email waited for, whether its wake came from a
// signal or a timer), never on their timing.
var StageTrace atomic.Pointer[func(stage, id string)]

// Stages reported to StageTrace. Round stages carry the endpoint id (or ""
// for a round that visits no named inbox) and say what started the round.
const (
	StageRoundSignal = "round:signal" // a named wake (an admission, a socket)
	StageRoundRescan = "round:rescan" // a general signal (a lifecycle change)
	StageRoundTimer  = "round:timer"  // a deadline passed, nothing signalled
	StagePicked      = "picked"       // listed by DueDeliveries
	StagePrepared    = "prepared"     // provider I/O done, ready to commit
	StageTxBegin     = "tx"           // its receiving transaction began
	StageFenced      = "fenced"       // that transaction fenced its thread
	StageWoken       = "woken"        // its wake recorded (not committed yet)
	StageCommitted   = "committed"    // that transaction committed
)

// Trace reports stage for each id to StageTrace, if set.
func Trace(stage string, ids ...string) {
	f := StageTrace.Load()
	if f == nil {
		return
	}
	for _, id := range ids {
		(*f)(stage, id)
	}
}

// Tracing reports whether a stage trace is set.
func Tracing() bool { return StageTrace.Load() != nil }

package inbound

import (
	"sync/atomic"
)

// stageTrace, when set (tests and diagnosis only, see export_test.go), is
// told every stage a delivery passes in this process's worker, in order,
// as it happens: tests assert on the order and number of stages (how many
// scheduling rounds an email waited for, whether its wake came from a
// signal or a timer), never on their timing.
var stageTrace atomic.Pointer[func(stage, id string)]

// Stages reported to stageTrace. Round stages carry the endpoint id (or ""
// for a round that visits no named inbox) and say what started the round.
const (
	stageRoundSignal = "round:signal" // a named wake (an admission, a socket)
	stageRoundRescan = "round:rescan" // a general signal (a lifecycle change)
	stageRoundTimer  = "round:timer"  // a deadline passed, nothing signalled
	stagePicked      = "picked"       // listed by DueDeliveries
	stagePrepared    = "prepared"     // provider I/O done, ready to commit
	stageTxBegin     = "tx"           // its receiving transaction began
	stageFenced      = "fenced"       // that transaction fenced its thread
	stageWoken       = "woken"        // its wake recorded (not committed yet)
	stageCommitted   = "committed"    // that transaction committed
)

// trace reports stage for each id to stageTrace, if set.
func trace(stage string, ids ...string) {
	f := stageTrace.Load()
	if f == nil {
		return
	}
	for _, id := range ids {
		(*f)(stage, id)
	}
}

// tracing reports whether a stage trace is set.
func tracing() bool { return stageTrace.Load() != nil }

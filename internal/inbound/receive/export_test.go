package receive

// UseOneByOne makes every Receiver of the test binary commit one delivery
// per transaction (true) or grouped (false), from its next batch on.
func UseOneByOne(on bool) { oneByOneOnly.Store(on) }

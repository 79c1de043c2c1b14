//go:build race

package inbound_test

// raceDetector is true when the tests run under the race detector, which
// multiplies their CPU cost (see TestIdleClusterIsSilent).
const raceDetector = true

// Package buildinfo holds the version stamped into the binary.
package buildinfo

import "runtime/debug"

// Version is the release version; overridden at link time with -ldflags "-X".
var Version = "0.1.0-dev"

// Commit returns the VCS revision recorded by the Go toolchain, or "unknown".
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return "unknown"
}

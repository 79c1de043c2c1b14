// Package buildinfo holds the version, commit and build date stamped into
// the binary.
//
// A release build stamps all three with -ldflags "-X" (scripts/release):
//
//	-X github.com/paperclipai/paperclipai/internal/buildinfo.Version=1.2.3
//	-X github.com/paperclipai/paperclipai/internal/buildinfo.commit=<sha>
//	-X github.com/paperclipai/paperclipai/internal/buildinfo.date=<RFC 3339>
//
// A plain `go build` in a clone falls back to what the Go toolchain
// recorded (vcs.revision and vcs.time).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version; overridden at link time with -ldflags "-X".
var Version = "0.1.0-dev"

// commit and date are set at link time by release builds; empty means
// "ask the toolchain's build info".
var (
	commit string
	date   string
)

// setting returns the build setting key recorded by the Go toolchain, or "".
func setting(key string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// Commit returns the VCS revision the binary was built from, or "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if v := setting("vcs.revision"); v != "" {
		return v
	}
	return "unknown"
}

// Date returns when the binary was built (RFC 3339; for an unstamped build
// the commit's time), or "unknown".
func Date() string {
	if date != "" {
		return date
	}
	if v := setting("vcs.time"); v != "" {
		return v
	}
	return "unknown"
}

// Info is the whole build description, as `paperclipai version --json`
// prints it.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	// CGO says whether the binary was built with cgo: release builds are
	// static (false).
	CGO bool `json:"cgo"`
}

// Get returns the build description of the running binary.
func Get() Info {
	return Info{Version: Version, Commit: Commit(), Date: Date(), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, CGO: setting("CGO_ENABLED") == "1"}
}

//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// errNotLinux is what a sandboxed start returns outside Linux: bubblewrap,
// mount namespaces and memfd exist only there (the macOS release binary
// runs agents unsandboxed, with sandbox "off").
var errNotLinux = errors.New("sandbox: bubblewrap sandboxing needs Linux")

func (c *Cmd) startStaged() error { return errNotLinux }

func optionsFile([]string) (*os.File, error) { return nil, errNotLinux }

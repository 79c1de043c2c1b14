package testkit

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// onceValue is a path made once per test process (a built binary, an
// installed tool), with the error of that one attempt.
type onceValue struct {
	once sync.Once
	val  string
	err  error
}

func (o *onceValue) get(fn func() (string, error)) (string, error) {
	o.once.Do(func() { o.val, o.err = fn() })
	return o.val, o.err
}

// moduleRoot is the repository's root directory.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// goBuild builds the module's package pkg (a ./-relative path) into out.
func goBuild(out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = moduleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

package testkit

import (
	"fmt"
	"os"
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

// goBuild builds the module's package pkg (a ./-relative path) into out,
// the way releases are built: without cgo, so the binary is static, and
// with -trimpath (scripts/release; TestStaticBuild checks it). Building
// every binary alike shares one compile cache between the tests' binary,
// TestStaticBuild and the release snapshot test.
func goBuild(out, pkg string, args ...string) error {
	cmd := exec.Command("go", append(append([]string{"build", "-trimpath", "-o", out}, args...), pkg)...)
	cmd.Dir = moduleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// BuildStatic builds ./cmd/paperclipai into out as releases do (CGO_ENABLED=0)
// with extra go build args (such as -ldflags), sharing the compile cache
// with Binary.
func BuildStatic(out string, args ...string) error { return goBuild(out, "./cmd/paperclipai", args...) }

package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a private PostgreSQL cluster owned by one test, for tests that
// stop and start the database under a running server (the shared test
// server must never be stopped). It listens on 127.0.0.1 on a port that
// stays the same across Stop and Start.
type Cluster struct {
	t      testing.TB
	dir    string
	port   int
	pgCtl  string
	asRoot bool
}

// StartCluster initializes and starts a private cluster in a temporary
// directory, removed (after an immediate stop) when the test ends. It needs
// the PostgreSQL server binaries (initdb, pg_ctl); without them the test is
// skipped, or fails under CI. Run as root, the cluster runs as the postgres
// system user (initdb and postgres refuse root), like scripts/pg-throwaway.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	initdb, err := pgBinary("initdb")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("private PostgreSQL cluster: %v", err)
		}
		t.Skipf("SKIPPING: private PostgreSQL cluster: %v", err)
	}
	pgCtl, err := pgBinary("pg_ctl")
	if err != nil {
		t.Fatalf("private PostgreSQL cluster: %v", err)
	}
	c := &Cluster{t: t, pgCtl: pgCtl, asRoot: os.Geteuid() == 0}
	if c.asRoot {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("private PostgreSQL cluster: running as root but there is no postgres system user")
		}
	}
	// Not t.TempDir: the postgres user must be able to enter it.
	c.dir, err = os.MkdirTemp("", "paperclip-pgc-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data", "sock"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if c.asRoot {
		if out, err := exec.Command("chown", "-R", "postgres:", c.dir).CombinedOutput(); err != nil {
			t.Fatalf("chown cluster directory: %v %s", err, out)
		}
	}
	t.Cleanup(func() {
		_ = c.run(c.pgCtl, "-D", c.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(c.dir)
	})
	if err := c.run(initdb, "-A", "trust", "-U", "postgres", "-D", c.data()); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	c.port = freeTCPPort(t)
	c.Start()
	return c
}

// URL is the cluster's postgres database URL.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Stop stops the cluster at once (pg_ctl stop -m immediate): every backend
// is killed and every client connection drops, as in a crash.
func (c *Cluster) Stop() {
	c.t.Helper()
	if err := c.run(c.pgCtl, "-D", c.data(), "-m", "immediate", "-w", "stop"); err != nil {
		c.t.Fatalf("stop cluster: %v", err)
	}
}

// Start starts the (stopped) cluster on its port and returns once it
// accepts connections (after crash recovery, when it was stopped
// immediately).
func (c *Cluster) Start() {
	c.t.Helper()
	// fsync=off is safe here: an immediate stop kills the server, not the
	// machine, so written WAL survives in the page cache. Commits stay
	// synchronous: with synchronous_commit=off an immediate stop would drop
	// commits the clients were told had succeeded.
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off "+
		"-c full_page_writes=off", filepath.Join(c.dir, "sock"), c.port)
	if err := c.run(c.pgCtl, "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-o", opts, "-w", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("start cluster: %v\n%s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL())
		if err == nil {
			conn.Close(ctx)
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("cluster does not accept connections: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs a PostgreSQL program, as the postgres user when we are root.
func (c *Cluster) run(prog string, args ...string) error {
	var cmd *exec.Cmd
	if c.asRoot {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(prog), strings.Join(args, " "), err, out)
	}
	return nil
}

// pgBinary finds a PostgreSQL server program on PATH or in Debian's
// /usr/lib/postgresql/<version>/bin.
func pgBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	for i := len(matches) - 1; i >= 0; i-- {
		if st, err := os.Stat(matches[i]); err == nil && st.Mode()&0o111 != 0 {
			return matches[i], nil
		}
	}
	return "", fmt.Errorf("%s not found (install postgresql)", name)
}

// freeTCPPort returns a loopback port that was free a moment ago.
func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

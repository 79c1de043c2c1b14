package dbtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// A private cluster keeps its data and its port across an immediate stop
// and a start, and refuses connections while stopped.
func TestClusterStopsAndStartsOnItsPort(t *testing.T) {
	c := dbtest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := func(q string) error {
		conn, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, q)
		return err
	}
	if err := exec(`CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a stopped cluster accepted a connection")
	}
	c.Start()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 7 {
		t.Fatalf("data after restart: %d %v", v, err)
	}
}

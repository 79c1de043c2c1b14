package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// identifier is the shape of the savepoint and channel names this package
// puts into SQL text.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Savepoint runs fn under the savepoint name inside tx. When fn fails, only
// fn's statements are rolled back (ROLLBACK TO SAVEPOINT) and fnErr is its
// error; the transaction stays usable. err is a failure of the savepoint
// itself, after which the caller must abort the transaction. Both dialects
// support savepoints.
func Savepoint(ctx context.Context, tx *sql.Tx, name string, fn func() error) (fnErr, err error) {
	if !identifier.MatchString(name) {
		return nil, fmt.Errorf("savepoint: invalid name %q", name)
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT `+name); err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", name, err)
	}
	if fnErr := fn(); fnErr != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT `+name); err != nil {
			return nil, fmt.Errorf("roll back to savepoint %s: %w", name, err)
		}
		return fnErr, nil
	}
	return nil, nil
}

// NotifyTx queues a notification on channel that PostgreSQL delivers to
// every listener only if and when tx commits (NOTIFY is transactional), so
// nobody wakes for work that was rolled back. On SQLite, with a single
// process, it does nothing: the in-process signal after commit suffices.
func (d *DB) NotifyTx(ctx context.Context, tx *sql.Tx, channel string) error {
	return d.NotifyPayloadTx(ctx, tx, channel, "")
}

// NotifyPayloadTx is NotifyTx with a payload, which names what changed so
// that a listener visits only that (ListenPayload).
func (d *DB) NotifyPayloadTx(ctx context.Context, tx *sql.Tx, channel, payload string) error {
	if d.Dialect != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Notify sends a notification with payload on channel at once, outside any
// transaction (for news that is already committed). On SQLite it does
// nothing.
func (d *DB) Notify(ctx context.Context, channel, payload string) error {
	if d.Dialect != Postgres {
		return nil
	}
	if _, err := d.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// ErrNoListen means the database cannot deliver notifications (SQLite).
var ErrNoListen = errors.New("database does not support LISTEN")

// Listen calls notify for every notification on channel until ctx ends
// (then it returns nil) or the connection fails. It holds one dedicated
// connection of the native pool, which is closed rather than returned to
// the pool afterwards: it is left in LISTEN state, or broken by a cancelled
// wait. On SQLite it returns ErrNoListen.
func (d *DB) Listen(ctx context.Context, channel string, notify func()) error {
	return d.listen(ctx, channel, func(string) { notify() }, nil)
}

// ListenPayload is Listen that hands each notification's payload to
// notify.
func (d *DB) ListenPayload(ctx context.Context, channel string, notify func(payload string)) error {
	return d.listen(ctx, channel, notify, nil)
}

// listen is ListenPayload with a hook called once LISTEN is in effect.
func (d *DB) listen(ctx context.Context, channel string, notify func(payload string), listening func()) error {
	if d.Dialect != Postgres || d.Pool == nil {
		return ErrNoListen
	}
	if !identifier.MatchString(channel) {
		return fmt.Errorf("listen: invalid channel %q", channel)
	}
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listener connection: %w", err)
	}
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if listening != nil {
		listening()
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		notify(n.Payload)
	}
}

// Follow backoff: the first retry after a lost listener connection, and
// the cap. The cap is short on purpose: a retry while the database is down
// costs one refused TCP connection, and after it is back the listener (and
// with it cross-replica wake-ups) should return within about a second.
const (
	followRetryMin = 100 * time.Millisecond
	followRetryMax = time.Second
)

// Follow is Listen that survives the database: it calls notify for every
// notification on channel until ctx ends, and reconnects after a failure
// (reporting it to onError, which may be nil) with a backoff from 100 ms
// to 1 s that starts over once listening works again. It also calls
// notify each time LISTEN takes effect, the first time included, because
// notifications sent while nobody listened are lost: the caller then looks
// for work itself. On SQLite it returns ErrNoListen at once.
func (d *DB) Follow(ctx context.Context, channel string, notify func(), onError func(error)) error {
	if d.Dialect != Postgres || d.Pool == nil {
		return ErrNoListen
	}
	backoff := followRetryMin
	for ctx.Err() == nil {
		err := d.listen(ctx, channel, func(string) { notify() }, func() {
			backoff = followRetryMin
			notify()
		})
		if ctx.Err() != nil {
			return nil
		}
		if onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followRetryMax)
	}
	return nil
}

package db

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"sync"

	sqlite "modernc.org/sqlite"
)

// stmtCacheSize bounds the prepared statements kept per SQLite connection.
// The store has a few hundred distinct statements; those built with a
// variable IN list are many more, and the least recently used are closed.
const stmtCacheSize = 256

// sqliteConnector opens SQLite connections that keep their prepared
// statements. Without it every ExecContext/QueryContext through
// database/sql parses and plans its SQL again (modernc's conn prepares,
// runs and finalizes): a third of the CPU of the inbound pipeline on SQLite
// went to SQLite's parser. PostgreSQL needs no such thing: pgx caches
// prepared statements per connection itself.
type sqliteConnector struct {
	dsn string
	drv *sqlite.Driver
}

func newSQLiteConnector(dsn string) *sqliteConnector {
	return &sqliteConnector{dsn: dsn, drv: &sqlite.Driver{}}
}

// Connect implements driver.Connector.
func (c *sqliteConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn)
}

// Driver implements driver.Connector.
func (c *sqliteConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is the part of modernc's connection the cache relies on.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a SQLite connection with a statement cache: ExecContext
// and QueryContext run a prepared statement kept per SQL text (reset after
// each use by the driver, so it holds no lock or snapshot between uses).
// A statement whose rows are still open is busy; a second use of the same
// text meanwhile (a nested query) runs uncached, as before.
type cachingConn struct {
	sqliteConn
	mu    sync.Mutex
	bySQL map[string]*list.Element
	lru   *list.List // of *cachedStmt, most recently used first
}

type cachedStmt struct {
	query string
	stmt  driver.Stmt
	busy  bool
	// evicted: dropped from the cache while busy; closed when its rows are.
	evicted bool
}

var (
	_ sqliteConn  = (*cachingConn)(nil)
	_ driver.Rows = (*cachedRows)(nil)
)

func newCachingConn(conn driver.Conn) (driver.Conn, error) {
	sc, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("open sqlite: driver connection lacks context methods")
	}
	return &cachingConn{sqliteConn: sc, bySQL: map[string]*list.Element{}, lru: list.New()}, nil
}

// take returns the cached statement for query, preparing it on first use,
// marked busy; nil when it is busy already (the caller runs uncached).
func (c *cachingConn) take(ctx context.Context, query string) (*cachedStmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.bySQL[query]; ok {
		cs := el.Value.(*cachedStmt)
		if cs.busy {
			return nil, nil
		}
		c.lru.MoveToFront(el)
		cs.busy = true
		return cs, nil
	}
	st, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs := &cachedStmt{query: query, stmt: st, busy: true}
	c.bySQL[query] = c.lru.PushFront(cs)
	for c.lru.Len() > stmtCacheSize {
		el := c.lru.Back()
		old := el.Value.(*cachedStmt)
		c.lru.Remove(el)
		delete(c.bySQL, old.query)
		if old.busy {
			old.evicted = true
		} else {
			_ = old.stmt.Close()
		}
	}
	return cs, nil
}

// release marks cs free again (or closes it, if it was evicted meanwhile).
func (c *cachingConn) release(cs *cachedStmt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs.busy = false
	if cs.evicted {
		_ = cs.stmt.Close()
	}
}

// ExecContext implements driver.ExecerContext.
func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	defer c.release(cs)
	return cs.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

// QueryContext implements driver.QueryerContext.
func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.release(cs)
		return nil, err
	}
	return &cachedRows{Rows: rows, c: c, cs: cs}, nil
}

// Close closes every cached statement, then the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	for el := c.lru.Front(); el != nil; el = el.Next() {
		_ = el.Value.(*cachedStmt).stmt.Close()
	}
	c.lru.Init()
	c.bySQL = map[string]*list.Element{}
	c.mu.Unlock()
	return c.sqliteConn.Close()
}

// cachedRows frees its statement for reuse when closed. Of modernc's
// column type methods it forwards the database type name, the one the
// store's scans can depend on (database/sql uses it in ColumnTypes only).
type cachedRows struct {
	driver.Rows
	c      *cachingConn
	cs     *cachedStmt
	closed bool
}

// Close implements driver.Rows.
func (r *cachedRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.Rows.Close()
	r.c.release(r.cs)
	return err
}

// ColumnTypeDatabaseTypeName implements driver.RowsColumnTypeDatabaseTypeName.
func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// EmailStats are the email channel's current counts, read when metrics are
// scraped: inboxes by status and receive mode (Inboxes[status][mode]), deliveries still waiting by state with the
// oldest one's admission time, and sends still open (queued or uncertain)
// by outcome with the oldest one's acceptance time.
type EmailStats struct {
	Inboxes        map[string]map[string]int
	Deliveries     map[string]int
	OldestDelivery map[string]time.Time
	Sends          map[string]int
	OldestSend     map[string]time.Time
}

// Waiting delivery states and open send outcomes, as EmailStats reports them.
var (
	WaitingDeliveryStates = []string{string(domain.DeliveryReceived), string(domain.DeliveryProcessing), string(domain.DeliveryRetry)}
	OpenSendOutcomes      = []string{string(domain.OutcomeQueued), string(domain.OutcomeUncertain)}
)

// EmailStats reads the counts. Each query is served by an index (the
// waiting deliveries and open sends are few in a healthy system). Why the
// states are literals in the SQL (they are constants, never input): the
// open-sends index is partial, and PostgreSQL uses a partial index only
// when the predicate is visible in the query, not behind a parameter.
func (s *Store) EmailStats(ctx context.Context, q db.Querier) (EmailStats, error) {
	st := EmailStats{Inboxes: map[string]map[string]int{}, Deliveries: map[string]int{}, OldestDelivery: map[string]time.Time{},
		Sends: map[string]int{}, OldestSend: map[string]time.Time{}}
	if err := countInboxes(ctx, q, st.Inboxes); err != nil {
		return st, err
	}
	if err := countWaiting(ctx, q, "email_deliveries", "state", "received_at", WaitingDeliveryStates, st.Deliveries, st.OldestDelivery); err != nil {
		return st, err
	}
	if err := countWaiting(ctx, q, "email_sends", "outcome", "created_at", OpenSendOutcomes, st.Sends, st.OldestSend); err != nil {
		return st, err
	}
	return st, nil
}

// countWaiting counts the rows of table for each of values of column
// (constants, never input: see EmailStats) and the oldest timeCol of
// each, into counts and oldest.
func countWaiting(ctx context.Context, q db.Querier, table, column, timeCol string, values []string,
	counts map[string]int, oldest map[string]time.Time) error {
	for _, v := range values {
		where := ` FROM ` + table + ` WHERE ` + column + ` = '` + v + `'`
		n, old, err := countOldest(ctx, q, `SELECT COUNT(*)`+where, `SELECT `+timeCol+where+` ORDER BY `+timeCol+` LIMIT 1`)
		if err != nil {
			return err
		}
		counts[v] = n
		if old != nil {
			oldest[v] = *old
		}
	}
	return nil
}

func countInboxes(ctx context.Context, q db.Querier, into map[string]map[string]int) error {
	rows, err := q.QueryContext(ctx, `SELECT status, receive_mode, COUNT(*) FROM email_endpoints GROUP BY status, receive_mode`)
	if err != nil {
		return fmt.Errorf("email stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status, mode string
		var n int
		if err := rows.Scan(&status, &mode, &n); err != nil {
			return fmt.Errorf("email stats: %w", err)
		}
		if into[status] == nil {
			into[status] = map[string]int{}
		}
		into[status][mode] = n
	}
	return rows.Err()
}

// countOldest runs a count and, when it is not zero, the oldest-time query.
// Why two queries: MIN() over a timestamp loses the column type on SQLite,
// while ordering by the indexed column and taking one row keeps it.
func countOldest(ctx context.Context, q db.Querier, countQuery, oldestQuery string) (int, *time.Time, error) {
	var n int
	if err := q.QueryRowContext(ctx, countQuery).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("email stats: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	var t time.Time
	err := q.QueryRowContext(ctx, oldestQuery).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return n, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("email stats: %w", err)
	}
	t = t.UTC()
	return n, &t, nil
}

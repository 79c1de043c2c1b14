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
	for _, state := range WaitingDeliveryStates {
		where := ` FROM email_deliveries WHERE state = '` + state + `'`
		n, oldest, err := countOldest(ctx, q, `SELECT COUNT(*)`+where, `SELECT received_at`+where+` ORDER BY received_at LIMIT 1`)
		if err != nil {
			return st, err
		}
		st.Deliveries[state] = n
		if oldest != nil {
			st.OldestDelivery[state] = *oldest
		}
	}
	for _, outcome := range OpenSendOutcomes {
		where := ` FROM email_sends WHERE outcome = '` + outcome + `'`
		n, oldest, err := countOldest(ctx, q, `SELECT COUNT(*)`+where, `SELECT created_at`+where+` ORDER BY created_at LIMIT 1`)
		if err != nil {
			return st, err
		}
		st.Sends[outcome] = n
		if oldest != nil {
			st.OldestSend[outcome] = *oldest
		}
	}
	return st, nil
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

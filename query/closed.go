package query

import (
	"context"
	"database/sql"
	"time"
)

// Closed is how far the figures of db's rows are final at horizon, a time after which
// no attempt can join an earlier one (the newest line read, less --max-gap): the first
// attempt of the earliest logical request with an attempt at or after horizon, whose
// chain may still grow, or horizon when there is none; logical requests that started
// before it are whole. It reads the stored cache's linking (see Refresh); where the cache
// is stale it falls back to horizon less ten gaps, the longest chain a range reads around
// itself (rangeContext); so does a nil db (a cluster, which keeps no linking). A report
// over every row before a whole minute at or before Closed gives figures that later lines
// cannot change (retrylens watch).
func Closed(ctx context.Context, db *sql.DB, horizon time.Time, maxGap time.Duration) (time.Time, error) {
	fresh := false
	if db != nil {
		var err error
		if fresh, err = cacheFresh(ctx, db); err != nil {
			return time.Time{}, err
		}
	}
	if !fresh {
		return horizon.Add(-10 * maxGap), nil
	}
	var first sql.NullTime
	err := db.QueryRowContext(ctx, "SELECT min(first_ts) FROM "+cacheName+"_attempts WHERE ts >= $1", horizon.UTC()).Scan(&first)
	if err != nil || !first.Valid || !first.Time.Before(horizon) {
		return horizon, err
	}
	return first.Time, nil
}

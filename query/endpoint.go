package query

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
)

// endpointForm is an endpoint as the tables show it: "GET /api/users/:id".
var endpointForm = regexp.MustCompile(`^([A-Za-z]+)\s+(/\S*)$`)

// ResolveEndpoint turns what a user typed for --endpoint into the method ("" for any) and
// route to select: the form the tables show ("GET /api/users/:id"), a route
// ("/api/users/:id") or a raw path ("/api/users/123?x=1", which routeOf turns into its
// route, as ingest did). When none of them names a request in the database, the error lists
// the closest endpoints that do.
func ResolveEndpoint(ctx context.Context, db *sql.DB, text string, routeOf func(string) string) (method, route string, err error) {
	path := strings.TrimSpace(text)
	if m := endpointForm.FindStringSubmatch(path); m != nil {
		method, path = strings.ToUpper(m[1]), m[2]
	}
	candidates := []string{path}
	if routeOf != nil {
		if r := routeOf(path); r != path {
			candidates = append(candidates, r)
		}
	}
	for _, r := range candidates {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM requests WHERE route = $1 AND ($2 IS NULL OR method = $2) LIMIT 1)`,
			r, nullString(method)).Scan(&n)
		if err != nil {
			return "", "", fmt.Errorf("--endpoint: %w", err)
		}
		if n > 0 {
			return method, r, nil
		}
	}
	// The closest endpoints by edit distance to what was typed, in the tables' form.
	rows, err := db.QueryContext(ctx, `SELECT e FROM (SELECT DISTINCT coalesce(method, '-') || ' ' || route AS e, route FROM requests WHERE route IS NOT NULL)
		ORDER BY least(levenshtein(e, $1), levenshtein(route, $1)), e LIMIT 5`, strings.TrimSpace(text))
	if err != nil {
		return "", "", fmt.Errorf("--endpoint: %w", err)
	}
	defer rows.Close()
	var closest []string
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			return "", "", err
		}
		closest = append(closest, fmt.Sprintf("%q", e))
	}
	if len(closest) == 0 {
		return "", "", fmt.Errorf("--endpoint %q: the database holds no request with a route", text)
	}
	return "", "", fmt.Errorf("--endpoint %q matches no request; the closest endpoints are %s", text, strings.Join(closest, ", "))
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

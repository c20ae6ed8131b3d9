// Package sqlcol is how the SQL store (sqlstore) keeps a record's Go values
// in columns and reads them back: times as Unix nanoseconds with 0 for
// none, small lists as JSON text, addresses as text, "" as NULL where a
// column needs it. Both dialects get the same values, so a record reads
// back the same from either. And scanning a result set row by row.
//
// It is not for SQL: statements and dialects are sqlstore's.
package sqlcol

import (
	"encoding/json"
	"net/netip"
	"time"
)

// Nanos is t in Unix nanoseconds; the zero time is 0.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Time reads back what Nanos wrote, in UTC; 0 is the zero time.
func Time(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// JSON keeps a small list (roles, domains, a move's steps) in TEXT.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain slices of strings and structs go here
	}
	return string(b)
}

// FromJSON reads back what JSON wrote; "" leaves v as it is.
func FromJSON(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

// Addr is a as text; the zero Addr is "".
func Addr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// ParseAddr reads back what Addr wrote ("" is the zero Addr).
func ParseAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

// Nullable is s, or NULL for "": a column that is UNIQUE or references
// another table, and that many rows leave empty.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NonNil is s, or an empty list for nil: written as [] rather than null.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// LikeEscape escapes LIKE's wildcards (and the escape, a backslash) in s,
// for a pattern with ESCAPE '\'.
func LikeEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '_' || c == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Row is one row to scan: a single-row query's answer, or a result set
// at its current row.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set (*sql.Rows); its caller closes it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Collect scans every row of rows with scan. No rows is a nil list.
func Collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// String scans a row of one text column.
func String(r Row) (string, error) {
	var s string
	return s, r.Scan(&s)
}

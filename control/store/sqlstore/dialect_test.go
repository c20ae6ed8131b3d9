package sqlstore

import "testing"

func TestNumbered(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":        "SELECT 1",
		"a = ? AND b = ?": "a = $1 AND b = $2",
		"k LIKE ? ESCAPE '\\' AND x = '?' AND y = ?": "k LIKE $1 ESCAPE '\\' AND x = '?' AND y = $2",
		"VALUES (?, ?), (?, ?)":                      "VALUES ($1, $2), ($3, $4)",
	} {
		if got := numbered(in); got != want {
			t.Errorf("numbered(%q) = %q, want %q", in, got, want)
		}
	}
}

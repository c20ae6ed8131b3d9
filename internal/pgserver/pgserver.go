// Package pgserver runs Debian's PostgreSQL server for RunOS's own use: the
// lab's database host and the tests that need a real server (internal/pgtest).
// It finds the server's programs, makes a cluster with initdb and says how
// to start it as the postgres user, listening on a private socket directory
// and, when asked, one TCP address.
//
// It is not a way to run PostgreSQL in production: there the database is
// the operator's, and runos-control only gets its URL (--store).
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// BinDir is the directory holding Debian's postgres and initdb: the newest
// /usr/lib/postgresql/<version>/bin, or the directory of postgres on PATH.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "postgres")) && isFile(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server found (install Debian's postgresql package: apt-get install postgresql)")
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Account is the system user the server runs as (PostgreSQL refuses to run
// as root): Debian's postgres.
type Account struct {
	Name     string
	UID, GID int
}

// PostgresAccount looks up Debian's postgres user.
func PostgresAccount() (Account, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return Account{}, fmt.Errorf("no postgres user (install Debian's postgresql package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Account{Name: u.Username, UID: uid, GID: gid}, nil
}

// AsUser prefixes argv so that it runs as acct: setpriv (util-linux) execs
// the program in place, so its PID is the server's own.
func AsUser(acct Account, argv ...string) []string {
	return append([]string{"setpriv", "--reuid", strconv.Itoa(acct.UID), "--regid", strconv.Itoa(acct.GID),
		"--clear-groups", "--"}, argv...)
}

// InitDB makes a new cluster in dataDir (created, owned by acct, 0700) with
// trust authentication for local connections and the superuser postgres.
// Connections from other hosts are accepted with trust too: the lab's
// database lives on a network of its own hosts, and tests use a private
// socket directory.
func InitDB(ctx context.Context, binDir, dataDir string, acct Account) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dataDir, acct.UID, acct.GID); err != nil {
		return err
	}
	argv := AsUser(acct, filepath.Join(binDir, "initdb"), "-D", dataDir, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w: %s", dataDir, err, strings.TrimSpace(string(out)))
	}
	hba := "# RunOS: trust on the socket and on the lab's own networks\nlocal all all trust\nhost all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n"
	if err := os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	return os.Chown(filepath.Join(dataDir, "pg_hba.conf"), acct.UID, acct.GID)
}

// ServerArgs is the postgres command line that serves dataDir on a socket
// in socketDir and, when listen is not empty, on that TCP address, at port.
// It runs in the foreground (stop it with SIGINT: a fast shutdown). Unless
// durable, it skips fsync: tests make and drop their data in seconds, and
// a crash of the machine loses nothing they need.
func ServerArgs(binDir, dataDir, socketDir, listen string, port int, durable bool) []string {
	argv := []string{filepath.Join(binDir, "postgres"), "-D", dataDir,
		"-k", socketDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + listen,
		"-c", "max_connections=300"}
	if !durable {
		argv = append(argv, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return argv
}

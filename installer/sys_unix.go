//go:build !windows

package installer

import (
	"errors"
	"os"
	"os/user"
	"strconv"

	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
)

func isAdmin() bool { return os.Geteuid() == 0 }

func adminHint(cmd string) string { return "run it with sudo: " + platform.AdminCommand(cmd) }

// InvokingUserWords names the user install records by default.
const InvokingUserWords = "the user who ran sudo"

// invokingUser is the user who ran sudo; root running it directly names
// nobody (and keeps the operator recorded before).
func invokingUser(getenv func(string) string) string {
	if u := getenv("SUDO_USER"); u != "root" {
		return u
	}
	return ""
}

// lookupOperator finds a user by name (or numeric uid) in the user database.
func lookupOperator(name string) (access.Operator, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if byID, ierr := user.LookupId(name); ierr == nil {
			u, err = byID, nil
		}
	}
	if err != nil {
		return access.Operator{}, errors.New("no such user on this machine")
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return access.Operator{}, err
	}
	return access.Operator{UID: uid, User: u.Username}, nil
}

func afterInstall(platform, name string) error { return nil }

// secureStateDir: store.Open already made it 0700, owned by root.
func secureStateDir(string) error { return nil }

// companionFiles: runos needs nothing beside it here (the TUN device is the
// kernel's).
func companionFiles() []companion { return nil }

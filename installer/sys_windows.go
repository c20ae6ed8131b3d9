package installer

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc/mgr"

	"github.com/runos/vpn/vpnd/access"
)

// DefaultName is the service's name.
const DefaultName = "runos-vpnd"

// DefaultBinary is where Install puts runos.exe: %ProgramFiles%\RunOS.
// packagedBinary: no package manager installs runos on Windows.
const packagedBinary = ""

func DefaultBinary() string {
	pf := os.Getenv("ProgramFiles")
	if pf == "" {
		pf = `C:\Program Files`
	}
	return filepath.Join(pf, "RunOS", "runos.exe")
}

// defaultLogFile is the daemon's log: the service manager keeps no output,
// so on Windows the daemon writes this file itself (see daemonWritesLog).
func defaultLogFile(string) string {
	pd := os.Getenv("ProgramData")
	if pd == "" {
		pd = `C:\ProgramData`
	}
	return filepath.Join(pd, "RunOS", "vpnd.log")
}

// daemonWritesLog: the SCM discards a service's stdout and stderr, so the
// daemon is told to write its log itself.
const daemonWritesLog = true

func defaultPIDFile(string) string { return "" }

func readWritePaths() []string { return nil }

func isAdmin() bool { return windows.GetCurrentProcessToken().IsElevated() }

func adminHint(cmd string) string {
	return "run it in a terminal opened with \"Run as administrator\": runos " + cmd
}

// InvokingUserWords names the user install records by default.
const InvokingUserWords = "the user who opened the elevated terminal"

// invokingUser is the user who elevated: an elevated prompt runs as the
// same account when an administrator approves the UAC prompt. (When a
// standard user types an administrator's password instead, that is the
// administrator: name the user with --operator.)
func invokingUser(func(string) string) string {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return ""
	}
	account, domain, _, err := tu.User.Sid.LookupAccount("")
	if err != nil {
		return ""
	}
	return domain + `\` + account
}

// lookupOperator finds an account (DOMAIN\name or name) and its SID, which
// the daemon compares with the pipe client's token.
func lookupOperator(name string) (access.Operator, error) {
	sid, domain, _, err := windows.LookupSID("", name)
	if err != nil {
		return access.Operator{}, fmt.Errorf("no such account: %w", err)
	}
	account, _, _, err := sid.LookupAccount("")
	if err != nil {
		return access.Operator{}, err
	}
	return access.Operator{UID: -1, User: domain + `\` + account, SID: sid.String()}, nil
}

// afterInstall makes the recovery actions apply when the daemon exits with
// an error too, not only when it crashes (kardianos/service sets the
// actions but not this flag).
func afterInstall(platform, name string) error {
	if platform != PlatformWindows {
		return nil
	}
	m, err := mgr.Connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.SetRecoveryActionsOnNonCrashFailures(true)
}

// secureStateDir makes the state directory Administrators' and SYSTEM's
// only (stateacl.go says what and why): it reads the owner of the
// directory and of everything in it, removes what an untrusted account
// owns, and gives the rest Administrators as owner and a protected DACL.
func secureStateDir(dir string) error {
	entries, err := stateEntries(dir)
	if err != nil {
		return err
	}
	installer := ""
	if tu, err := windows.GetCurrentProcessToken().GetTokenUser(); err == nil {
		installer = tu.User.Sid.String()
	}
	for _, st := range planStateDir(entries, installer) {
		if st.Remove {
			if err := os.RemoveAll(st.Path); err != nil {
				return fmt.Errorf("remove %s, which another account made: %w", st.Path, err)
			}
			continue
		}
		if err := setSDDL(st.Path, st.SDDL); err != nil {
			return fmt.Errorf("%s: %w", st.Path, err)
		}
	}
	return nil
}

// stateEntries lists dir and everything under it, parents first, with
// their owners' SIDs. Links are not followed.
func stateEntries(dir string) ([]aclEntry, error) {
	var out []aclEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
		if err != nil {
			return fmt.Errorf("owner of %s: %w", p, err)
		}
		owner, _, err := sd.Owner()
		if err != nil {
			return fmt.Errorf("owner of %s: %w", p, err)
		}
		out = append(out, aclEntry{Path: p, Dir: d.IsDir(), Owner: owner.String()})
		return nil
	})
	return out, err
}

// setSDDL gives path the owner and protected DACL of sddl.
func setSDDL(path, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return err
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION,
		owner, nil, dacl, nil)
}

// companionFiles: wintun.dll, which wireguard-go's tun.CreateTUN loads from
// the program's folder or System32 (the DLL is signed by WireGuard LLC and
// not in this repository: a release zip carries it, see make release).
func companionFiles() []companion {
	system32, _ := windows.GetSystemDirectory()
	return []companion{wintunCompanion(runtime.GOARCH, system32)}
}

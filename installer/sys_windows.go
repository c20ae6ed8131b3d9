package installer

import (
	"fmt"
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

// secureStateDir gives the state directory an ACL of its own: SYSTEM and
// Administrators only, inherited by every file in it, instead of what
// %ProgramData% passes down (read access for all users), because the
// device key lives there.
func secureStateDir(dir string) error {
	sd, err := windows.SecurityDescriptorFromString("D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)")
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

// companionFiles: wintun.dll, which wireguard-go's tun.CreateTUN loads from
// the program's folder or System32 (the DLL is signed by WireGuard LLC and
// not in this repository: a release zip carries it, see make release).
func companionFiles() []companion {
	system32, _ := windows.GetSystemDirectory()
	return []companion{wintunCompanion(runtime.GOARCH, system32)}
}

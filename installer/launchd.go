package installer

import (
	"encoding/xml"
	"strconv"
	"strings"
)

// launchdExitTimeout is how long launchd waits, after SIGTERM, before it
// kills the job: the daemon's teardown and the clean-up after it fit well
// inside (systemd's TimeoutStopSec= is the same).
const launchdExitTimeout = 30

// launchdPlist renders the LaunchDaemon kardianos/service installs on
// macOS (its LaunchdConfig option, used verbatim). launchd starts the job
// at boot (RunAtLoad) and again whenever it exits (KeepAlive). launchd has
// nothing like systemd's ExecStopPost=, so the job is a small sh wrapper
// (launchdScript) that runs runos vpnd and then `runos vpnd --cleanup`
// whenever the daemon exits: stopped, failed or crashed.
func launchdPlist(s Spec) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Installed by runos vpn install; runos vpn uninstall removes it. -->
<plist version="1.0">
<dict>
`)
	key := func(k string) { b.WriteString("\t<key>" + k + "</key>\n") }
	str := func(indent, v string) { b.WriteString(indent + "<string>" + xmlText(v) + "</string>\n") }
	key("Label")
	str("\t", s.Name)
	key("ProgramArguments")
	b.WriteString("\t<array>\n")
	for _, a := range launchdArgs(s) {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	key("RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("KeepAlive")
	b.WriteString("\t<true/>\n")
	key("ThrottleInterval")
	b.WriteString("\t<integer>5</integer>\n")
	key("ExitTimeOut")
	b.WriteString("\t<integer>" + strconv.Itoa(launchdExitTimeout) + "</integer>\n")
	key("StandardOutPath")
	str("\t", s.LogFile)
	key("StandardErrorPath")
	str("\t", s.LogFile)
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

// launchdArgs is the job's command: sh runs launchdScript, with the
// service's name as its $0 (what ps shows).
func launchdArgs(s Spec) []string {
	return []string{"/bin/sh", "-c", launchdScript(s), s.Name}
}

// launchdScript runs the daemon in the background (so that its pid is the
// daemon's own), passes launchd's SIGTERM (or an INT) on to it, waits for
// its teardown, runs the clean-up and exits with the daemon's status: 0
// after a stop, else the failure's, after which KeepAlive starts it again.
// The same supervision as the System V script, minus the restarts that
// launchd does itself.
func launchdScript(s Spec) string {
	return strings.NewReplacer(
		"@DAEMON@", shellLine(append([]string{s.Binary}, s.DaemonArgs()...)),
		"@CLEANUP@", shellLine(append([]string{s.Binary}, s.CleanupArgs()...)),
	).Replace(launchdTemplate)
}

const launchdTemplate = `# runos vpnd, then its clean-up once it exits (launchd has no ExecStopPost).
stopping=
child=
trap 'stopping=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null' TERM INT
trap '' HUP
@DAEMON@ &
child=$!
[ -z "$stopping" ] || kill -TERM "$child" 2>/dev/null
wait "$child"
rc=$?
# A trapped signal ends wait early: wait on until the daemon has finished
# its teardown (wait on a pid that is gone answers 127).
while [ "$rc" -gt 128 ] && kill -0 "$child" 2>/dev/null; do
	wait "$child"
	rc=$?
done
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $0: runos vpnd exited with status $rc; cleaning up"
@CLEANUP@ || echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $0: the clean-up failed"
exit "$rc"
`

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

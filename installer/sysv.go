package installer

import (
	"strings"
)

// sysvScript renders the init script kardianos/service installs where
// there is no systemd (its SysvScript option, used verbatim).
//
// The script does what systemd's Restart=on-failure and ExecStopPost= do
// elsewhere: `start` runs a supervisor in a session of its own (setsid, so
// neither the caller's terminal nor its signals reach it) that starts
// runos vpnd, runs the clean-up whenever the daemon exits, and starts it
// again after a failure, backing off from 2 to 60 seconds. `stop` sends
// SIGTERM to the supervisor, which passes it to the daemon, waits for its
// teardown and runs the clean-up; after 30 seconds it kills both and runs
// the clean-up itself. The daemon is started as a plain background
// command so that its pid is the daemon's own, not a subshell's.
func sysvScript(s Spec) string {
	daemon := shellLine(append([]string{s.Binary}, s.DaemonArgs()...))
	cleanup := shellLine(append([]string{s.Binary}, s.CleanupArgs()...))
	r := strings.NewReplacer(
		"@NAME@", s.Name,
		"@DESCRIPTION@", s.Description,
		"@QNAME@", shellQuote(s.Name),
		"@PIDFILE@", shellQuote(s.PIDFile),
		"@DAEMONPID@", shellQuote(s.PIDFile+".daemon"),
		"@LOG@", shellQuote(s.LogFile),
		"@DAEMON@", daemon,
		"@CLEANUP@", cleanup,
	)
	return r.Replace(sysvTemplate)
}

const sysvTemplate = `#!/bin/sh
# Installed by "runos vpn install"; "runos vpn uninstall" removes it.
### BEGIN INIT INFO
# Provides:          @NAME@
# Required-Start:    $network $remote_fs $syslog
# Required-Stop:     $network $remote_fs $syslog
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: RunOS VPN daemon
# Description:       @DESCRIPTION@
### END INIT INFO

name=@QNAME@
pid_file=@PIDFILE@
daemon_pid_file=@DAEMONPID@
log=@LOG@
stop_timeout=30

is_running() {
    pid=$(cat "$pid_file" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    # A stale pid file whose pid went to another program is not ours.
    [ ! -r "/proc/$pid/cmdline" ] || tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q ' supervise'
}

say() {
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $name: $*"
}

cleanup() {
    say "cleaning up after the daemon"
    @CLEANUP@
}

supervise() {
    echo $$ > "$pid_file"
    stopping=
    child=
    trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
    trap '' HUP
    delay=2
    while :; do
        started=$(date +%s)
        @DAEMON@ &
        child=$!
        echo "$child" > "$daemon_pid_file"
        [ -n "$stopping" ] && kill -TERM "$child" 2>/dev/null
        wait "$child"
        rc=$?
        # A trapped signal ends wait early: wait on until the daemon has
        # finished its teardown (wait on a pid that is gone answers 127).
        while [ "$rc" -gt 128 ] && kill -0 "$child" 2>/dev/null; do
            wait "$child"
            rc=$?
        done
        child=
        rm -f "$daemon_pid_file"
        say "runos vpnd exited with status $rc"
        cleanup
        [ -n "$stopping" ] && break
        [ "$rc" -eq 0 ] && break
        [ $(( $(date +%s) - started )) -ge 60 ] && delay=2
        say "restarting it in $delay s"
        sleep "$delay" &
        wait $! || kill $! 2>/dev/null
        [ -n "$stopping" ] && break
        delay=$(( delay * 2 ))
        [ "$delay" -gt 60 ] && delay=60
    done
    rm -f "$pid_file"
}

# stop_orphan stops a daemon whose supervisor is gone (killed by hand).
stop_orphan() {
    dpid=$(cat "$daemon_pid_file" 2>/dev/null) || return 0
    if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
        kill -TERM "$dpid" 2>/dev/null
        i=0
        while [ $i -lt $((stop_timeout * 10)) ] && kill -0 "$dpid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$dpid" 2>/dev/null
    fi
    rm -f "$daemon_pid_file"
    cleanup
}

case "$1" in
    start)
        if is_running; then
            echo "Already running"
            exit 0
        fi
        echo "Starting $name"
        mkdir -p "$(dirname "$log")" "$(dirname "$pid_file")"
        rm -f "$pid_file"
        if command -v setsid >/dev/null 2>&1; then
            setsid "$0" supervise </dev/null >>"$log" 2>&1 &
        else
            "$0" supervise </dev/null >>"$log" 2>&1 &
        fi
        i=0
        while [ $i -lt 50 ] && ! is_running; do sleep 0.1; i=$((i + 1)); done
        if ! is_running; then
            echo "Unable to start, see $log"
            exit 1
        fi
        ;;
    supervise)
        supervise
        ;;
    stop)
        if ! is_running; then
            stop_orphan >>"$log" 2>&1
            rm -f "$pid_file"
            echo "Not running"
            exit 0
        fi
        echo "Stopping $name"
        kill -TERM "$pid"
        i=0
        while [ $i -lt $((stop_timeout * 10)) ] && is_running; do sleep 0.1; i=$((i + 1)); done
        if is_running; then
            echo "Not stopped after $stop_timeout s: killing it"
            kill -KILL "$pid" 2>/dev/null
            stop_orphan >>"$log" 2>&1
            rm -f "$pid_file"
        fi
        echo "Stopped"
        ;;
    restart|force-reload)
        "$0" stop && "$0" start
        ;;
    status)
        if is_running; then
            echo "Running"
            exit 0
        fi
        echo "Stopped"
        exit 3
        ;;
    *)
        echo "Usage: $0 {start|stop|restart|status}"
        exit 1
        ;;
esac
exit 0
`

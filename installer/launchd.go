package installer

import (
	"encoding/xml"
	"strings"
)

// launchdPlist renders the LaunchDaemon kardianos/service installs on
// macOS (its LaunchdConfig option, used verbatim). launchd starts the
// daemon at boot (RunAtLoad) and again whenever it exits (KeepAlive); the
// daemon undoes a crashed predecessor's changes when it starts, and
// `runos vpn uninstall` runs the clean-up after unloading it.
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
	for _, a := range append([]string{s.Binary}, s.DaemonArgs()...) {
		str("\t\t", a)
	}
	b.WriteString("\t</array>\n")
	key("RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("KeepAlive")
	b.WriteString("\t<true/>\n")
	key("ThrottleInterval")
	b.WriteString("\t<integer>5</integer>\n")
	key("StandardOutPath")
	str("\t", s.LogFile)
	key("StandardErrorPath")
	str("\t", s.LogFile)
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

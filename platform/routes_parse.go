package platform

import (
	"bufio"
	"bytes"
	"net/netip"
	"strconv"
	"strings"
)

// parseRouteGet reads the interface from `route -n get`'s answer (macOS).
func parseRouteGet(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "interface:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseNetstat reads `netstat -rn` (macOS): Destination, Gateway, Flags,
// Netif; destinations are "default", an address, or BSD's shorthand
// ("100.64/10", "10.77.0/24", "fe80::%utun1/64").
func parseNetstat(out []byte) []Route {
	var rs []Route
	v6 := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "Internet:":
			v6 = false
			continue
		case line == "Internet6:":
			v6 = true
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] == "Destination" {
			continue
		}
		p, ok := bsdPrefix(f[0], v6)
		if !ok {
			continue
		}
		rs = append(rs, Route{Prefix: p, Interface: f[3]})
	}
	return rs
}

func bsdPrefix(s string, v6 bool) (netip.Prefix, bool) {
	if s == "default" {
		if v6 {
			return netip.MustParsePrefix("::/0"), true
		}
		return netip.MustParsePrefix("0.0.0.0/0"), true
	}
	addr, bits, hasBits := strings.Cut(s, "/")
	if i := strings.IndexByte(addr, '%'); i >= 0 {
		addr = addr[:i] // a zone: fe80::%en0
	}
	if !v6 {
		parts := strings.Split(addr, ".")
		if len(parts) > 4 {
			return netip.Prefix{}, false
		}
		if !hasBits {
			bits = strconv.Itoa(8 * len(parts)) // 10.77 is 10.77.0.0/16
		}
		for len(parts) < 4 {
			parts = append(parts, "0")
		}
		addr = strings.Join(parts, ".")
	} else if !hasBits {
		bits = "128"
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, false
	}
	n, err := strconv.Atoi(bits)
	if err != nil || n < 0 || n > a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, n).Masked(), true
}

package labbench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// IperfMbps is the rate the receiver saw in an `iperf3 -J` report, in
// Mbit/s.
func IperfMbps(report []byte) (float64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		return 0, fmt.Errorf("iperf3 report: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	bps := r.End.SumReceived.BitsPerSecond
	if bps <= 0 || math.IsInf(bps, 0) || math.IsNaN(bps) {
		return 0, errors.New("iperf3 report: no received rate")
	}
	return bps / 1e6, nil
}

// IperfIntervals are the rates (Mbit/s) of an iperf3 -J report's
// intervals (-i), in order, as the client saw them: how a transfer
// began, which its average hides.
func IperfIntervals(report []byte) ([]float64, error) {
	var r struct {
		Error     string `json:"error"`
		Intervals []struct {
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		return nil, fmt.Errorf("iperf3 report: %w", err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", r.Error)
	}
	if len(r.Intervals) == 0 {
		return nil, errors.New("iperf3 report: no intervals")
	}
	out := make([]float64, len(r.Intervals))
	for i, iv := range r.Intervals {
		bps := iv.Sum.BitsPerSecond
		if bps < 0 || math.IsInf(bps, 0) || math.IsNaN(bps) {
			return nil, fmt.Errorf("iperf3 report: interval %d has rate %v", i+1, bps)
		}
		out[i] = bps / 1e6
	}
	return out, nil
}

// PingTimes are the round-trip times (ms) of ping's reply lines
// ("64 bytes from 198.51.100.31: icmp_seq=1 ttl=64 time=0.061 ms").
func PingTimes(out string) []float64 {
	var ts []float64
	for line := range strings.Lines(out) {
		_, after, ok := strings.Cut(line, " time=")
		if !ok {
			continue
		}
		f := strings.Fields(after)
		if len(f) < 2 || f[1] != "ms" {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		ts = append(ts, v)
	}
	return ts
}

// ReportedConnectMs is the time `runos vpn connect` reports on its last
// line ("Connected in 19 ms."), when it reports one in milliseconds.
func ReportedConnectMs(out string) (float64, bool) {
	i := strings.LastIndex(out, "Connected in ")
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(out[i+len("Connected in "):])
	if len(f) < 2 || strings.TrimSuffix(f[1], ".") != "ms" {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// LastHandshake reads the (only) peer's last handshake from a UAPI "get"
// answer; false when it has none yet.
func LastHandshake(uapi string) (time.Time, bool) {
	var sec, nsec int64
	found := false
	sc := bufio.NewScanner(strings.NewReader(uapi))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "last_handshake_time_sec":
			sec, found = n, true
		case "last_handshake_time_nsec":
			nsec = n
		}
	}
	if !found || sec == 0 && nsec == 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec), true
}

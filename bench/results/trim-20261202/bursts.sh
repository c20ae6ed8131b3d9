#!/bin/bash
# A/B: a burst through the tunnel every (secs + gap) seconds, the daemon warm (before) or trimmed between bursts (after).
# usage (root): bursts.sh before|after secs gap count
# /tmp/trim-<before|after>/bin holds runos, runos-control, runos-gateway, runos-lab built with
#   go build -trimpath -ldflags="-s -w" -o /tmp/trim-<v>/bin/ ./cmd/runos ./cmd/runos-control ./cmd/runos-gateway ./cmd/runos-lab
# from `git archive 4ca8683` (before) and `git archive 56d6f77` (after).
# A lab of its own, one warm-up transfer (not counted), then count transfers of secs seconds, each after gap seconds of idle;
# the daemon's VmRSS just before and after each.
v=$1; secs=$2; gap=$3; n=$4
D=/tmp/trimlab-$v
L=/tmp/trim-$v/bin/runos-lab
$L down --dir $D >/dev/null 2>&1; rm -rf $D
$L up --dir $D >/dev/null || exit 1
trap "$L down --dir $D >/dev/null 2>&1" EXIT
$L exec --dir $D client -- runos vpn up --cid ky3 >/dev/null || exit 1
$L exec --dir $D ky3-n1 -- iperf3 -s -D
sleep 1
pid=$(python3 -c "import json;d=json.load(open('$D/lab.json'));print([p['pid'] for p in d['procs'] if p['name']=='vpnd'][0])" 2>/dev/null)
rss() { awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$pid/status; }
$L exec --dir $D client -- iperf3 -c 100.100.1.1 -t $secs -J > /dev/null   # warm-up, not counted
echo "# $v secs=$secs gap=$gap pid=$pid load=$(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 $n); do
  sleep $gap
  before=$(rss)
  m=$($L exec --dir $D client -- iperf3 -c 100.100.1.1 -t $secs -J | python3 -c "import json,sys;print('%.0f'%(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e6))")
  echo "$v burst $i: rss before ${before} MiB, ${m} Mbit/s, rss after $(rss) MiB"
done

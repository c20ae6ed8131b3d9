#!/bin/bash
# measure.sh LABEL [N]: N rounds of uu (upstream->upstream) and ur (upstream client->runos gateway), with perf on gateway during ur

L=bin/runos-lab; D=/tmp/lab
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
GW=$(pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/' | head -1); [ -z "$GW" ] && GW=$(pgrep -n runos-gateway)
echo "gateway pid $GW ($(ps -o etimes= -p $GW)s old)"
mb(){ ex client iperf3 -c $1 -t 3 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'; }
ex client ip route replace 100.100.1.1/32 dev wgx
for i in $(seq ${2:-3}); do
  u=$(mb 10.97.0.1)
  perf stat -e context-switches,page-faults,task-clock -p $GW -o /tmp/gw/$1.stat.$i -- sleep 3.6 & ps=$!
  g=$(mb 100.100.1.1); wait $ps
  cs=$(awk '/context-switches/{gsub(",","",$1);print $1}' /tmp/gw/$1.stat.$i); pf=$(awk '/page-faults/{gsub(",","",$1);print $1}' /tmp/gw/$1.stat.$i)
  echo "$1 round $i: uu $u ur $g ratio $(python3 -c "print(round($g/$u,3))") cs $cs pf $pf"
done
ex client ip route del 100.100.1.1/32 dev wgx

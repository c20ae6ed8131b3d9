#!/bin/bash
# rec.sh LABEL: perf record sched_switch with stacks on the gateway during one ur transfer
L=bin/runos-lab; D=/tmp/lab
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
GW=$(pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/' | head -1)
ex client ip route replace 100.100.1.1/32 dev wgx
perf record -q -e sched:sched_switch -g -p $GW -o /tmp/gw/$1.data -- sleep 3.6 >/dev/null 2>&1 & ps=$!
ex client iperf3 -c 100.100.1.1 -t 3 -J | python3 -c 'import json,sys; print("ur", round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'
wait $ps
ex client ip route del 100.100.1.1/32 dev wgx
perf report -i /tmp/gw/$1.data --stdio --no-children -g caller,0.5,callee --sort sym 2>/dev/null | grep -v "^$" | head -150 > /tmp/gw/$1.report
perf script -i /tmp/gw/$1.data -F tid,ip,sym 2>/dev/null > /tmp/gw/$1.script

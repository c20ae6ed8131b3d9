#!/bin/bash
# $1: bin dir. 8 transfers of 1 s, 1 s apart; counts the daemon's relay races
B=$1; ex(){ $B/runos-lab exec --dir /tmp/lab "$@"; }
$B/runos-lab up --dir /tmp/lab > /tmp/labup.log 2>&1 || { echo up failed; exit 1; }
ex client -- runos vpn up --cid ky3 >/dev/null 2>&1; ex ky3-n1 -- iperf3 -s -D; sleep 6
n0=$(grep -c "trying the relay" /tmp/lab/logs/client.vpnd.log)
for i in 1 2 3 4 5 6 7 8; do ex client -- iperf3 -c 100.100.1.1 -t 1 >/dev/null; sleep 1; done; sleep 2
echo "$B: races $(( $(grep -c "trying the relay" /tmp/lab/logs/client.vpnd.log) - n0 )) of 8 transfers"
grep "trying the relay" /tmp/lab/logs/client.vpnd.log | tail -2 | cut -c1-220
$B/runos-lab down --dir /tmp/lab >/dev/null 2>&1

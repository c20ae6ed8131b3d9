#!/bin/bash
# manual lab: runos vs upstream with per-process faults/ctx switches
set -e
L=${L:-bin/runos-lab}; D=/tmp/lab
UP=${UP:-/tmp/upwg/wireguard-go-upstream} # go build -trimpath -o /tmp/upwg/wireguard-go-upstream golang.zx2c4.com/wireguard
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
ex client runos vpn up --cid ky3 >/dev/null
for h in ky3-n1 client; do ex $h $UP -f wgu > /tmp/up-$h.log 2>&1 & done
sleep 1
wg genkey > /tmp/k1; wg genkey > /tmp/k2
ex ky3-n1 wg set wgu private-key /tmp/k1 listen-port 51997
ex client wg set wgu private-key /tmp/k2
ex ky3-n1 ip addr add 10.97.0.1/24 dev wgu; ex ky3-n1 ip link set wgu up
ex client ip addr add 10.97.0.2/24 dev wgu; ex client ip link set wgu up
ex ky3-n1 wg set wgu peer $(wg pubkey < /tmp/k2) allowed-ips 10.97.0.2/32
ex client wg set wgu peer $(wg pubkey < /tmp/k1) allowed-ips 10.97.0.0/24 endpoint 10.77.0.21:51997 persistent-keepalive 1
ex client ping -c1 -W5 10.97.0.1 >/dev/null
ex ky3-n1 iperf3 -s -D
sleep 0.5

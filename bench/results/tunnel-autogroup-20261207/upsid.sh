#!/bin/bash
# restart the upstream pair (wgu on client and ky3-n1) and wgx, each wireguard-go in a session of its own (setsid), as the lab runs runos's
SS=${SS-setsid}
L=bin/runos-lab; D=/tmp/lab; UP=/tmp/upwg/wireguard-go-upstream
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
pkill -f "wireguard-go-upstream -f wg[ux]"; sleep 1
for h in ky3-n1 client; do ex $h $SS $UP -f wgu > /tmp/up-$h.log 2>&1 & done
ex client $SS $UP -f wgx >/dev/null 2>&1 &
sleep 1.5
ex ky3-n1 wg set wgu private-key /tmp/k1 listen-port 51997
ex client wg set wgu private-key /tmp/k2
ex ky3-n1 ip addr add 10.97.0.1/24 dev wgu; ex ky3-n1 ip link set wgu up
ex client ip addr add 10.97.0.2/24 dev wgu; ex client ip link set wgu up
ex ky3-n1 wg set wgu peer $(wg pubkey < /tmp/k2) allowed-ips 10.97.0.2/32
ex client wg set wgu peer $(wg pubkey < /tmp/k1) allowed-ips 10.97.0.0/24 endpoint 10.77.0.21:51997 persistent-keepalive 1
ex client wg set wgx private-key /tmp/kx
ex client ip addr add 100.96.9.9/32 dev wgx; ex client ip link set wgx up
bash bench/results/tunnel-autogroup-20261207/readd.sh
ex client ping -c1 -W5 10.97.0.1 >/dev/null && echo pair up
for p in $(pgrep -f "wireguard-go-upstream -f wg[ux]"); do echo "$p $(cat /proc/$p/autogroup)"; done

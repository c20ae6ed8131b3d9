#!/bin/bash
# lab up must be done; sets up upstream pair (wgu), upstream client wgx -> runos gateway
set -e

L=bin/runos-lab; D=/tmp/lab; UP=/tmp/upwg/wireguard-go-upstream
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
L=$L bash bench/results/tunnel-gap-20261207/upstream-pair.sh
ex client $UP -f wgx >/dev/null 2>&1 & sleep 1
wg genkey > /tmp/kx; chmod 600 /tmp/kx
ex client wg set wgx private-key /tmp/kx
ex client ip addr add 100.96.9.9/32 dev wgx; ex client ip link set wgx up
GWPUB=$(ex ky3-n1 wg show wgvpn public-key); GWPORT=$(ex ky3-n1 wg show wgvpn listen-port)
ex ky3-n1 wg set wgvpn peer $(wg pubkey < /tmp/kx) allowed-ips 100.96.9.9/32
ex client wg set wgx peer $GWPUB allowed-ips 100.100.1.1/32 endpoint 10.77.0.21:$GWPORT persistent-keepalive 1
echo setup done

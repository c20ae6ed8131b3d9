#!/bin/bash
# 2x2: {runos daemon, upstream} client x {runos gateway, upstream} server, saturated, alternating
L=${L:-bin/runos-lab}; D=/tmp/lab; UP=${UP:-/tmp/upwg/wireguard-go-upstream}
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
# upstream client wgx -> runos gateway wgvpn (to 100.100.1.1 via a /32 route on wgx)
ex client $UP -f wgx >/dev/null 2>&1 & sleep 1
wg genkey > /tmp/kx; chmod 600 /tmp/kx
ex client wg set wgx private-key /tmp/kx
ex client ip addr add 100.96.9.9/32 dev wgx; ex client ip link set wgx up
GWPUB=$(ex ky3-n1 wg show wgvpn public-key); GWPORT=$(ex ky3-n1 wg show wgvpn listen-port)
ex ky3-n1 wg set wgvpn peer $(wg pubkey < /tmp/kx) allowed-ips 100.96.9.9/32
ex client wg set wgx peer $GWPUB allowed-ips 100.100.1.1/32 endpoint 10.77.0.21:$GWPORT persistent-keepalive 1
mb(){ ex client iperf3 -c $1 -t 3 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'; }
# the runos path to 100.100.1.1 is taken by wgx's /32 route while it exists: switch it per transfer
rr=(); ru=(); ur=(); uu=()
for i in $(seq ${N:-6}); do
  ex client ip route del 100.100.1.1/32 dev wgx 2>/dev/null; a=$(mb 100.100.1.1)            # runos -> runos
  b=0                                                                          # runos -> upstream
  ex client ip route add 100.100.1.1/32 dev wgx; c=$(mb 100.100.1.1)                         # upstream -> runos
  d=$(mb 10.97.0.1)                                                                          # upstream -> upstream
  echo "rr $a  ru $b  ur $c  uu $d"
done
ex client ip route del 100.100.1.1/32 dev wgx 2>/dev/null

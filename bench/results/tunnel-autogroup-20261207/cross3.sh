#!/bin/bash
# N rounds: uu (upstream->upstream), ur (upstream client->runos gateway), rr (runos daemon->runos gateway); medians of ratios to uu
L=bin/runos-lab; D=/tmp/lab
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
mb(){ ex client iperf3 -c $1 -t 3 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'; }
urs=(); rrs=()
for i in $(seq ${N:-6}); do
  u=$(mb 10.97.0.1)
  ex client ip route replace 100.100.1.1/32 dev wgx; g=$(mb 100.100.1.1)
  ex client ip route del 100.100.1.1/32 dev wgx; r=$(mb 100.100.1.1)
  echo "$1 round $i: uu $u ur $g rr $r  ur/uu $(python3 -c "print(round($g/$u,3))") rr/uu $(python3 -c "print(round($r/$u,3))")"
done

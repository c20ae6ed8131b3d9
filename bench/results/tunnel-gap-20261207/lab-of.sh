#!/bin/bash
# usage: lab-of.sh <bindir> <flush:0|1> [env...]: a fresh lab from bindir's
# programs (env given to them), the upstream pair, ky3-n1's nftables flushed
# if asked, then 8 saturated runos/upstream pairs.
V=$1; F=$2; shift 2
here=$(dirname "$0")
$V/runos-lab down --dir /tmp/lab >/dev/null 2>&1; pkill -x wireguard-go-up; sleep 0.5
env "$@" $V/runos-lab up --dir /tmp/lab > /tmp/labup.log 2>&1 || { echo "lab up failed"; exit 1; }
L=$V/runos-lab bash "$here/upstream-pair.sh" >/dev/null 2>&1
[ "$F" = 1 ] && $V/runos-lab exec --dir /tmp/lab ky3-n1 -- nft flush ruleset
L=$V/runos-lab bash "$here/ratio.sh" 8

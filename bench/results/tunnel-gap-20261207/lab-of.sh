#!/bin/bash
# usage: satlab.sh <bindir> <flush:0|1> [env...]: a lab, upstream pair, 8 saturated pairs
V=$1; F=$2; shift 2
/tmp/vA/runos-lab down --dir /tmp/lab >/dev/null 2>&1; pkill -x wireguard-go-up; sleep 0.5
env "$@" $V/runos-lab up --dir /tmp/lab > /tmp/labup.log 2>&1 || { echo "lab up failed"; exit 1; }
sed -e "s|/work/main/bin/runos-lab|$V/runos-lab|" $(dirname $0)/upstream-pair.sh > /tmp/pf-v.sh; bash /tmp/pf-v.sh >/dev/null 2>&1
[ $F = 1 ] && $V/runos-lab exec --dir /tmp/lab ky3-n1 -- nft flush ruleset
sed -e "s|/work/main/bin/runos-lab|$V/runos-lab|" $(dirname $0)/ratio.sh > /tmp/ratio-v.sh; bash /tmp/ratio-v.sh 8

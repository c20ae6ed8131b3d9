#!/bin/bash
# restart ky3-n1's gateway through runos-lab exec (the previous session's "by hand")
ROOT=$PWD # the repository
GW=$(pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/' | head -1)
mkdir -p /tmp/gw; tr '\0' ' ' < /proc/$GW/cmdline > /tmp/gw/argv
kill $GW; while kill -0 $GW 2>/dev/null; do sleep 0.1; done

bin/runos-lab exec --dir /tmp/lab ky3-n1 -- ${GWBIN:-$ROOT/bin/runos-gateway} $(cat /tmp/gw/argv | cut -d' ' -f2-) >> /tmp/lab/logs/ky3-n1.gateway.log 2>&1 &
sleep 3
pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/'

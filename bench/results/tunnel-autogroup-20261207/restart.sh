#!/bin/bash
# restart ky3-n1's gateway exactly as the lab starts it (nsenter, setsid, env, log, stdin /dev/null)
ROOT=$PWD # the repository
GW=$(pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/' | head -1)
mkdir -p /tmp/gw; tr '\0' ' ' < /proc/$GW/cmdline > /tmp/gw/argv; tr '\0' '\n' < /proc/$GW/environ > /tmp/gw/env
NS=$(ip netns list | awk '/-ky3-n1/{print $1}')
kill $GW; while kill -0 $GW 2>/dev/null; do sleep 0.1; done
cd /tmp/lab/hosts/ky3-n1/home
env -i $(cat /tmp/gw/env | tr '\n' ' ') setsid nsenter --mount=/tmp/lab/ns/ky3-n1 --net=/var/run/netns/$NS -- ${GWBIN:-$ROOT/bin/runos-gateway} $(cat /tmp/gw/argv | cut -d' ' -f2-) >> /tmp/lab/logs/ky3-n1.gateway.log 2>&1 < /dev/null &
sleep 3
pgrep -f '^[^ ]*runos-gateway .*hosts/ky3-n1/'

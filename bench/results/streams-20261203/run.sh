#!/bin/bash
# usage: BIN=server.test run.sh OUTDIR ITERATIONS MODE... — runs BenchmarkMoveFanOut
# once per mode per iteration, the modes alternating, each in a file
# OUTDIR/<mode>-<n>-<i>.txt with the machine's load average before and after.
# MODE: lp-h1 (long-polls, HTTP/1.1), st-h1 (streams, HTTP/1.1), lp-h2, st-h2.
# RUNOS_FANOUT_DEVICES (default 10000) passes through; ROUNDS (default 5).
out=$1; shift; iters=$1; shift
n=${RUNOS_FANOUT_DEVICES:-10000}
mkdir -p "$out"
for i in $(seq 1 "$iters"); do
  for mode in "$@"; do
    case $mode in
      lp-h1) env="RUNOS_FANOUT_STREAM=0 RUNOS_FANOUT_H2=0" ;;
      st-h1) env="RUNOS_FANOUT_STREAM=1 RUNOS_FANOUT_H2=0" ;;
      lp-h2) env="RUNOS_FANOUT_STREAM=0 RUNOS_FANOUT_H2=1" ;;
      st-h2) env="RUNOS_FANOUT_STREAM=1 RUNOS_FANOUT_H2=1" ;;
      *) echo "unknown mode $mode"; exit 2 ;;
    esac
    f="$out/$mode-$n-$i.txt"
    echo "load before: $(uptime)" > "$f"
    env $env RUNOS_FANOUT_DEVICES=$n "$BIN" -test.run='^$' -test.bench='^BenchmarkMoveFanOut$' \
      -test.benchtime=${ROUNDS:-5}x -test.timeout=60m >> "$f" 2>&1
    echo "load after: $(uptime)" >> "$f"
    echo "$mode $n $i $(grep -o '[0-9.]* ms-all' "$f") $(grep -o '[0-9.]* cpu-us/dev' "$f") $(grep -o '[0-9.]* rss-KB/dev' "$f") | $(uptime | sed 's/.*load average: //')" >> "$out/log"
  done
done

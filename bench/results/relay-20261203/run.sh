#!/bin/sh
# Issue 14's numbers, one session: BenchmarkLabRelay on this branch, then
# A/B runs of BenchmarkLabConnect and BenchmarkLabThroughput alternating
# main (4ec0ce9, before the relay) and this branch, each from its own tree
# with its own programs.
set -u
OUT=/tmp/i14-final2
cd /work/wt/i14/bench/labbench
echo "=== relay" ; RUNOS_BENCH_BIN=/tmp/i14-rel-bin RUNOS_BENCH_RESULTS=$OUT RUNOS_BENCH_TPUT_ROUNDS=5 go test -run '^$' -bench '^BenchmarkLabRelay$' -timeout 30m . > $OUT/relay.txt 2>&1
for i in 1 2 3; do
  for side in main rel; do
    if [ $side = main ]; then cd /tmp/i14-main2-src/bench/labbench; else cd /work/wt/i14/bench/labbench; fi
    echo "=== connect $side $i"; mkdir -p $OUT/connect-$side
    RUNOS_BENCH_BIN=/tmp/i14-$side-bin RUNOS_BENCH_RESULTS=$OUT/connect-$side go test -run '^$' -bench '^BenchmarkLabConnect$' -timeout 30m . > $OUT/connect-$side-$i.txt 2>&1
  done
done
for i in 1 2 3; do
  for side in main rel; do
    if [ $side = main ]; then cd /tmp/i14-main2-src/bench/labbench; else cd /work/wt/i14/bench/labbench; fi
    mkdir -p $OUT/throughput-$side
    for try in 1 2 3; do
      echo "=== throughput $side $i try $try"
      RUNOS_BENCH_BIN=/tmp/i14-$side-bin RUNOS_BENCH_RESULTS=$OUT/throughput-$side go test -run '^$' -bench '^BenchmarkLabThroughput$' -timeout 30m . > $OUT/throughput-$side-$i.txt 2>&1 && break
    done
  done
done
echo done

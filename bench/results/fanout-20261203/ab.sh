#!/bin/bash
# usage: BIN_DIR=dir ab.sh outdir iterations name1 name2 ... (runs $BIN_DIR/<name>.test alternately;
# the RUNOS_FANOUT_* environment passes through)
out=$1; shift; iters=$1; shift
mkdir -p $out
for i in $(seq 1 $iters); do
  for b in "$@"; do
    $BIN_DIR/$b.test -test.run='^$' -test.bench=BenchmarkMoveFanOut -test.benchtime=5x > $out/$b-$i.txt 2>&1
    echo "$b $i $(uptime | sed 's/.*load average: //') $(grep -o '[0-9.]* cpu-ms-control' $out/$b-$i.txt) $(grep -o '[0-9.]* ms-all' $out/$b-$i.txt)" >> $out/log
  done
done

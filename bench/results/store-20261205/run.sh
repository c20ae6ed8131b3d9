#!/bin/bash
# issue 20: no store regression — base (19c5c2a, two stores) vs main (sqlstore), alternated, one session.
out=/tmp/storecmp; mkdir -p $out
for round in 1 2; do
  for v in base main; do
    cd /tmp && /tmp/srv-$v.test -test.run='^$' -test.bench='^BenchmarkMoveFanOut$' -test.benchtime=5x -test.timeout=30m > $out/fanout-$v-$round.txt 2>&1
    cd /tmp && /tmp/srv-$v.test -test.run='^$' -test.bench='^BenchmarkMoveFanOutReplicas$' -test.benchtime=3x -test.timeout=30m > $out/replicas-$v-$round.txt 2>&1
    uptime >> $out/load.txt
  done
done
echo finished > $out/done

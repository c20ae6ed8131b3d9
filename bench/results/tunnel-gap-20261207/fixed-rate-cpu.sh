#!/bin/bash
# N pairs at a fixed rate; per pair: CPU (both ends, ms) and context switches; ratios runos/upstream; medians
L=${L:-bin/runos-lab}; RATE=${RATE:-600M}; N=${N:-6}
vpnd=$(pgrep -f "runos vpnd" | head -1); gw=$(pgrep -f "runos-gateway" | head -1)
ups=($(pgrep -x wireguard-go-up)); if [ "$(readlink /proc/${ups[0]}/ns/net)" = "$(readlink /proc/$vpnd/ns/net)" ]; then ucli=${ups[0]}; usrv=${ups[1]}; else ucli=${ups[1]}; usrv=${ups[0]}; fi
EV=task-clock,context-switches,page-faults
out=/tmp/pstat2.csv; : > $out
for i in $(seq $N); do
for path in runos upstream; do
  if [ $path = runos ]; then a=100.100.1.1; c=$vpnd; s=$gw; else a=10.97.0.1; c=$ucli; s=$usrv; fi
  perf stat -x, -e $EV -p $c -o /tmp/ps-c.txt -- sleep 4 & perf stat -x, -e $EV -p $s -o /tmp/ps-s.txt -- sleep 4 &
  sleep 0.2; $L exec --dir /tmp/lab client -- iperf3 -c $a -t 4 -b $RATE > /dev/null; wait
  v(){ grep ",$2" $1 | head -1 | cut -d, -f1; }
  echo "$i,$path,$(v /tmp/ps-c.txt task-clock),$(v /tmp/ps-s.txt task-clock),$(v /tmp/ps-c.txt context-switches),$(v /tmp/ps-s.txt context-switches),$(v /tmp/ps-c.txt page-faults),$(v /tmp/ps-s.txt page-faults)" >> $out
done; done
python3 - $out <<'PY'
import sys,csv,statistics as st
rows=list(csv.reader(open(sys.argv[1])))
by={}
for r in rows: by.setdefault(r[0],{})[r[1]]=[float(x) for x in r[2:]]
cpu=[];cs=[];cc=[];sc=[]
for i,d in sorted(by.items()):
    R,U=d['runos'],d['upstream']
    cpu.append((R[0]+R[1])/(U[0]+U[1])); cc.append(R[0]/U[0]); sc.append(R[1]/U[1]); cs.append((R[2]+R[3])/(U[2]+U[3]))
f=lambda v: f"median {st.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]"
print("cpu runos/upstream both ends:", f(cpu)); print("  client end:", f(cc)); print("  server end:", f(sc)); print("ctx switches runos/upstream:", f(cs))
print("page faults runos (c,s):", [ (int(d['runos'][4]),int(d['runos'][5])) for i,d in sorted(by.items())], "upstream:", [ (int(d['upstream'][4]),int(d['upstream'][5])) for i,d in sorted(by.items())])
PY

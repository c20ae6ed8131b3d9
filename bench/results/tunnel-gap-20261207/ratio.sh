#!/bin/bash
# N pairs runos/upstream, prints each ratio and the median
L=${L:-bin/runos-lab}; D=/tmp/lab; N=${1:-6}
ex(){ h=$1; shift; $L exec --dir $D $h -- "$@"; }
mb(){ ex client iperf3 -c $1 -t 3 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'; }
rs=()
for i in $(seq $N); do
  if [ $((i%2)) = 1 ]; then r=$(mb 100.100.1.1); u=$(mb 10.97.0.1); else u=$(mb 10.97.0.1); r=$(mb 100.100.1.1); fi
  rs+=($(python3 -c "print(round($r/$u,3))")); echo -n "$r/$u "
done
echo; python3 -c "import statistics; print('median', statistics.median([${rs[*]// /,}]))" 2>/dev/null || python3 -c "import statistics,sys; print('median', statistics.median([float(x) for x in '${rs[*]}'.split()]))"

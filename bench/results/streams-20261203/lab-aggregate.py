import sys, json, glob, math, collections
# usage: lab-aggregate.py DIR — pools BenchmarkLabMoveSwitch's result
# documents in DIR by laptops and streams/long-polls: every move of every
# run; quantiles nearest-rank, as labbench's; and each run's p50.
pool = collections.defaultdict(lambda: collections.defaultdict(list))
runs = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/lab-move-switch*.json')):
    d = json.load(open(f))
    key = (d['params']['clients'], 'long-polls' if d['params'].get('longPoll') else 'streams')
    for k in ['control-switch-ms', 'laptop-status-ms', 'last-laptop-status-ms', 'control-prepare-ms']:
        pool[key][k] += d['samples'][k]
    s = sorted(d['samples']['laptop-status-ms'])
    runs[key].append((f.split('/')[-1], sorted(d['samples']['control-switch-ms'])[len(d['samples']['control-switch-ms'])//2], s[math.ceil(0.5*len(s))-1]))
def q(v, p):
    v = sorted(v)
    return v[max(0, math.ceil(p * len(v)) - 1)]
for key in sorted(pool):
    print(f"{key[0]} laptops, {key[1]} ({len(runs[key])} runs)")
    for k, v in pool[key].items():
        print(f"  {k:22s} n={len(v):4d} p50 {q(v,.5):6.1f} p90 {q(v,.9):6.1f} p99 {q(v,.99):6.1f} max {max(v):6.1f}")
    print("  per run (switchMs p50, laptop p50): " + ", ".join(f"{a:.0f}/{b:.1f}" for _, a, b in runs[key]))

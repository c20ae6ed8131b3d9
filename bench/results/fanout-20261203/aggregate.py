import sys, re, glob, statistics as st, collections
# usage: agg.py dir [dir...]; files named <bin>-<i>.txt
rounds = collections.defaultdict(lambda: collections.defaultdict(list))
mem = collections.defaultdict(lambda: collections.defaultdict(list))
for d in sys.argv[1:]:
    for f in sorted(glob.glob(d + '/*.txt')):
        b = f.split('/')[-1].rsplit('-', 1)[0]
        lines = open(f).read().splitlines()
        rl = [l for l in lines if re.search(r'round \d+: all', l)]
        for l in rl[1:]:  # skip the b.N=1 warm-up run's round
            for k, pat in [('all', r'all (\d+) ms'), ('written', r'written (\d+) ms'), ('p50', r'p50 (\d+) ms'),
                           ('cpu-ctl', r'cpu control (\d+) ms'), ('cpu-dev', r'devices (\d+) ms')]:
                m = re.search(pat, l)
                if m: rounds[b][k].append(float(m.group(1)))
        for l in lines:
            if 'ns/op' in l:
                for k in ['heap-MB', 'stack-MB', 'rss-MB', 'goroutines', 'conns']:
                    m = re.search(r'([\d.]+) ' + k, l)
                    if m: mem[b][k].append(float(m.group(1)))
def q(v):
    v = sorted(v); n = len(v)
    return f"{st.median(v):7.0f} [{v[n//4]:.0f}-{v[(3*n)//4]:.0f}] n={n}"
for b in rounds:
    print(b)
    for k, v in rounds[b].items():
        print(f"  {k:8s} {q(v)}")
    for k, v in mem[b].items():
        print(f"  {k:8s} " + ", ".join(f"{x:.0f}" for x in v))

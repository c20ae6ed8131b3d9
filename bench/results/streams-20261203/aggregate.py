import sys, re, glob, statistics as st, collections
# usage: aggregate.py DIR...; files named <mode>-<devices>-<i>.txt (run.sh).
# Every round of every run pooled (the framework's 1-round warm-up run left
# out), as median [interquartile range]; memory per run (taken with every
# device held, after a forced GC).
rounds = collections.defaultdict(lambda: collections.defaultdict(list))
mem = collections.defaultdict(lambda: collections.defaultdict(list))
loads = collections.defaultdict(list)
for d in sys.argv[1:]:
    for f in sorted(glob.glob(d + '/*.txt')):
        name = f.split('/')[-1]
        m = re.match(r'(\w+-h\d)-(\d+)-\d+\.txt', name)
        if not m:
            continue
        key = (m.group(1), int(m.group(2)))
        text = open(f).read()
        for l in text.splitlines():
            if l.startswith('load '):
                loads[key].append(float(re.search(r'load average: ([\d.]+)', l).group(1)))
        # The first round logged is the framework's warm-up run (b.N=1).
        res = [l for l in text.splitlines() if l.startswith('BenchmarkMoveFanOut')]
        rl = [l for l in text.splitlines() if re.search(r'round \d+: all', l)]
        for l in rl[1:]:
            for k, pat in [('all', r'all (\d+) ms'), ('written', r'written (\d+) ms'), ('p50', r'p50 (\d+) ms'),
                           ('cpu-ctl', r'cpu control (\d+) ms'), ('cpu-dev', r'devices (\d+) ms')]:
                mm = re.search(pat, l)
                if mm:
                    rounds[key][k].append(float(mm.group(1)))
        for l in res:
            for k in ['heap-KB/dev', 'stack-KB/dev', 'rss-KB/dev', 'cpu-us/dev', 'heap-MB', 'stack-MB', 'rss-MB', 'goroutines']:
                mm = re.search(r'([\d.]+) ' + re.escape(k), l)
                if mm:
                    mem[key][k].append(float(mm.group(1)))
def q(v):
    v = sorted(v); n = len(v)
    return f"{st.median(v):7.0f} [{v[n//4]:.0f}-{v[(3*n)//4]:.0f}] n={n}"
for key in sorted(rounds, key=lambda k: (k[1], k[0])):
    mode, n = key
    print(f"{mode} {n} devices (load {min(loads[key]):.1f}-{max(loads[key]):.1f})")
    for k, v in rounds[key].items():
        print(f"  {k:8s} {q(v)} max {max(v):.0f}")
        if k == 'cpu-ctl':
            print(f"  {'us/dev':8s} {st.median(v)*1000/n:7.1f}")
    for k, v in mem[key].items():
        print(f"  {k:12s} " + ", ".join(f"{x:.1f}" for x in v))

import sys, subprocess, collections
data, binary = sys.argv[1], sys.argv[2]
out = subprocess.run(["perf","script","-i",data,"-F","tid,ip"],capture_output=True,text=True).stdout
samples=[]; cur=None
for line in out.splitlines():
    if not line.strip():
        if cur: samples.append(cur); cur=None
        continue
    if not line.startswith('\t') and line.strip().isdigit():
        cur=(line.strip(),[]); continue
    a=line.split()[0]
    if cur is not None: cur[1].append(a)
if cur: samples.append(cur)
addrs=set()
for tid,st in samples:
    for a in st:
        if int(a,16) < 0x4000000: addrs.add(a)
addrs=sorted(addrs)
r=subprocess.run(["go","tool","addr2line",binary],input="\n".join(hex(int(a,16)+0x400000) for a in addrs)+"\n",capture_output=True,text=True).stdout.splitlines()
sym={a:r[2*i] for i,a in enumerate(addrs)}
def short(s): return s.replace("golang.zx2c4.com/wireguard/","wg/").replace("github.com/runos/vpn/","")
c=collections.Counter(); threads=collections.Counter()
for tid,st in samples:
    go=[short(sym[a]) for a in st if a in sym]
    go=[g for g in go if not g.startswith(("runtime/internal","syscall.","internal/runtime/syscall"))]
    key=" <- ".join(go[:4])
    c[key]+=1
print("samples",len(samples))
for k,v in c.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 15): print(v,k)

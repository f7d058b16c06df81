#!/usr/bin/env python3
"""Round-by-round ratios from a `compare-memcached --memtier ... --perf-user` log.

Reads the progress lines (`[compare] memtier SIZE B depth D run R SERVER[ under perf]: ...`)
and prints, per scenario, shoald's ratios to memcached taken round by round: ops/s, CPU per
request (plain runs), perf's user time per request (sampled runs) and CPU per request in
the sampled runs, each as median (min-max); then how much CPU per request each server's
sampled runs took beyond its plain ones (median over rounds), which is what having perf
attached costs.

    python3 scripts/memtier-log-pairs.py LOG
"""
import re
import statistics
import sys

LINE = re.compile(
    r"\[compare\] memtier (\d+) B depth (\d+) run (\d+) (\S+)( under perf)?: (\d+) ops/s, "
    r"([\d.]+) us CPU/request(?:, ([\d.]+) us user/request sampled| \(([\d.]+) user\))"
)


def main(path):
    runs = {}
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        size, depth, rep, server, perf, ops, cpu, sampled, _user = m.groups()
        run = runs.setdefault((int(size), int(depth)), {}).setdefault(server, {}).setdefault(int(rep), {})
        if perf:
            run["sampled_user"] = float(sampled)
            run["cpu_under_perf"] = float(cpu)
        else:
            run["ops"] = float(ops)
            run["cpu"] = float(cpu)
    for (size, depth), servers in sorted(runs.items()):
        mc, sh = servers.get("memcached", {}), servers.get("shoald", {})
        parts = []
        for field in ["ops", "cpu", "sampled_user", "cpu_under_perf"]:
            ratios = [sh[r][field] / mc[r][field] for r in mc if field in mc[r] and field in sh.get(r, {})]
            if ratios:
                parts.append(f"{field} {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        for name, server in [("memcached", mc), ("shoald", sh)]:
            extra = [r["cpu_under_perf"] - r["cpu"] for r in server.values() if "cpu_under_perf" in r and "cpu" in r]
            if extra:
                parts.append(f"perf adds {statistics.median(extra):.2f} us/request to {name}")
        print(f"{size} B, depth {depth}: " + "; ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""Tables for scripts/bench-flash.sh: hit ratio, RSS and write amplification from the
hit-ratio replays (results.json per shape), throughput and GET latency from memtier."""
import glob
import json
import os
import statistics
import sys


def points(node):
    """Every dict with a `contender` key, anywhere in a results.json."""
    if isinstance(node, dict):
        if "contender" in node:
            yield node
        for v in node.values():
            yield from points(v)
    elif isinstance(node, list):
        for v in node:
            yield from points(v)


def replay_table(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*", "results.json"))):
        name = os.path.basename(os.path.dirname(path))
        by = {}
        for p in points(json.load(open(path))):
            r, st = p["result"], p.get("stats", {})
            gets = max(r["gets"], 1)
            by[p["contender"]] = {
                "hit": r["hits"] / gets,
                "rss": p.get("rss_kib", 0) / 1024,
                "wa": p.get("disk_write_bytes", 0) / max(st.get("bytes_read", 0), 1),
                "flash_hits": st.get("get_extstore", 0),
                "secs": r["secs"],
                "rate": r["requests"] / max(r["secs"], 1e-9),
            }
        rows.append((name, by))
    print("| shape | shoald hit | memcached hit | shoald miss / memcached's | RSS MiB shoald / memcached | disk bytes per byte set shoald / memcached | replay req/s shoald / memcached |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, by in rows:
        s, m = by.get("shoald"), by.get("memcached 1.6.45")
        if not s or not m:
            continue
        miss = (1 - s["hit"]) / max(1 - m["hit"], 1e-9)
        print(f"| {name} | {s['hit']:.3f} | {m['hit']:.3f} | {miss:.2f}x | {s['rss']:.0f} / {m['rss']:.0f} | "
              f"{s['wa']:.2f} / {m['wa']:.2f} | {s['rate']:.0f} / {m['rate']:.0f} ({s['rate'] / max(m['rate'], 1e-9):.2f}x) |")


def memtier_table(out):
    runs = {}
    set_bytes = {}
    for path in glob.glob(os.path.join(out, "memtier-*.json")):
        _, pattern, srv, pair = os.path.basename(path)[:-5].split("-")
        try:
            a = json.load(open(path))["ALL STATS"]
        except (ValueError, KeyError):
            continue
        lat = a["Gets"]["Percentile Latencies"]
        # Bytes the client set in the timed run: memtier's transmit rate for sets over
        # the run's duration (values, keys and command lines).
        set_bytes[(pattern, srv, pair)] = (
            a["Sets"]["KB/sec TX"] * 1024 * a["Runtime"]["Total duration"] / 1000)
        runs.setdefault((pattern, srv), []).append(
            (a["Totals"]["Ops/sec"], lat["p99.00"],
             a["Gets"]["Hits/sec"] / max(a["Gets"]["Hits/sec"] + a["Gets"]["Misses/sec"], 1e-9),
             lat["p50.00"], lat.get("p99.90", 0.0)))
    if not runs:
        return
    rss = {}
    written = {}
    txt = os.path.join(out, "memtier.txt")
    if os.path.exists(txt):
        for line in open(txt):
            f = line.split()
            kv = dict(x.split("=") for x in f[3:])
            rss.setdefault((f[0], f[1]), []).append(int(kv["rss_kib"]) / 1024)
            sent = set_bytes.get((f[0], f[1], f[2]))
            if sent and "disk_written" in kv:
                written.setdefault((f[0], f[1]), []).append(int(kv["disk_written"]) / sent)
    print()
    print("| keys | server | ops/s (median) | GET p50 / p99 / p99.9 ms (medians) | hit ratio | peak RSS MiB "
          "| disk bytes per byte set |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (pattern, srv), v in sorted(runs.items()):
        ops = statistics.median(x[0] for x in v)
        p99 = statistics.median(x[1] for x in v)
        hit = statistics.median(x[2] for x in v)
        p50 = statistics.median(x[3] for x in v)
        p999 = statistics.median(x[4] for x in v)
        r = statistics.median(rss.get((pattern, srv), [0]))
        w = written.get((pattern, srv))
        wa = f"{statistics.median(w):.3f}" if w else "-"
        keys, _, rate = pattern.partition("@")
        label = {"Z": "Zipf 0.99", "R": "uniform"}.get(keys, keys)
        if rate:
            label += f", {int(rate) * 16:,} req/s"
        print(f"| {label} | {srv} | {ops:,.0f} | {p50:.3f} / {p99:.3f} / {p999:.3f} | {hit:.3f} | {r:.0f} | {wa} |")


if __name__ == "__main__":
    out = sys.argv[1]
    replay_table(out)
    memtier_table(out)

#!/usr/bin/env python3
"""Reference hit ratios for a trace from libCacheSim's simulators.

Reads an oracleGeneral trace (as `shoal-bench hitratio --write-trace` writes it), and for
each cache size runs LRU, S3-FIFO, SIEVE and Belady over it: the first --warmup requests
warm the cache, the rest are counted. Prints a JSON list of
{algorithm, memory_mb, hit_ratio, byte_hit_ratio} on stdout.

Sizes are bytes of key + value (what the trace records per object), so a simulated cache
of 64 MiB holds as many objects as 64 MiB of keys and values, with no per-item overhead:
a real server at -m 64 holds fewer, by its header size. With --item-overhead N, S3-FIFO
runs a second time (reported as `S3FIFO+hdr`) with every object taking N more bytes,
rounded up to 4: the bytes a shoald item of that key and value takes (N = 12, its
header), so that policy and server are compared at the same bytes of memory.

Run it inside the venv that scripts/bench-hitratio.sh makes (PyPI `libcachesim`).
"""
import argparse
import json
import sys

import os
import tempfile

import libcachesim as lcs
import numpy as np

# libCacheSim's oracleGeneral record: timestamp, object id, size, next access (vtime).
ORACLE = np.dtype([("ts", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])

POLICIES = {
    "LRU": lambda size: lcs.LRU(size),
    "S3FIFO": lambda size: lcs.S3FIFO(size),
    "Sieve": lambda size: lcs.Sieve(size),
    "Belady": lambda size: lcs.Belady(size),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="oracleGeneral trace file")
    ap.add_argument("--sizes-mb", required=True, help="comma-separated cache sizes, MiB")
    ap.add_argument("--warmup", type=int, default=0, help="requests before counting")
    ap.add_argument("--policies", default=",".join(POLICIES), help="which policies")
    ap.add_argument(
        "--item-overhead",
        type=int,
        default=0,
        help="also run S3-FIFO with this many bytes more per object (S3FIFO+hdr)",
    )
    a = ap.parse_args()

    runs = [(name, name, a.trace) for name in a.policies.split(",")]
    padded = None
    if a.item_overhead > 0:
        recs = np.fromfile(a.trace, dtype=ORACLE)
        recs["size"] = (recs["size"] + a.item_overhead + 3) & ~np.uint32(3)
        fd, padded = tempfile.mkstemp(suffix=".oracleGeneral")
        os.close(fd)
        recs.tofile(padded)
        del recs
        runs.append(("S3FIFO+hdr", "S3FIFO", padded))
    try:
        return simulate(a, runs)
    finally:
        if padded:
            os.remove(padded)


def simulate(a, runs) -> int:

    out = []
    for mb in (int(s) for s in a.sizes_mb.split(",") if s):
        for name, policy, trace in runs:
            make = POLICIES.get(policy)
            if make is None:
                print(f"unknown policy {policy}", file=sys.stderr)
                return 2
            reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
            cache = make(mb * 1024 * 1024)
            if a.warmup > 0:
                cache.process_trace(reader, 0, a.warmup)
            miss, byte_miss = cache.process_trace(reader, a.warmup, -1)
            out.append(
                {
                    "algorithm": name,
                    "memory_mb": mb,
                    "hit_ratio": 1.0 - miss,
                    "byte_hit_ratio": 1.0 - byte_miss,
                }
            )
            print(f"{name} {mb} MiB: hit ratio {1.0 - miss:.4f}", file=sys.stderr)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

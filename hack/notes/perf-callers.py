#!/usr/bin/env python3
"""Kernel callers of hot leaf symbols in `perf script -F ip,sym` output.

Usage: perf script -i perf.data --time A,B -F ip,sym | perf-callers.py SYM [SYM ...]
Prints, for each SYM, how many samples have it as the leaf and the most
common kernel call chains above it (Go frames dropped).
"""
import collections
import sys

stacks = [s for s in sys.stdin.read().split("\n\n") if s.strip()]
for target in sys.argv[1:]:
    c = collections.Counter()
    for s in stacks:
        fr = [l.split(None, 1)[1].strip() for l in s.strip().splitlines() if len(l.split(None, 1)) == 2]
        if not fr or fr[0] != target:
            continue
        k = [f for f in fr[1:] if "/" not in f and "." not in f.split(".")[0] and not f.startswith("runtime")]
        c[" < ".join(k[:10])] += 1
    print("==", target, sum(c.values()))
    for k, n in c.most_common(5):
        print("  ", n, k)

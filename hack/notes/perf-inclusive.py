#!/usr/bin/env python3
"""Inclusive share of frames in `perf script -F ip,sym` output.

Usage: perf script -i perf.data --time A,B -F ip,sym | perf-inclusive.py FRAME [FRAME ...]
For each FRAME (exact symbol name), the number and share of samples with
it anywhere on the stack.
"""
import sys

stacks = [s for s in sys.stdin.read().split("\n\n") if s.strip()]
frames = [set(l.split(None, 1)[1].strip() for l in s.strip().splitlines() if len(l.split(None, 1)) == 2) for s in stacks]
print(f"{len(frames)} samples")
for f in sys.argv[1:]:
    n = sum(1 for s in frames if f in s)
    print(f"  {n:6d} {100 * n / len(frames):5.1f}%  {f}")

#!/usr/bin/env python3
"""Bucket a system-wide perf profile's self time by data-path component.

Usage: perf-buckets.py PERF_DATA START,END [START,END ...]
Each START,END is a window in the recording's clock (record with
-k CLOCK_REALTIME to use the PHASE lines BenchmarkFabric prints with
hack/notes/fabric-profile-bench.patch applied). Prints, per window, the
share of samples per bucket (self time of the leaf symbol), and the
samples per bucket so that windows with different throughput can be
compared per byte by the caller. PERF_PIDS (a comma list: the bench's
process, whose threads are named "exe" after netlab's re-exec, and the
ksoftirqd threads) keeps only those processes' samples, for a machine
shared with other work.
"""
import collections
import os
import re
import subprocess
import sys

# First match wins; order matters (e.g. udp_tunnel before udp).
BUCKETS = [
    ("wg crypto (chacha20poly1305)", r"chacha20|poly1305"),
    ("wg tun offload (gsoSplit/tcpGRO/checksum)", r"wireguard/tun\.(checksum|pseudoHeader|gsoSplit|tcpGRO|coalesce|handleGRO|handleVirtio|\(\*tcpGROTable)"),
    ("wg-go other (queues, conn batching)", r"wireguard/"),
    ("Go runtime (memmove, sched, gc)", r"^runtime\.|^sync\.|^sync/|aeshash|memeqbody|^internal/|^syscall\.|__vdso"),
    ("Go other (netlab, net, io)", r"^(net|io|os|bufio|github\.com|golang\.org)"),
    ("kernel copy user<->skb", r"_copy_(from|to)_iter|__skb_datagram_iter|copy_user|__check_object_size|skb_copy_datagram"),
    ("kernel checksum", r"csum"),
    ("kernel vxlan/udp tunnel", r"vxlan|udp_tunnel|iptunnel|udp_gro|udp4_gro|udp_gso|__udp_gso|skb_udp_tunnel"),
    ("kernel netfilter/conntrack/nat", r"^nf_|^nft_|nf_nat|nf_conntrack|__nf_|ipt_|^nf"),
    ("kernel veth/bridge", r"veth|^br_|bridge"),
    ("kernel route/forward/neigh", r"fib_|ip_route|ip_forward|rt_dst|dst_|neigh|ip_finish_output|ip_output|ip_rcv|ip_local|ip_sabotage|__ip_|ip_|l3mdev"),
    ("kernel tun", r"^tun_|tun_get_user|tun_put_user|virtio_net_hdr"),
    ("kernel tcp", r"tcp"),
    ("kernel udp socket", r"udp"),
    ("kernel skb/netdev core", r"skb|netif|__dev_|dev_|napi|gro|gso|net_rx|process_backlog|eth_|__netif|rps|qdisc|sch_|kmem|kfree|alloc|slab|page|folio"),
    ("kernel sched/syscall/idle", r"halt|idle|sched|syscall|entry|switch|futex|schedule|irq|softirq|rcu|spin|lock|timer|hrtimer|clock|tsc|epoll|poll|wake"),
]


def bucket(sym):
    for name, rx in BUCKETS:
        if re.search(rx, sym):
            return name
    return "other"


def window(data, w):
    out = subprocess.run(
        ["perf", "report", "-i", data, "--time", w, "--no-children", "--sort", "sym",
         "--stdio", "-g", "none", "--percent-limit", "0", "-F", "sample,sym"]
        + (["--pid", os.environ["PERF_PIDS"]] if os.environ.get("PERF_PIDS") else []),
        capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"\s*(\d+)\s+\[(.)\]\s+(\S.*)$", line)
        if not m:
            continue
        n, _, sym = int(m.group(1)), m.group(2), m.group(3).strip()
        counts[bucket(sym)] += n
    return counts


def main():
    data, wins = sys.argv[1], sys.argv[2:]
    for w in wins:
        c = window(data, w)
        total = sum(c.values())
        print(f"window {w}: {total} samples")
        for name, n in c.most_common():
            print(f"  {n:6d} {100 * n / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()

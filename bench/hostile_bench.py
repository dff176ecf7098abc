#!/usr/bin/env python3
"""Issue 12 measurements, each daemon in a private network namespace (needs root):

  1. memory: settled RSS after a cold N x E sync, the daemon and its libnftables helper
     processes apart (the helper is recycled after a commit over 10 000 operations);
  2. other agents' tables: median commit_ms (the daemon's own `sync done` line) of one-endpoint
     changes at N x E, then the same after build/foreign-tables wrote a table with 10 000 chains
     into the namespace.
Run it for --binary and, with --baseline-binary, for an older build in the same run.

Usage: python3 bench/hostile_bench.py [--services 10000] [--endpoints 10] [--changes 24]
                                      [--baseline-binary OLD/kube-proxy-nft]
"""
import argparse
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import gen_state  # noqa: E402
import run_bench  # noqa: E402

FOREIGN = os.path.join(ROOT, "build", "foreign-tables")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def helper_pids(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except OSError:
                pass
    return out


def changes(d, st, out, n, rng):
    """n one-endpoint changes on probe services; returns the commit_ms of each."""
    res = []
    for i in range(n):
        name = st.probe_names[i % len(st.probe_names)]
        s = st.services[name]
        if i % 2 == 0:
            s["eps"].append(st.ep_ips.take())
        else:
            s["eps"].pop(rng.randrange(len(s["eps"])))
        s["gen"] += 1
        st.write_service(out, name)
        ev = d.next_sync(30)
        res.append(ev["commit_ms"])
    return res


def run(binary, n, e, k, label, tmp):
    rng = random.Random(12)
    st = gen_state.State(n, e, 10)
    out = os.path.join(tmp, label)
    st.write(out)
    ns = run_bench.netns_create()
    d = run_bench.Daemon(binary, out, ns, os.path.join(tmp, label + ".log")).start()
    try:
        cold = d.next_sync(300)
        time.sleep(3)
        d.drain()
        helpers = helper_pids(d.proc.pid)
        r = {"cold_commit_ms": cold["commit_ms"], "ops": cold["ops"],
             "rss_daemon_mib": rss_kib(d.proc.pid) / 1024.0,
             "rss_helpers_mib": sum(rss_kib(p) for p in helpers) / 1024.0, "helpers": len(helpers)}
        r["commit_ms_plain"] = statistics.median(changes(d, st, out, k, rng))
        r["rss_helpers_after_changes_mib"] = sum(rss_kib(p) for p in helper_pids(d.proc.pid)) / 1024.0
        run_bench.sh("ip", "netns", "exec", ns, FOREIGN, "chains", "inet", "cni-chains", "10000")
        r["commit_ms_foreign_10k_chains"] = statistics.median(changes(d, st, out, k, rng))
        return r
    finally:
        d.stop()
        run_bench.netns_delete(ns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    ap.add_argument("--baseline-binary", default=None)
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--changes", type=int, default=24)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kpn-hostile-")
    bins = [("this", a.binary)] + ([("baseline", a.baseline_binary)] if a.baseline_binary else [])
    try:
        for label, b in bins:
            r = run(b, a.services, a.endpoints, a.changes, label, tmp)
            print("%-8s %dx%d: cold commit %.0f ms (%d ops); settled RSS daemon %.1f MiB + helpers %.1f MiB "
                  "(%d running); helper after %d changes %.1f MiB; one-endpoint commit median %.2f ms, "
                  "with 10k foreign chains %.2f ms"
                  % (label, a.services, a.endpoints, r["cold_commit_ms"], r["ops"], r["rss_daemon_mib"],
                     r["rss_helpers_mib"], r["helpers"], a.changes, r["rss_helpers_after_changes_mib"],
                     r["commit_ms_plain"], r["commit_ms_foreign_10k_chains"]), flush=True)
    finally:
        run_bench.cleanup_all()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The daemon's HTTP ports under hostile clients (issue 24), with real sockets in namespaces of
its own (e2e/netlab.py's Lab: a node, an outside client, and an attacker namespace with 100
addresses on its own link).

For each scenario a holder keeps up to 10 000 connections open to an eTP=Local LoadBalancer's
health-check node port and to :10256 (half each), from one source address and then from 100,
reconnecting whatever the daemon closes (at most --rate new connections a second): idle (connect,
send nothing), slow (a request that never ends, a byte every ~2 s) or body (a POST announcing
64 KiB, 60 000 bytes sent). Meanwhile, once the holder has opened 10 000 connections, a load
balancer's prober on another outside address checks the health-check port and the kubelet's
prober asks /livez on 127.0.0.1, --probes times each, every 50 ms, a fresh connection each; every
answer must be 200 within 1 s. The daemon's VmRSS: before (baseline), its peak during, and 5 s
after the holder left; the targets: peak <= baseline + 64 MiB, after <= baseline + 5 MiB.

The daemon runs with its open-files limit as inherited (it raises the soft limit to the hard one;
its connection budget is half of what a 256-descriptor reserve leaves, at most 16384) and, with
--nofile N, under `prlimit --nofile=N` as well (a budget the 100 sources fill).

Usage (root): python3 bench/http_abuse_bench.py [--binary build/kube-proxy-nft]
    [--baseline-binary OLD] [--count 10000] [--sources 100] [--probes 100] [--rate 2000]
    [--nofile 4096] [--modes idle,slow,body] [--out build/bench-http-abuse.json]
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "e2e"))
sys.dont_write_bytecode = True
import http_abuse  # noqa: E402
import netlab  # noqa: E402
from netlab import NODE_NAME, NODE_V4, endpoint_slice, node_object, service  # noqa: E402

HC_PORT, HEALTHZ = 30300, 10256
MiB = 1024


def fd_budget(soft):
    return int(min(max((soft - 256) // 2, 64), 16384))


def start_lab(binary, nofile, n_sources):
    lab = netlab.Lab("http-abuse")
    try:
        client = lab.add_external_client()
        (ep,) = lab.add_backends(1, tcp=[80], udp=[])
        m = lab.manifests
        m.write("node.yaml", node_object())
        m.write("lb.yaml", [
            service("lb", [("p80", 80, "TCP", 80, 30080)], ["10.96.0.80"], type="LoadBalancer", etp="Local",
                    lb_ingress=["198.51.100.80"], health_check_node_port=HC_PORT),
            endpoint_slice("lb", [{"ip": ep.v4, "node": NODE_NAME}], [("p80", 80, "TCP")])])
        d = lab.daemon()
        d.args[0] = binary
        if nofile:
            d.args = ["prlimit", f"--nofile={nofile}:{nofile}", "--"] + d.args
        d.start()
        d.wait_syncs(1)
        sources = http_abuse.add_attacker(lab, n_sources)
        return lab, client, d, sources
    except BaseException:
        lab.close()
        raise


def open_files_limit(d):
    for line in d.stderr().splitlines():
        if "open files limit " in line:
            return int(line.split("open files limit ")[1].split()[0])
    return 0


def scenario(lab, client, d, sources, mode, args):
    targets = [(NODE_V4, HC_PORT), (NODE_V4, HEALTHZ)]
    time.sleep(1)  # settled: memory where it stays between scenarios
    baseline = http_abuse.rss_kib(d.proc.pid)
    holder = http_abuse.Holder(lab, targets, sources, args.count, mode, rate=args.rate)
    peak, held = baseline, 0
    try:
        ramp = time.monotonic()
        status = holder.wait_open(args.count, 60)
        ramp = time.monotonic() - ramp
        hc = http_abuse.Prober(lab, client.ns, (NODE_V4, HC_PORT), "/", args.probes)
        live = http_abuse.Prober(lab, lab.node, ("127.0.0.1", HEALTHZ), "/livez", args.probes)
        while hc.proc.poll() is None or live.proc.poll() is None:
            peak = max(peak, http_abuse.rss_kib(d.proc.pid))
            held = max(held, http_abuse.established(lab.node, (HC_PORT, HEALTHZ), "198.18."))
            time.sleep(0.1)
        hc_r, live_r = hc.result(), live.result()
        status = holder.status()
    finally:
        holder.stop()
    left = time.monotonic()
    while time.monotonic() - left < 5:
        peak = max(peak, http_abuse.rss_kib(d.proc.pid))
        time.sleep(0.1)
    after = http_abuse.rss_kib(d.proc.pid)
    ok = (hc_r["ok"] == hc_r["n"] >= 100 and live_r["ok"] == live_r["n"] >= 100 and
          peak <= baseline + 64 * MiB and after <= baseline + 5 * MiB and d.alive())
    return {"mode": mode, "sources": len(sources), "count": args.count, "holder": status, "ramp_s": round(ramp, 1),
            "held_max": held, "health_check": hc_r, "livez": live_r,
            "rss_kib": {"baseline": baseline, "peak": peak, "after_5s": after}, "pass": ok}


def run(binary, label, nofile, args):
    out = []
    for n_sources in (1, args.sources):
        lab, client, d, sources = start_lab(binary, nofile, args.sources)
        try:
            limit = open_files_limit(d)
            for mode in args.modes.split(","):
                r = scenario(lab, client, d, sources[:n_sources], mode, args)
                r.update(binary=label, open_files=limit, budget=fd_budget(limit))
                out.append(r)
                report(r)
        finally:
            lab.close()
    return out


def report(r):
    hc, lz, m = r["health_check"], r["livez"], r["rss_kib"]
    print(f"{r['binary']:>8} budget {r['budget']:>5}  {r['sources']:>3} src {r['mode']:<4}  "
          f"connects {r['holder'].get('connects', 0):>6} (to {r['count']} in {r['ramp_s']:>4}s) held<= {r['held_max']:>5}  "
          f"HC {hc['ok']:>3}/{hc['n']} max {hc['max_ms']:>6.1f} p99 {hc['p99_ms']:>6.1f} ms  "
          f"livez {lz['ok']:>3}/{lz['n']} max {lz['max_ms']:>6.1f} ms  "
          f"RSS {m['baseline'] / 1024:.1f} -> peak {m['peak'] / 1024:.1f} -> {m['after_5s'] / 1024:.1f} MiB  "
          f"{'PASS' if r['pass'] else 'MISS'}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    ap.add_argument("--baseline-binary")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--sources", type=int, default=100)
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--nofile", type=int, default=4096)
    ap.add_argument("--modes", default="idle,slow,body")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-http-abuse.json"))
    args = ap.parse_args()
    results = []
    print(f"nproc {os.cpu_count()}, kernel {os.uname().release}; {args.count} connections, "
          f"{args.probes} probes each, reconnects <= {args.rate}/s", flush=True)
    binaries = [(args.binary, "this")] + ([(args.baseline_binary, "baseline")] if args.baseline_binary else [])
    for binary, label in binaries:
        for nofile in (0, args.nofile) if args.nofile else (0,):
            results += run(binary, label, nofile, args)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"results: {args.out}")
    return 0 if all(r["pass"] for r in results if r["binary"] == "this") else 1


if __name__ == "__main__":
    sys.exit(main())

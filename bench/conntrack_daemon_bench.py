#!/usr/bin/env python3
"""The UDP conntrack cleanup inside the real daemon: 10k UDP services x 3 endpoints (the state
build/conntrack-bench uses: ClusterIPs from 10.96.0.10, endpoints from 10.244.0.10, port 53 ->
5353), in a private network namespace, with an empty conntrack table and with 100k UDP entries
(10k stale) + 50k TCP entries made by `conntrack-bench --fill-only 1`. Reports the first
reconcile pass (its log line), one endpoint removal's sync and pass, and the daemon's VmRSS /
VmHWM in both cases: the difference is what the reconciler costs in memory.

Usage (root): python3 bench/conntrack_daemon_bench.py [--binary build/kube-proxy-nft]
"""
import argparse
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICES, ENDPOINTS = 10000, 3
LINE = re.compile(r"conntrack reconcile family=IPv4 flows=(\d+) stale=(\d+) deleted=(\d+) ms=(\S+)")
SYNC = re.compile(r"sync done full=(\d+) ops=(\d+) render_ms=(\S+) diff_ms=(\S+) commit_ms=(\S+)")


def ip(base, i):
    return str(ipaddress.IPv4Address(base) + i)


def slice_obj(s, eps):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"dns{s}-1", "namespace": "bench", "uid": f"slice-{s}",
                         "labels": {"kubernetes.io/service-name": f"dns{s}"}},
            "ports": [{"name": "dns", "port": 5353, "protocol": "UDP"}],
            "endpoints": [{"addresses": [ip("10.244.0.10", s * ENDPOINTS + e)],
                           "conditions": {"ready": True, "serving": True, "terminating": False}}
                          for e in eps]}


def write_state(d):
    items = []
    for s in range(SERVICES):
        items.append({"apiVersion": "v1", "kind": "Service",
                      "metadata": {"name": f"dns{s}", "namespace": "bench", "uid": f"svc-{s}",
                                   "creationTimestamp": "2024-05-01T10:00:00Z"},
                      "spec": {"type": "ClusterIP", "clusterIP": ip("10.96.0.10", s),
                               "clusterIPs": [ip("10.96.0.10", s)],
                               "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}})
        if s:  # dns0's slice lives in its own file: the change rewrites only it
            items.append(slice_obj(s, range(ENDPOINTS)))
    with open(os.path.join(d, "bulk.json"), "w") as f:
        json.dump({"kind": "List", "apiVersion": "v1", "items": items}, f)
    with open(os.path.join(d, "probe.json"), "w") as f:
        json.dump(slice_obj(0, range(ENDPOINTS)), f)


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def run(binary, fill):
    ns = f"kpn-ctbench-{os.getpid()}"
    tmp = tempfile.mkdtemp(prefix="kpn-ctbench-")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    proc = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        manifests = os.path.join(tmp, "m")
        os.mkdir(manifests)
        write_state(manifests)
        filled = None
        if fill:
            out = subprocess.run(["ip", "netns", "exec", ns, os.path.join(ROOT, "build", "conntrack-bench"),
                                  "--services", str(SERVICES), "--entries", "100000", "--stale", "10000",
                                  "--tcp", "50000", "--fill-only", "1"], capture_output=True, text=True, check=True)
            filled = json.loads(out.stdout)
        log = open(os.path.join(tmp, "daemon.log"), "w")
        proc = subprocess.Popen(["ip", "netns", "exec", ns, binary, "--manifests=" + manifests,
                                 "--hostname-override=bench-node", "--cluster-cidr=10.244.0.0/16",
                                 "--min-sync-period=0s", "--v=2", "--logtostderr"],
                                stdout=log, stderr=subprocess.STDOUT)
        text = lambda: open(log.name).read()
        wait_for(lambda: SYNC.search(text()), 300, "the first sync")
        first = wait_for(lambda: LINE.search(text()), 300, "the first conntrack pass")
        time.sleep(1)
        # The daemon's pid: the child of `ip netns exec` (it execs, so the same pid).
        mem_first = status(proc.pid)
        passes = len(LINE.findall(text()))
        syncs = len(SYNC.findall(text()))
        t0 = time.monotonic()
        with open(os.path.join(manifests, ".probe.tmp"), "w") as f:
            json.dump(slice_obj(0, range(ENDPOINTS - 1)), f)  # dns0 loses its last endpoint
        os.rename(os.path.join(manifests, ".probe.tmp"), os.path.join(manifests, "probe.json"))
        wait_for(lambda: len(SYNC.findall(text())) > syncs, 60, "the change's sync")
        sync_line = SYNC.findall(text())[syncs]
        after = wait_for(lambda: LINE.findall(text())[passes:] or None, 120, "the change's pass")[0]
        change_s = time.monotonic() - t0
        mem_after = status(proc.pid)
        return {"conntrack_filled": filled, "first_pass": dict(zip(("flows", "stale", "deleted", "ms"), first.groups())),
                "memory_after_first_pass_kb": mem_first, "change_sync": sync_line,
                "change_pass": dict(zip(("flows", "stale", "deleted", "ms"), after)),
                "change_to_pass_logged_s": round(change_s, 2), "memory_after_change_kb": mem_after}
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    a = ap.parse_args()
    for fill in (True, False):
        print(json.dumps({"with_100k_entries": fill, **run(a.binary, fill)}), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Least connection at scale (issue 26): the daemon on 10k services x 10 endpoints of which 10 %
(every 10th, and the probes) carry `kube-proxy-nft.io/scheduler: lc`, under a steady load of real
TCP connections to those services.

Three namespaces: the node (the daemon), a client and a backend behind it. The backend routes the
whole endpoint range to itself (`ip route add local 10.244.0.0/15 dev lo`), so every endpoint
address answers (lc_load.py serve: it names the address it was reached at). Reports:
  - idle: the daemon's CPU with no connections;
  - steady RATE/s for each --rates: connections (connect, answer, close) spread over the lc
    services; the daemon's CPU (its process and its nft helper) against idle, as cores and as
    core-ms per second per 1 000 new connections/s; choices committed; the decision-to-kernel
    latency (kubeproxy_nftables_least_connection_choice_latency_seconds, from the choice made on
    the counts to its commit: mean and interpolated quantiles of the histogram);
  - the same load to services without the annotation (the kernel's event filter: the daemon
    should not see them);
  - RSS before and after;
  - bursts: 100 connections opened at once to an lc service and to a random one (how even the
    first moment is), and the herd: 50 held connections spread by lc over 10 endpoints, an 11th
    endpoint added, then 20 at once (IPVS, deciding per connection, would give the newcomer 6).

Usage (root): python3 bench/lc_bench.py [--binary build/kube-proxy-nft] [--services 10000]
              [--rates 20,100,250,500] [--seconds 10] [--out build/lc-bench.json]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gen_state  # noqa: E402
from conntrack_daemon_bench import wait_for as wait  # noqa: E402

LOAD = os.path.join(ROOT, "bench", "lc_load.py")
PY = "/usr/bin/python3"
LATENCY = "kubeproxy_nftables_least_connection_choice_latency_seconds"
CHOICES = "kubeproxy_nftables_least_connection_choices_total"
SYNCS = "kubeproxy_sync_proxy_rules_duration_seconds_count"


def run(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw)


class Lab:
    """The node, client and backend namespaces, and every process started in them."""

    def __init__(self):
        tag = os.getpid()
        self.node, self.client, self.backend = (f"kpn-lcb-{w}-{tag}" for w in ("n", "c", "b"))
        self.procs = []

    def up(self):
        for ns in (self.node, self.client, self.backend):
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        for ns, here, there, net in ((self.client, "c0", "n0", "10.200.0"), (self.backend, "b0", "n1", "10.201.0")):
            run("ip", "link", "add", here, "netns", ns, "type", "veth", "peer", "name", there, "netns", self.node)
            run("ip", "-n", ns, "addr", "add", f"{net}.2/24", "dev", here)
            run("ip", "-n", self.node, "addr", "add", f"{net}.1/24", "dev", there)
            run("ip", "-n", ns, "link", "set", here, "up")
            run("ip", "-n", self.node, "link", "set", there, "up")
            run("ip", "-n", ns, "route", "add", "default", "via", f"{net}.1")
        run("ip", "-n", self.node, "addr", "add", gen_state.NODE_IP + "/32", "dev", "lo")
        run("ip", "-n", self.node, "route", "add", "10.244.0.0/15", "via", "10.201.0.2")
        run("ip", "-n", self.backend, "route", "add", "local", "10.244.0.0/15", "dev", "lo")
        run("ip", "netns", "exec", self.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def start(self, ns, *cmd, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], **kw)
        self.procs.append(p)
        return p

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in (self.node, self.client, self.backend):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def metrics(self):
        body = subprocess.run(["ip", "netns", "exec", self.node, "curl", "-s", "http://127.0.0.1:10249/metrics"],
                              capture_output=True, text=True).stdout  # empty until the server is up
        out = {}
        for line in body.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
            if m:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        # Syncs of every family (the series carry ip_family).
        out[SYNCS] = sum(v for k, v in out.items() if k.startswith(SYNCS + "{") or k == SYNCS)
        return out


def tree_cpu(pid):
    """CPU seconds (user + system) of a process and all its descendants (the nft helper)."""
    hz = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / hz
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total


def kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def histogram(m, name):
    """Cumulative buckets {le: count}, sum and count of an unlabelled histogram."""
    buckets = {}
    for k, v in m.items():
        g = re.match(re.escape(name) + r'_bucket\{le="([^"]+)"\}', k)
        if g:
            buckets[float(g.group(1))] = v
    return buckets, m.get(name + "_sum", 0.0), m.get(name + "_count", 0.0)


def quantile(q, before, after):
    """histogram_quantile over the buckets' increase between two scrapes (linear in a bucket)."""
    b0, a = before[0], after[0]
    les = sorted(a)
    inc = [a[le] - b0.get(le, 0.0) for le in les]
    total = inc[-1] if inc else 0
    if total <= 0:
        return None
    rank, prev_le, prev_n = q * total, 0.0, 0.0
    for le, n in zip(les, inc):
        if n >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_n) / max(n - prev_n, 1e-9))
        prev_le, prev_n = le, n
    return les[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--rates", default="20,100,250,500")  # the Python load tops out near 500/s here
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "lc-bench.json"))
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="kpn-lcbench-")
    manifests = os.path.join(tmp, "manifests")
    st = gen_state.State(args.services, args.endpoints, 30, share=gen_state.share_of(0.1, scheduler="lc"))
    st.write(manifests)
    every = st.share["every"]
    lc_names = [n for n, s in st.services.items() if n in st.probe_names_set or s["uid"] % every == 0]
    plain_names = [n for n in st.bulk_names if st.services[n]["uid"] % every][: len(lc_names)]
    lc_vips = [st.services[n]["ip"] for n in lc_names if n not in st.probe_names_set]
    plain_vips = [st.services[n]["ip"] for n in plain_names]
    result = {"services": args.services, "endpoints": args.endpoints, "lc_services": len(lc_names),
              "nproc": os.cpu_count(), "kernel": os.uname().release}
    print(f"{args.services} x {args.endpoints}, {len(lc_names)} lc services; nproc {os.cpu_count()}", flush=True)

    lab = Lab()
    try:
        lab.up()
        server = lab.start(lab.backend, PY, LOAD, "serve", "8080", stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        log = open(os.path.join(tmp, "daemon.log"), "w")
        daemon = lab.start(lab.node, args.binary, f"--manifests={manifests}",
                           f"--hostname-override={gen_state.NODE_NAME}", "--cluster-cidr=10.244.0.0/16",
                           "--min-sync-period=0s", "--logtostderr", stdout=log, stderr=subprocess.STDOUT)
        dpid = daemon.pid  # `ip netns exec` execs the binary
        t0 = time.monotonic()
        wait(lambda: lab.metrics().get(SYNCS, 0) >= 1, 120, "the first sync")
        result["first_sync_s"] = round(time.monotonic() - t0, 1)
        time.sleep(3)
        result["rss_before_kib"] = kib(dpid)

        def window(seconds, load=None):
            m0, c0, w0 = lab.metrics(), tree_cpu(dpid), time.monotonic()
            got = None
            if load:
                out = run("ip", "netns", "exec", lab.client, PY, LOAD, "steady", *load).stdout
                got = json.loads(out)
            else:
                time.sleep(seconds)
            time.sleep(1)  # the last events and commits
            m1, c1, w1 = lab.metrics(), tree_cpu(dpid), time.monotonic()
            h0, h1 = histogram(m0, LATENCY), histogram(m1, LATENCY)
            n = h1[2] - h0[2]
            return {"load": got, "wall_s": round(w1 - w0, 2), "cpu_s": round(c1 - c0, 3),
                    "cores": round((c1 - c0) / (w1 - w0), 4),
                    "choices": int(m1.get(CHOICES, 0) - m0.get(CHOICES, 0)), "commits": int(n),
                    "latency_ms": {"mean": round((h1[1] - h0[1]) / n * 1000, 2) if n else None,
                                   **{f"p{int(q * 100)}": (round(quantile(q, h0, h1) * 1000, 2) if n else None)
                                      for q in (0.5, 0.9, 0.99)}}}

        idle = window(args.seconds)
        result["idle"] = idle
        print(f"idle: {idle['cores']} cores", flush=True)
        result["steady"] = []
        rates = [float(r) for r in args.rates.split(",")]
        # The services without the annotation first: the lc connections' entries linger (TIME_WAIT,
        # 120 s) and their ends are events the daemon counts.
        for label, rate in [("plain", max(rates))] + [("lc", r) for r in rates]:
            vips = lc_vips if label == "lc" else plain_vips
            w = window(args.seconds, [str(rate), str(args.seconds), *vips])
            opened = w["load"]["answered"] / w["load"]["seconds"]
            w["services"], w["rate"], w["achieved_per_s"] = label, rate, round(opened, 1)
            w["extra_cores"] = round(w["cores"] - idle["cores"], 4)
            w["cpu_ms_per_1000_connections"] = round(w["extra_cores"] * 1000 / (opened / 1000), 1) if opened else None
            result["steady"].append(w)
            print(f"{label} {rate}/s: achieved {opened:.0f}/s failed {w['load']['failed']}, daemon "
                  f"{w['cores']} cores ({w['cpu_ms_per_1000_connections']} CPU ms per 1000 connections), "
                  f"{w['commits']} commits, {w['choices']} choices, latency {w['latency_ms']}", flush=True)
        result["rss_after_kib"] = kib(dpid)
        result["hwm_kib"] = kib(dpid, "VmHWM")

        # Bursts (their own services: the probes, each in a file of its own).
        def herd(vip, hold, pause_ms, burst, between=None):
            p = lab.start(lab.client, PY, LOAD, "herd", vip, str(hold), str(pause_ms), str(burst),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            held = json.loads(p.stdout.readline())
            if between:
                between()
            p.stdin.write("go\n")
            p.stdin.flush()
            burst_out = json.loads(p.stdout.readline())
            p.stdin.close()
            p.wait(10)
            return {"held": held, "burst": burst_out}

        probes = st.probe_names
        result["burst_lc"] = herd(st.services[probes[0]]["ip"], 0, 0, 100)
        result["burst_random"] = herd(st.services[plain_names[0]]["ip"], 0, 0, 100)

        def add_endpoint():
            name = probes[1]
            n = lab.metrics().get(SYNCS, 0)
            new = st.ep_ips.take()
            st.services[name]["eps"].append(new)
            st.services[name]["gen"] += 1
            st.write_service(manifests, name)
            wait(lambda: lab.metrics().get(SYNCS, 0) > n, 30, "the new endpoint's sync")
            time.sleep(0.5)  # its first choice (the newcomer alone) lands
            result["herd_newcomer"] = new

        result["herd"] = herd(st.services[probes[1]]["ip"], 50, 30, 20, add_endpoint)
        print("burst of 100, lc:", result["burst_lc"]["burst"], flush=True)
        print("burst of 100, random:", result["burst_random"]["burst"], flush=True)
        print("herd: held", result["herd"]["held"], "then 20 at once:", result["herd"]["burst"],
              "newcomer", result["herd_newcomer"], flush=True)
        print(f"RSS {result['rss_before_kib'] // 1024} MiB before, {result['rss_after_kib'] // 1024} MiB after "
              f"(peak {result['hwm_kib'] // 1024} MiB)", flush=True)
    finally:
        lab.down()
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        shutil.copy(os.path.join(tmp, "daemon.log"), os.path.join(os.path.dirname(args.out), "lc-bench-daemon.log")) \
            if os.path.exists(os.path.join(tmp, "daemon.log")) else None
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The data path: new TCP connections and new UDP flows per second through a ClusterIP (issue 27).

Three node namespaces, each with a client namespace and a server namespace of its own (veth pairs):
  ours      the daemon on a big state (default 10k services x 10 endpoints) from a manifest folder;
  upstream  upstream kube-proxy's nftables layout for the same state (bench/gen_upstream.py), loaded
            with `nft -f` (in chunks of services: one transaction of 10k services takes minutes in the
            kernel, scale-floor.md section 1; the rules are the same either way);
  small     the daemon on a table of the measured services alone (one per protocol and endpoint
            count: 6 services), the "1-service table" the big one must match (flat in cluster size);
  baseline  with --baseline-binary, that (older) daemon on the big state, a fourth table in the same
            rounds: a layout change measured against the one before it, same run.
In every state six services are measured: TCP and UDP with 1, 4 and 16 endpoints (port 80 -> 8080);
their endpoint addresses live in the server namespace. The client namespace's addresses are in the
cluster CIDR, so nothing is masqueraded (same in both layouts) and the NAT port space never runs out.

The client (bench/datapath_load.c, compiled here with cc -O2) is pinned to CPU 0 and the servers to
CPU 1 (taskset); each sample is SECONDS of connect/close (TCP, RST on close) or one datagram from a
fresh socket (UDP: the first packet of a new flow walks the NAT rules in the sender's softirq on
CPU 0; the reply is not awaited, so cross-CPU wake-ups stay out of it; a short echo run checks
first that each table delivers), every attempt from a fresh (address, port) so that each one is a new conntrack
entry walking the NAT rules. Before each sample every lab's conntrack table is flushed: a sample
starts from the same empty table whichever tables ran before it. Rounds are interleaved: in each round every (protocol, count) is
measured on the three tables in a rotating order. Reported: medians over the rounds, and the median
of the per-round ratios ours/upstream and ours/small (same round, same seconds of machine noise).

Usable as a module (run_bench.py runs it as a phase) or by hand, as root:
  python3 bench/datapath_bench.py [--binary build/kube-proxy-nft] [--services 10000] [--rounds 15]
                                  [--baseline-binary OLD/kube-proxy-nft]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import gen_state  # noqa: E402
import gen_upstream  # noqa: E402

COUNTS = (1, 4, 16)
PROTOS = ("tcp", "udp")
CLIENT_PREFIX, CLIENT_FIRST, CLIENT_HOSTS = "10.244.250", 1, 16  # in --cluster-cidr: no masquerade
CLIENT_GW = "10.244.250.254"
SERVER_IP = "192.168.77.20"  # the node side of the server link holds gen_state.NODE_IP


def measured_name(proto, count):
    return "dp-%s-%02d" % (proto, count)


def add_measured(st):
    """Adds the six measured services (fresh ClusterIPs and endpoint addresses) to a State."""
    for proto in PROTOS:
        for count in COUNTS:
            name = st.new_service(measured_name(proto, count), count)
            st.services[name]["proto"] = proto.upper()
            st.probe_names.append(name)


def build_load(out_dir):
    """Compiles the load generator; returns its path."""
    src = os.path.join(HERE, "datapath_load.c")
    exe = os.path.join(out_dir, "datapath-load")
    subprocess.run(["cc", "-O2", "-Wall", "-o", exe, src], check=True)
    return exe


class Lab:
    """One node namespace with its client and server namespaces. `sh` runs a command (the run_bench
    helper); created namespaces are registered with `own_ns` so the caller's cleanup deletes them."""

    def __init__(self, tag, sh, own_ns):
        self.sh = sh
        pid = os.getpid()
        self.node, self.client, self.server = ("kpndp-%s-%s-%d" % (tag, r, pid) for r in ("n", "c", "s"))
        for ns in (self.node, self.client, self.server):
            sh("ip", "netns", "add", ns)
            own_ns(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        # client <-> node
        sh("ip", "-n", self.node, "link", "add", "toc", "type", "veth", "peer", "name", "c0", "netns", self.client)
        for h in range(CLIENT_FIRST, CLIENT_FIRST + CLIENT_HOSTS):
            sh("ip", "-n", self.client, "addr", "add", "%s.%d/24" % (CLIENT_PREFIX, h), "dev", "c0")
        sh("ip", "-n", self.node, "addr", "add", CLIENT_GW + "/24", "dev", "toc")
        # node <-> server (the node's own address, as the generated Node object says)
        sh("ip", "-n", self.node, "link", "add", "tos", "type", "veth", "peer", "name", "s0", "netns", self.server)
        sh("ip", "-n", self.node, "addr", "add", gen_state.NODE_IP + "/24", "dev", "tos")
        sh("ip", "-n", self.server, "addr", "add", SERVER_IP + "/24", "dev", "s0")
        for ns, dev in ((self.node, "toc"), (self.node, "tos"), (self.client, "c0"), (self.server, "s0")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", self.client, "route", "add", "default", "via", CLIENT_GW)
        sh("ip", "-n", self.server, "route", "add", "default", "via", gen_state.NODE_IP)
        for ns in (self.node, self.client, self.server):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0",
               "net.ipv4.conf.default.rp_filter=0")
        sh("ip", "netns", "exec", self.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def serve(self, st, names, load, start):
        """The measured services' endpoint addresses on the server side, routes to them on the
        node, and a TCP and a UDP server pinned to CPU 1."""
        for name in names:
            for ep in st.services[name]["eps"]:
                self.sh("ip", "-n", self.server, "addr", "add", ep + "/32", "dev", "s0")
                self.sh("ip", "-n", self.node, "route", "add", ep + "/32", "via", SERVER_IP)
        for proto in PROTOS:
            start(["ip", "netns", "exec", self.server, "taskset", "-c", "1", load, "server", proto,
                   str(gen_state.EP_PORT)])

    def flush_conntrack(self):
        """Empties the node namespace's conntrack table (its entries, not the other labs')."""
        self.sh("ip", "netns", "exec", self.node, "conntrack", "-F")  # a failed flush fails the phase

    def run_client(self, load, proto, ip, seconds):
        out = self.sh("ip", "netns", "exec", self.client, "taskset", "-c", "0", load, "client", proto, ip,
                      str(gen_state.SVC_PORT), "%g" % seconds, CLIENT_PREFIX, str(CLIENT_FIRST),
                      str(CLIENT_HOSTS), timeout=seconds + 30).stdout
        f = dict(kv.split("=") for kv in out.split())
        return {"ok": int(f["ok"]), "failed": int(f["failed"]), "seconds": float(f["seconds"]),
                "rate": int(f["ok"]) / float(f["seconds"])}


def load_upstream(lab, st, sh, tmp, per_chunk):
    """Upstream's layout for the state, in transactions of `per_chunk` services; returns seconds."""
    t = time.monotonic()
    for i, text in enumerate(gen_upstream.generate_chunks(st, per_chunk)):
        path = os.path.join(tmp, "upstream-%03d.nft" % i)
        with open(path, "w") as f:
            f.write(text)
        sh("ip", "netns", "exec", lab.node, "nft", "-f", path, timeout=600)
        os.unlink(path)
    return time.monotonic() - t


def median(xs):
    return statistics.median(xs) if xs else None


def run(binary, services, endpoints, rounds, seconds, say, sh, own_ns, start_proc, start_daemon,
        per_chunk=500, start_baseline=None):
    """The whole measurement; returns the results dict. `start_proc(argv)` starts and owns a helper
    process, `start_daemon(manifests_dir, netns, tag)` the daemon until its first sync;
    `start_baseline` the same for an older binary (the big state again, as the "baseline" table)."""
    tmp = tempfile.mkdtemp(prefix="kpndp-")
    try:
        load = build_load(tmp)
        big = gen_state.State(services - len(PROTOS) * len(COUNTS), endpoints, 0)
        add_measured(big)
        small = gen_state.State(0, endpoints, 0)
        add_measured(small)
        names = [measured_name(p, c) for p in PROTOS for c in COUNTS]
        labs = {}
        t = time.monotonic()
        for tag, st in (("ours", big), ("small", small)):
            d = os.path.join(tmp, tag)
            st.write(d)
            lab = Lab(tag, sh, own_ns)
            lab.serve(st, names, load, start_proc)
            start_daemon(d, lab.node, "datapath-" + tag)
            labs[tag] = (lab, st)
        if start_baseline:
            lab = Lab("baseline", sh, own_ns)
            lab.serve(big, names, load, start_proc)
            start_baseline(os.path.join(tmp, "ours"), lab.node, "datapath-baseline")
            labs["baseline"] = (lab, big)
        lab = Lab("upstream", sh, own_ns)
        lab.serve(big, names, load, start_proc)
        up_s = load_upstream(lab, big, sh, tmp, per_chunk)
        labs["upstream"] = (lab, big)
        say("  data path: tables ready in %.0f s (upstream's layout: %.0f s in transactions of %d services)"
            % (time.monotonic() - t, up_s, per_chunk))
        # Every table answers every measured service before anything is timed.
        for tag, (lab, st) in labs.items():
            for proto in PROTOS:
                for c in COUNTS:
                    r = lab.run_client(load, "udpecho" if proto == "udp" else proto,
                                       st.services[measured_name(proto, c)]["ip"], 0.3)
                    if r["ok"] == 0 or r["failed"] > r["ok"] // 100:
                        raise RuntimeError("data path %s %s x%d: %s" % (tag, proto, c, r))
        tags = ["ours", "upstream", "small"] + (["baseline"] if start_baseline else [])
        samples = {tag: {p: {c: [] for c in COUNTS} for p in PROTOS} for tag in tags}
        for r in range(rounds):
            for proto in PROTOS:
                for c in COUNTS:
                    for tag in tags[r % len(tags):] + tags[:r % len(tags)]:
                        # Every lab's conntrack table empty before each sample. The entries of a sample
                        # outlive it (UDP 30 s, TCP's closed ones 10 s) and three samples filled a
                        # namespace's table to nf_conntrack_max (262 144 here): every later new flow
                        # paid an early drop, and all labs' entries share the kernel's one hash table,
                        # so a sample's cost depended on which tables ran in the 30 s before it.
                        for other, _ in labs.values():
                            other.flush_conntrack()
                        lab, st = labs[tag]
                        samples[tag][proto][c].append(
                            lab.run_client(load, proto, st.services[measured_name(proto, c)]["ip"], seconds))
            say("  data path round %d/%d: %s" % (r + 1, rounds, "  ".join(
                "%s/%d %s" % (p, c, "/".join("%.0f" % samples[tag][p][c][-1]["rate"] for tag in tags))
                for p in PROTOS for c in COUNTS)))
        res = {"services": services, "endpoints_per_service": endpoints, "rounds": rounds,
               "seconds": seconds, "upstream_load_s": up_s, "samples": samples, "summary": {}}
        for p in PROTOS:
            for c in COUNTS:
                rate = {tag: [s["rate"] for s in samples[tag][p][c]] for tag in tags}
                res["summary"]["%s/%d" % (p, c)] = {
                    "median_rate": {tag: median(rate[tag]) for tag in tags},
                    "failed": {tag: sum(s["failed"] for s in samples[tag][p][c]) for tag in tags},
                    "ours_over_upstream": median([a / b for a, b in zip(rate["ours"], rate["upstream"])]),
                    "ours_over_small": median([a / b for a, b in zip(rate["ours"], rate["small"])]),
                    "upstream_over_small": median([a / b for a, b in zip(rate["upstream"], rate["small"])]),
                }
                if start_baseline:
                    res["summary"]["%s/%d" % (p, c)].update({
                        "ours_over_baseline": median([a / b for a, b in zip(rate["ours"], rate["baseline"])]),
                        "baseline_over_upstream": median([a / b for a, b in zip(rate["baseline"], rate["upstream"])]),
                    })
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(res, say, table):
    if not res:
        return
    say("")
    say("== Data path at %d x %d: new connections (TCP) / flows (UDP) per second through a ClusterIP =="
        % (res["services"], res["endpoints_per_service"]))
    say("   client on CPU 0, servers on CPU 1, %d interleaved rounds of %g s; medians; ratios are the"
        % (res["rounds"], res["seconds"]))
    say("   median of the per-round ratios. small = our table of the 6 measured services alone")
    rows = []
    baseline = any("ours_over_baseline" in s for s in res["summary"].values())
    for key, s in res["summary"].items():
        m = s["median_rate"]
        row = [key, "%.0f" % m["ours"], "%.0f" % m["upstream"], "%.0f" % m["small"],
               "%.3f" % s["ours_over_upstream"], "%.3f" % s["ours_over_small"],
               "%.3f" % s["upstream_over_small"],
               "%d/%d/%d" % (s["failed"]["ours"], s["failed"]["upstream"], s["failed"]["small"])]
        if baseline:
            row += ["%.0f" % m["baseline"], "%.3f" % s["ours_over_baseline"], "%.3f" % s["baseline_over_upstream"],
                    "%d" % s["failed"]["baseline"]]
        rows.append(row)
    head = ["proto/endpoints", "ours /s", "upstream /s", "small /s", "ours/upstream", "ours/small",
            "upstream/small", "failed o/u/s"]
    if baseline:
        say("   baseline = --baseline-binary on the same big state, in the same rounds")
        head += ["baseline /s", "ours/baseline", "baseline/upstream", "failed b"]
    say(table(head, rows))


def main():
    import run_bench as rb  # the driver's process and namespace bookkeeping
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-datapath.json"))
    ap.add_argument("--baseline-binary", default=None,
                    help="an older build, measured on the big state as a fourth table in the same rounds")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("datapath_bench.py needs root (ip netns)")
    res = None
    try:
        res = run(os.path.abspath(a.binary), a.services, a.endpoints, a.rounds, a.seconds, rb.say, rb.sh,
                  rb._OWNED_NETNS.add, rb.start_owned, rb.daemon_until_synced(os.path.abspath(a.binary)),
                  start_baseline=rb.daemon_until_synced(os.path.abspath(a.baseline_binary)) if a.baseline_binary else None)
    finally:
        rb.cleanup_all()
    report(res, rb.say, rb.table)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()

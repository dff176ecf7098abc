#!/usr/bin/env python3
"""What diagnosis costs on a big node: the daemon on 10k services x 10 endpoints (gen_state.py),
in a private network namespace, asked over its status socket. Reports the wall time of
`kube-proxy-nft status`, of `trace --service=NS/NAME` (one Service: the daemon sends it, the trace
lists the table and renders that Service), of `trace --dst=IP:PORT` (the daemon looks for the
address among all its Services) against the same trace without asking the daemon (the table
alone, as before issue 28), and one change's sync (render + diff + commit, the daemon's log line)
while status is asked every 100 ms against one without, in turns.

Usage (root): python3 bench/diag_bench.py [--binary build/kube-proxy-nft] [--services 10000]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gen_state  # noqa: E402

SYNC = re.compile(r"sync done full=(\d+) ops=(\d+) render_ms=(\S+) diff_ms=(\S+) commit_ms=(\S+)")


def timed(cmd, n):
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        out.append(time.monotonic() - t0)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
    return {"median_ms": round(statistics.median(out) * 1000, 1), "max_ms": round(max(out) * 1000, 1), "n": n}


def change_sync_ms(st, manifests, text, name):
    """One endpoint swapped in a probe service: the sync's own time (render+diff+commit)."""
    before = len(SYNC.findall(text()))
    st.services[name]["eps"][0] = st.ep_ips.take()
    st.services[name]["gen"] += 1
    st.write_service(manifests, name)
    deadline = time.monotonic() + 60
    while len(SYNC.findall(text())) <= before:
        if time.monotonic() > deadline:
            raise SystemExit("no sync for the change")
        time.sleep(0.01)
    m = SYNC.findall(text())[before]
    return sum(float(x) for x in m[2:])


def run(binary, services):
    ns = f"kpn-diagbench-{os.getpid()}"
    tmp = tempfile.mkdtemp(prefix="kpn-diagbench-")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    proc = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"], check=True)
        subprocess.run(["ip", "-n", ns, "addr", "add", gen_state.NODE_IP + "/24", "dev", "eth0"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
        manifests = os.path.join(tmp, "m")
        st = gen_state.State(services, 10, 30)
        st.write(manifests)
        log = open(os.path.join(tmp, "daemon.log"), "w")
        sock = "@kpn-diagbench"
        proc = subprocess.Popen(["ip", "netns", "exec", ns, binary, "--manifests=" + manifests,
                                 "--hostname-override=" + gen_state.NODE_NAME, "--cluster-cidr=10.244.0.0/15",
                                 "--min-sync-period=0s", "--v=2", "--logtostderr", "--status-socket=" + sock,
                                 "--healthz-bind-address=", "--metrics-bind-address="],
                                stdout=log, stderr=subprocess.STDOUT)
        text = lambda: open(log.name).read()
        deadline = time.monotonic() + 300
        while not SYNC.search(text()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("no first sync:\n" + text()[-3000:])
            time.sleep(0.2)
        time.sleep(2)
        pre = ["ip", "netns", "exec", ns, binary]
        name = st.bulk_names[len(st.bulk_names) // 2]
        ip = st.services[name]["ip"]
        result = {"services": services, "endpoints_each": 10,
                  "status": timed(pre + ["status", "--status-socket=" + sock], 10),
                  "trace_service": timed(pre + ["trace", f"--service={gen_state.NAMESPACE}/{name}",
                                                "--status-socket=" + sock], 5),
                  "trace_address": timed(pre + ["trace", "--from=node", f"--src={gen_state.NODE_IP}",
                                                f"--dst={ip}:80", "--proto=tcp", "--status-socket=" + sock], 5)}
        # The table alone (no daemon asked): what trace cost before it asked the daemon.
        result["trace_address_table_only"] = timed(pre + ["trace", "--from=node", f"--src={gen_state.NODE_IP}",
                                                          f"--dst={ip}:80", "--proto=tcp", "--status-socket="], 5)
        # One change's sync, alone and while status is asked every 100 ms, in turns.
        quiet, busy = [], []
        for i in range(10):
            stop = threading.Event()

            def poll():
                while not stop.is_set():
                    subprocess.run(pre + ["status", "--output=json", "--status-socket=" + sock], capture_output=True)
                    stop.wait(0.1)

            t = threading.Thread(target=poll) if i % 2 else None
            if t:
                t.start()
                time.sleep(0.3)
            try:
                (busy if t else quiet).append(change_sync_ms(st, manifests, text, st.probe_names[i]))
            finally:
                stop.set()
                if t:
                    t.join()
        result["change_sync_ms_median"] = {"quiet": round(statistics.median(quiet), 2),
                                           "status_every_100ms": round(statistics.median(busy), 2), "n": 5}
        return result
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "kube-proxy-nft"))
    ap.add_argument("--services", type=int, default=10000)
    a = ap.parse_args()
    print(json.dumps(run(a.binary, a.services), indent=1), flush=True)


if __name__ == "__main__":
    main()

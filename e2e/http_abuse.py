"""Hostile clients of the daemon's HTTP ports, and the probes that must get through them (issue 24):
shared by e2e/test_76_health_under_abuse.py (1 000 connections, pass/fail) and
bench/http_abuse_bench.py (10 000, figures for docs/reliability.md).

As a script, run inside a namespace:
  http_abuse.py hold  JSON   keep up to `count` connections open to `targets`, from `sources` in
                             turn, reconnecting whatever the server closes (at most `rate` new
                             connections a second); `mode`: idle (connect, send nothing), slow (a
                             request line, then one header byte every ~2 s: never ends), body (a
                             POST announcing 64 KiB, 60 000 bytes of it sent, then a byte every
                             ~2 s). Prints {"open", "connects", "closed", "failed"} every second.
  http_abuse.py probe JSON   `count` GETs of `path` on `target`, one fresh connection each (as a
                             load balancer or the kubelet), every `interval` s; each must complete
                             within `timeout` s. Prints one summary line.
As a module: add_attacker() (a namespace with many source addresses), Holder, Prober, rss_kib().
"""
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import time

import netlab

HERE = os.path.dirname(os.path.abspath(__file__))
PY = netlab.PY

REQUEST_LINE = b"GET /livez HTTP/1.1\r\nHost: node\r\n"
BODY_HEAD = b"POST / HTTP/1.1\r\nHost: node\r\nContent-Length: 65536\r\n\r\n"
BODY_FIRST = 60000


# ---- the clients (run inside a namespace) --------------------------------------------------------

def hold(cfg):
    targets = [tuple(t) for t in cfg["targets"]]
    sources, count, mode = cfg["sources"], cfg["count"], cfg["mode"]
    rate = cfg.get("rate", 2000)
    want = count + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:  # 10 000 sockets: above the usual soft limit (root may raise the hard one too)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    sel = selectors.EpollSelector()
    conns = {}  # fd -> [socket, established, next trickle time]
    made = closed = failed = 0
    tokens, last_fill, last_report, n = 0.0, time.monotonic(), 0.0, 0
    body_first = BODY_HEAD + b"x" * BODY_FIRST

    def drop(fd, counter):
        s = conns.pop(fd)[0]
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()
        return counter + 1

    while True:
        now = time.monotonic()
        tokens = min(rate, tokens + (now - last_fill) * rate)
        last_fill = now
        while len(conns) < count and tokens >= 1:
            tokens -= 1
            host, port = targets[n % len(targets)]
            src = sources[n % len(sources)]
            n += 1
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((src, 0))
                s.connect_ex((host, port))
            except OSError:
                s.close()
                failed += 1
                break
            conns[s.fileno()] = [s, False, 0.0]
            sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
            made += 1
        for key, ev in sel.select(timeout=0.02):
            fd = key.fd
            c = conns.get(fd)
            if c is None:
                continue
            s = c[0]
            if not c[1] and ev & selectors.EVENT_WRITE:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    failed = drop(fd, failed)
                    continue
                c[1] = True
                c[2] = now + 1 + (fd % 100) / 50.0  # trickles spread over 2 s
                sel.modify(s, selectors.EVENT_READ)
                try:
                    if mode == "slow":
                        s.send(REQUEST_LINE)
                    elif mode == "body":
                        s.send(body_first)  # what fits; the rest never matters
                except OSError:
                    closed = drop(fd, closed)
                    continue
            if ev & selectors.EVENT_READ:
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    closed = drop(fd, closed)
        if mode != "idle":
            for fd, c in list(conns.items()):
                if c[1] and c[2] <= now:
                    c[2] = now + 2
                    try:
                        c[0].send(b"x")
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed = drop(fd, closed)
        if now - last_report >= 1:
            last_report = now
            up = sum(1 for c in conns.values() if c[1])
            print(json.dumps({"open": up, "connects": made, "closed": closed, "failed": failed}), flush=True)


def probe_once(host, port, path, timeout):
    start = time.monotonic()
    deadline = start + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n".encode())
            buf = b""
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", (time.monotonic() - start) * 1000
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        status = int(buf.split(b" ", 2)[1]) if buf.startswith(b"HTTP/1.") else "garbled"
        return status, (time.monotonic() - start) * 1000
    except socket.timeout:
        return "timeout", (time.monotonic() - start) * 1000
    except OSError as e:
        return type(e).__name__, (time.monotonic() - start) * 1000


def probe(cfg):
    host, port = cfg["target"]
    results = []
    next_at = time.monotonic()
    for _ in range(cfg["count"]):
        results.append(probe_once(host, port, cfg["path"], cfg["timeout"]))
        next_at += cfg["interval"]
        time.sleep(max(0.0, next_at - time.monotonic()))
    ms = sorted(r[1] for r in results)
    bad = [r for r in results if r[0] != cfg["expect"] or r[1] > cfg["timeout"] * 1000]
    print(json.dumps({"n": len(results), "ok": len(results) - len(bad), "bad": bad[:10],
                      "max_ms": round(ms[-1], 1), "p50_ms": round(ms[len(ms) // 2], 1),
                      "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1)}), flush=True)


# ---- the driver's side ---------------------------------------------------------------------------

def add_attacker(lab, n_sources, prefix="198.18"):
    """A namespace on its own link to the node with n_sources addresses (prefix.0.10 upwards,
    prefix.0.1 the node's end); returns their list. Torn down with the lab."""
    ns = lab._netns("xh")
    link = "exth0"
    sh = netlab.sh
    sh(["ip", "-n", lab.node, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns])
    sh(["ip", "-n", lab.node, "-batch", "-"], input=f"addr add {prefix}.0.1/16 dev {link}\nlink set {link} up\n")
    addrs = [f"{prefix}.{(10 + i) // 250}.{(10 + i) % 250 + 1}" for i in range(n_sources)]
    cmds = [f"addr add {a}/16 dev eth0" for a in addrs] + ["link set eth0 up",
                                                            f"route add default via {prefix}.0.1 dev eth0"]
    sh(["ip", "-n", ns, "-batch", "-"], input="\n".join(cmds) + "\n")
    sh(["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=1024 65535", "net.ipv4.tcp_tw_reuse=1"], ns=ns)
    lab.attacker_ns = ns
    return addrs


def _spawn(lab, ns, args):
    p = subprocess.Popen(["ip", "netns", "exec", ns, PY, os.path.join(HERE, "http_abuse.py")] + args,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    lab.procs.append(p)
    return p


class Holder:
    """`hold` in the attacker namespace; status() is its latest line."""

    def __init__(self, lab, targets, sources, count, mode, rate=2000):
        cfg = {"targets": targets, "sources": sources, "count": count, "mode": mode, "rate": rate}
        self.lab = lab
        self.proc = _spawn(lab, lab.attacker_ns, ["hold", json.dumps(cfg)])
        self.last = {}
        os.set_blocking(self.proc.stdout.fileno(), False)

    def status(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.last = json.loads(line)
        if self.proc.poll() is not None:
            raise AssertionError(f"the holder exited: {self.proc.stderr.read()[-2000:]}")
        return self.last

    def wait_open(self, n, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status().get("connects", 0) >= n:
                return self.last
            time.sleep(0.1)
        return self.status()

    def stop(self):
        netlab._kill_group(self.proc)


class Prober:
    """`probe` in a namespace, in the background; result() waits for its summary."""

    def __init__(self, lab, ns, target, path, count, interval=0.05, timeout=1.0, expect=200):
        cfg = {"target": target, "path": path, "count": count, "interval": interval, "timeout": timeout,
               "expect": expect}
        self.proc = _spawn(lab, ns, ["probe", json.dumps(cfg)])

    def result(self, timeout=120):
        out, err = self.proc.communicate(timeout=timeout)
        if self.proc.returncode != 0 or not out.strip():
            raise AssertionError(f"prober failed ({self.proc.returncode}): {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def established(ns, ports, peer_prefix=""):
    """Established TCP connections in a namespace whose local port is one of `ports` (the server
    side), from peers starting with `peer_prefix`. Connections the kernel completed that the
    daemon has not accepted yet (its listen queues) count too."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htn", "state", "established"],
                         capture_output=True, text=True, timeout=30).stdout
    want = {str(p) for p in ports}
    n = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        peer = parts[3].replace("[::ffff:", "").replace("]", "")  # a dual-stack socket's IPv4 peers
        if parts[2].rsplit(":", 1)[-1] in want and peer.startswith(peer_prefix):
            n += 1
    return n


if __name__ == "__main__":
    {"hold": hold, "probe": probe}[sys.argv[1]](json.loads(sys.argv[2]))

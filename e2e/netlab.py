"""Real-kernel test lab for kube-proxy-nft: network namespaces, Calico-style pods, echo servers,
client agents, the daemon under test and its manifest folder.

Everything a Lab creates carries its unique prefix (kpn<pid%10000>x<n>) and is torn down by
Lab.close(): processes it started are killed by PID (each runs in its own session, so its process
group is ours), namespaces it created are deleted with `ip netns del`. Nothing is created in the
root namespace: veth pairs are made inside the node namespace with their peer inside the pod's.

Topology (per Lab):
  node ns     ip_forward, IPv6 forwarding, ext0 192.168.100.1/24 (+ .2 secondary),
              fd00:192:168::1/64, default routes via ext0 to the "external" namespace
              (<prefix>x: 192.168.100.254, fd00:192:168::fe, forwarding off: a silent black hole),
              per pod: veth <prefix>v<i> with proxy_arp, fe80::1/64, host routes to the pod.
  pod ns      eth0 with 10.244.0.<10+i>/32 and fd00:10:244::<10+i>/128, default routes via
              169.254.1.1 and fe80::1. ClusterIPs (10.96.0.0/16, fd00:10:96::/112) exist nowhere.
  client ns   (add_external_client) an outside client: eth0 203.0.113.2/24 (+ .130, outside the
              /25 source range tests allow) and 2001:db8:ff::2/64 (+ 2001:db8:ff::1:2), default
              routes via the node's extc0 (203.0.113.1, 2001:db8:ff::1). LoadBalancer and
              external IPs (198.51.100.0/24, 2001:db8:5::/64) exist nowhere: the client routes
              them to the node, as a cloud load balancer or router would.
"""
import atexit
import contextlib
import ipaddress
import itertools
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BIN = os.environ.get("KPN_BIN", os.path.join(REPO, "build", "kube-proxy-nft"))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
ECHO = os.path.join(HERE, "echo_server.py")
AGENT = os.path.join(HERE, "client_agent.py")

NODE_NAME = "node1"
CLUSTER_CIDR_V4 = "10.244.0.0/16"
CLUSTER_CIDR_V6 = "fd00:10:244::/48"
CLUSTER_CIDRS = f"{CLUSTER_CIDR_V4},{CLUSTER_CIDR_V6}"
NODE_V4 = "192.168.100.1"
NODE_V4_SECONDARY = "192.168.100.2"  # a node address a node-local client can bind to
NODE_V6 = "fd00:192:168::1"
NODE_V6_SECONDARY = "fd00:192:168::2"
# The external client (add_external_client) and the node's address on its link.
CLIENT_V4, CLIENT_V4_BLOCKED = "203.0.113.2", "203.0.113.130"
CLIENT_V6, CLIENT_V6_BLOCKED = "2001:db8:ff::2", "2001:db8:ff::1:2"
NODE_CLIENT_LINK_V4, NODE_CLIENT_LINK_V6 = "203.0.113.1", "2001:db8:ff::1"

LIVE_LABS = []  # labs not yet closed, for failure diagnostics (see conftest.py)


class LabError(AssertionError):
    pass


def sh(args, ns=None, check=True, timeout=30, input=None):
    """Run a command (list), optionally inside a namespace; returns CompletedProcess (text)."""
    if ns:
        args = ["ip", "netns", "exec", ns] + list(args)
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise LabError(f"command failed ({p.returncode}): {' '.join(args)}\n"
                       f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def _kill_group(proc, sig=signal.SIGKILL):
    """Kill one process we started (it leads its own session/process group) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _readline(stream, timeout):
    """One line from a pipe, or None on timeout/EOF."""
    r, _, _ = select.select([stream], [], [], timeout)
    if not r:
        return None
    line = stream.readline()
    return line if line else None


# ---- manifests ----------------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./:-]*$")
_NUMBERISH = re.compile(r"^[-+]?(\d[\d_]*(\.\d*)?([eE][-+]?\d+)?|\.\d+|0x[0-9a-fA-F]+|0o[0-7]+)$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_scalar(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if (not s or not _PLAIN.match(s) or _NUMBERISH.match(s) or s.lower() in _YAML_WORDS
            or s.endswith(":") or re.match(r"^\d{4}-\d\d-\d\d", s)):
        return json.dumps(s)  # a JSON string is a valid double-quoted YAML scalar
    return s


def _yaml_map(d, ind, out):
    for k in sorted(d):
        v = d[k]
        if isinstance(v, dict) and v:
            out.append(f"{' ' * ind}{k}:")
            _yaml_map(v, ind + 2, out)
        elif isinstance(v, list) and v:
            out.append(f"{' ' * ind}{k}:")
            _yaml_list(v, ind, out)  # kubectl style: "- " at the key's indentation
        elif isinstance(v, dict):
            out.append(f"{' ' * ind}{k}: {{}}")
        elif isinstance(v, list):
            out.append(f"{' ' * ind}{k}: []")
        else:
            out.append(f"{' ' * ind}{k}: {_yaml_scalar(v)}")


def _yaml_list(items, ind, out):
    for item in items:
        if isinstance(item, dict) and item:
            sub = []
            _yaml_map(item, ind + 2, sub)
            sub[0] = " " * ind + "- " + sub[0][ind + 2:]
            out.extend(sub)
        elif isinstance(item, list) and item:
            out.append(" " * ind + "-")
            _yaml_list(item, ind + 2, out)
        else:
            out.append(" " * ind + "- " + (_yaml_scalar(item) if not isinstance(item, (dict, list))
                                            else ("{}" if isinstance(item, dict) else "[]")))


def to_yaml(obj):
    """Block-style YAML the way `kubectl get -o yaml` prints it (sorted keys, 2-space indent)."""
    out = []
    _yaml_map(obj, 0, out)
    return "\n".join(out) + "\n"


def as_list(objs):
    """A `kind: List` wrapper, what kubectl prints for several objects."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objs), "metadata": {"resourceVersion": ""}}


def _uid(*parts):
    import hashlib
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def service(name, ports, cluster_ips=None, namespace="default", type="ClusterIP", labels=None,
            headless=False, external_name=None, external_ips=None, lb_ingress=None, etp=None,
            itp=None, source_ranges=None, health_check_node_port=None,
            created="2024-05-01T10:00:00Z"):
    """A v1 Service as the API server returns it.

    ports: (name, port, protocol, targetPort[, nodePort]). lb_ingress: status ingress entries, each
    an IP string or a dict ({"ip": ..., "ipMode": "Proxy"}, {"hostname": ...}). etp / itp:
    externalTrafficPolicy / internalTrafficPolicy."""
    meta = {"name": name, "namespace": namespace, "uid": _uid("svc", namespace, name),
            "resourceVersion": "4711", "creationTimestamp": created}
    if labels:
        meta["labels"] = dict(labels)
    # kubectl leaves out the name of an unnamed (single) service port
    spec = {"ports": [dict({"name": p[0]} if p[0] else {}, port=p[1], protocol=p[2],
                           targetPort=p[3], **({"nodePort": p[4]} if len(p) > 4 else {}))
                      for p in ports],
            "sessionAffinity": "None", "type": type}
    if external_ips:
        spec["externalIPs"] = list(external_ips)
    if etp:
        spec["externalTrafficPolicy"] = etp
    if source_ranges:
        spec["loadBalancerSourceRanges"] = list(source_ranges)
    if health_check_node_port:
        spec["healthCheckNodePort"] = health_check_node_port
    if type == "ExternalName":
        spec["externalName"] = external_name or "example.com"
    else:
        spec["selector"] = {"app": name}
        spec["internalTrafficPolicy"] = itp or "Cluster"
        if headless:
            spec["clusterIP"] = "None"
            spec["clusterIPs"] = ["None"]
            spec["ipFamilies"] = ["IPv4"]
            spec["ipFamilyPolicy"] = "SingleStack"
        else:
            ips = list(cluster_ips)
            spec["clusterIP"] = ips[0]
            spec["clusterIPs"] = ips
            fams = []
            for ip in ips:
                try:
                    fams.append("IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4")
                except ValueError:
                    fams.append("IPv4")
            spec["ipFamilies"] = fams
            spec["ipFamilyPolicy"] = "RequireDualStack" if len(ips) > 1 else "SingleStack"
    ingress = [{"ip": i, "ipMode": "VIP"} if isinstance(i, str) else dict(i) for i in (lb_ingress or [])]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec,
            "status": {"loadBalancer": {"ingress": ingress} if ingress else {}}}


def service_cidr(name, cidrs):
    """A networking.k8s.io/v1 ServiceCIDR."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": name, "uid": _uid("servicecidr", name), "resourceVersion": "7",
                         "creationTimestamp": "2024-05-01T09:00:00Z"},
            "spec": {"cidrs": list(cidrs)}}


def endpoint_slice(service_name, endpoints, ports, name=None, address_type="IPv4",
                   namespace="default"):
    """A discovery.k8s.io/v1 EndpointSlice.

    endpoints: IP strings (conditions ready/serving true, terminating false, on this node) or
      dicts {"ip": ..., "conditions": {...}, "node": ...} whose conditions are copied verbatim (so
      keys can be left out to test the "missing ready = true" rule); "node" defaults to this
      node (None: no nodeName).
    ports: (name, port, protocol)."""
    name = name or f"{service_name}-{address_type.lower()}"
    eps = []
    for i, ep in enumerate(endpoints):
        if isinstance(ep, str):
            ep = {"ip": ep, "conditions": {"ready": True, "serving": True, "terminating": False}}
        pod = f"{service_name}-{i}"
        node = ep.get("node", NODE_NAME)
        conditions = ep.get("conditions", {"ready": True, "serving": True, "terminating": False})
        eps.append(dict({"addresses": [ep["ip"]], "conditions": dict(conditions),
                         "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace,
                                       "uid": _uid("pod", namespace, pod)}},
                        **({"nodeName": node} if node else {})))
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "addressType": address_type,
            "endpoints": eps,
            "metadata": {"name": name, "namespace": namespace,
                         "generateName": f"{service_name}-",
                         "uid": _uid("slice", namespace, name),
                         "resourceVersion": "4712",
                         "creationTimestamp": "2024-05-01T10:00:01Z",
                         "labels": {"kubernetes.io/service-name": service_name,
                                    "endpointslice.kubernetes.io/managed-by":
                                        "endpointslice-controller.k8s.io"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service",
                                              "name": service_name, "blockOwnerDeletion": True,
                                              "controller": True,
                                              "uid": _uid("svc", namespace, service_name)}]},
            "ports": [{"name": p[0], "port": p[1], "protocol": p[2]} for p in ports]}


def trigger_time(t):
    """An EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time for Unix time t, as the
    EndpointSlice controller writes it (RFC 3339 with fractions of a second). The daemon counts
    only trigger times after its start, as upstream's."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f"{t % 1:.6f}"[1:] + "Z"


def node_object(name=NODE_NAME):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": _uid("node", name), "resourceVersion": "100",
                         "creationTimestamp": "2024-05-01T09:00:00Z",
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
            "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24", "fd00:10:244::/64"]},
            "status": {"addresses": [{"type": "InternalIP", "address": NODE_V4},
                                     {"type": "InternalIP", "address": NODE_V6},
                                     {"type": "Hostname", "address": name}]}}


class Manifests:
    """The daemon's --manifests folder. Writes go to a hidden temp name and are renamed in."""

    def __init__(self, path):
        self.path = path
        os.makedirs(path, exist_ok=True)
        self._n = itertools.count()

    def _text(self, filename, objs):
        if isinstance(objs, (list, tuple)):
            obj = objs[0] if len(objs) == 1 else as_list(objs)
        else:
            obj = objs
        if filename.endswith(".json"):
            return json.dumps(obj, indent=4) + "\n"
        return to_yaml(obj)

    def write(self, filename, objs):
        self.write_raw(filename, self._text(filename, objs))

    def write_raw(self, filename, text, atomic=True):
        final = os.path.join(self.path, filename)
        if not atomic:  # a writer that truncates and rewrites in place
            with open(final, "w") as f:
                f.write(text)
            return
        # hidden, and without the .yaml/.json ending: never a manifest by itself
        tmp = os.path.join(self.path, f".tmp-{filename}-{os.getpid()}-{next(self._n)}")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, final)

    def text(self, filename, objs):
        return self._text(filename, objs)

    def delete(self, filename):
        os.unlink(os.path.join(self.path, filename))


# ---- processes -----------------------------------------------------------------------------------

class Agent:
    """A long-running client_agent.py inside one namespace (JSON lines over pipes)."""

    def __init__(self, lab, ns, label):
        self.ns = ns
        self.label = label
        self.errlog = os.path.join(lab.tmp, f"agent-{label}.err")
        self._err = open(self.errlog, "w")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, PY, "-u", AGENT],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, bufsize=1,
                                     start_new_session=True)
        lab.procs.append(self.proc)
        line = _readline(self.proc.stdout, 15)
        if not line or "ready" not in line:
            raise LabError(f"client agent in {ns} did not start: {line!r} {self._errtext()}")

    def _errtext(self):
        self._err.flush()
        with open(self.errlog) as f:
            return f.read()[-2000:]

    def call(self, wait=60, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = _readline(self.proc.stdout, wait)
        if line is None:
            raise LabError(f"client agent in {self.ns} gave no answer to {req} within {wait}s "
                           f"(alive={self.proc.poll() is None}) {self._errtext()}")
        resp = json.loads(line)
        if "error" in resp:
            raise LabError(f"client agent in {self.ns}: {resp['error']} for {req}")
        return resp

    def tcp(self, host, port, timeout=2.0, bind=None, sport=0):
        return self.call(op="tcp", host=host, port=port, timeout=timeout, bind=bind, sport=sport)["result"]

    def udp(self, host, port, timeout=2.0, bind=None):
        return self.call(op="udp", host=host, port=port, timeout=timeout, bind=bind)["result"]

    def many(self, proto, host, port, n, timeout=2.0, bind=None):
        return self.call(op="many", proto=proto, host=host, port=port, n=n, timeout=timeout,
                         bind=bind)["results"]

    def loop_start(self, host, port, interval=0.02, connect_timeout=0.9):
        self.call(op="loop_start", host=host, port=port, interval=interval,
                  connect_timeout=connect_timeout)

    def loop_stats(self):
        return self.call(op="loop_stats")

    def loop_stop(self):
        return self.call(op="loop_stop")

    def udp_open(self, sid, host, port, sport=None):
        self.call(op="udp_open", id=sid, host=host, port=port, **({"sport": sport} if sport else {}))

    def udp_ask(self, sid, timeout=2.0):
        return self.call(op="udp_ask", id=sid, timeout=timeout)["result"]

    def stream_start(self, sid, host, port, interval=0.02):
        self.call(op="stream_start", id=sid, host=host, port=port, interval=interval)

    def stream_stop(self, sid):
        return self.call(op="stream_stop", id=sid)

    def hold_open(self, hid, host, port, timeout=2.0):
        """A long-lived TCP connection to an echo --stream port: the answer to its first line."""
        return self.call(op="hold_open", id=hid, host=host, port=port, timeout=timeout)["result"]

    def hold_close(self, hid):
        self.call(op="hold_close", id=hid)

    def sctp_init(self, host, port, sport, count=1):
        self.call(op="sctp_init", host=host, port=port, sport=sport, count=count)


SYNC_RE = re.compile(r"sync done full=(\d+) ops=(\d+) render_ms=(\S+) diff_ms=(\S+) commit_ms=(\S+)")


class Daemon:
    """kube-proxy-nft running in the node namespace; stderr captured to a file per start."""

    DEFAULT_SYNC_FLAGS = ("--min-sync-period=0s", "--sync-period=30s")

    def __init__(self, lab, manifests, extra_args=(), label="daemon", sync_flags=None, env=None):
        """manifests: the --manifests folder, or None when extra_args name another source
        (--kubeconfig, --master, or in-cluster through `env`)."""
        self.lab = lab
        self.label = label
        self.env = dict(os.environ, **env) if env else None
        sync_flags = self.DEFAULT_SYNC_FLAGS if sync_flags is None else sync_flags
        source = [f"--manifests={manifests}"] if manifests else []
        self.args = [BIN, *source, f"--hostname-override={NODE_NAME}",
                     f"--cluster-cidr={CLUSTER_CIDRS}", *sync_flags,
                     "--v=2", "--logtostderr"] + list(extra_args)
        self.runs = []  # (Popen, stderr path)
        self.proc = None
        self.log = None

    def start(self):
        if not os.path.exists(BIN):
            raise LabError(f"daemon binary {BIN} does not exist (make -C {REPO} build/kube-proxy-nft)")
        n = len(self.runs) + 1
        self.log = os.path.join(self.lab.tmp, f"{self.label}-run{n}.stderr")
        out = os.path.join(self.lab.tmp, f"{self.label}-run{n}.stdout")
        with open(self.log, "w") as ferr, open(out, "w") as fout:
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.lab.node] + self.args,
                                         stdin=subprocess.DEVNULL, stdout=fout, stderr=ferr,
                                         start_new_session=True, env=self.env)
        self.lab.procs.append(self.proc)
        self.runs.append((self.proc, self.log))
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self, run=-1):
        with open(self.runs[run][1], errors="replace") as f:
            return f.read()

    def stdout(self, run=-1):
        with open(self.runs[run][1][:-len("stderr")] + "stdout", errors="replace") as f:
            return f.read()

    def tail(self, n=60):
        out = []
        for i, (p, path) in enumerate(self.runs):
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
            out.append(f"--- {self.label} run {i + 1} (pid {p.pid}, exit={p.poll()}) "
                       f"stderr, last {min(n, len(lines))} of {len(lines)} lines:")
            out.extend(lines[-n:])
        return "\n".join(out)

    def syncs(self, run=-1):
        """Parsed `sync done` lines of one run: dicts with full, ops, render_ms, ..."""
        res = []
        for m in SYNC_RE.finditer(self.stderr(run)):
            res.append({"full": int(m.group(1)), "ops": int(m.group(2)), "render_ms": m.group(3),
                        "diff_ms": m.group(4), "commit_ms": m.group(5)})
        return res

    def failed_syncs(self, run=-1):
        return [l for l in self.stderr(run).splitlines() if "sync failed" in l]

    def wait_syncs(self, n, timeout=20.0):
        """Wait until this run has logged at least n `sync done` lines."""
        deadline = time.monotonic() + timeout
        while True:
            got = len(self.syncs())
            if got >= n:
                return self.syncs()
            if not self.alive():
                raise LabError(f"daemon exited (code {self.proc.poll()}) while waiting for "
                               f"{n} sync done lines (saw {got})\n{self.tail()}")
            if time.monotonic() > deadline:
                raise LabError(f"timed out after {timeout}s waiting for {n} `sync done` lines "
                               f"(saw {got})\n{self.tail()}")
            time.sleep(0.02)

    def wait_for(self, text, timeout=20.0):
        """Wait until this run's stderr contains `text`."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if not self.alive() or time.monotonic() > deadline:
                raise LabError(f"no {text!r} in the daemon's log (alive={self.alive()})\n{self.tail()}")
            time.sleep(0.05)

    def settle(self, quiet=0.25, timeout=10.0):
        """Wait until no new sync line appeared for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last, since = len(self.syncs()), time.monotonic()
        while time.monotonic() - since < quiet:
            if time.monotonic() > deadline:
                break
            time.sleep(0.03)
            now = len(self.syncs())
            if now != last:
                last, since = now, time.monotonic()
        return self.syncs()

    @contextlib.contextmanager
    def change(self, timeout=20.0, result=None):
        """with daemon.change(): <write manifests> -> returns after the daemon synced it.

        `result` (a dict), if given, receives "syncs": the sync lines the change produced."""
        self.settle(quiet=0.1)
        before = len(self.syncs())
        yield
        self.wait_syncs(before + 1, timeout)
        after = self.settle(quiet=0.2)
        if result is not None:
            result["syncs"] = after[before:]

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc)


class Pod:
    def __init__(self, name, ns, veth, v4, v6):
        self.name, self.ns, self.veth, self.v4, self.v6 = name, ns, veth, v4, v6

    def __repr__(self):
        return f"Pod({self.name} {self.v4} {self.v6} ns={self.ns})"


class Lab:
    _counter = itertools.count(1)

    def __init__(self, label="lab"):
        self.label = label
        self.namespaces = []
        self.procs = []
        self.daemons = []
        self.agents = []
        self.pods = []
        self.closed = False
        self.keep_tmp = False  # set on failure: the daemon logs stay for a post-mortem
        LIVE_LABS.append(self)
        try:
            while True:
                self.prefix = f"kpn{os.getpid() % 10000}x{next(Lab._counter)}"
                existing = sh(["ip", "netns", "list"]).stdout
                if not re.search(rf"^{re.escape(self.prefix)}[npx]", existing, re.M):
                    break  # never reuse (or delete) a name someone else may own
            self.tmp = tempfile.mkdtemp(prefix=f"{self.prefix}-")
            self.manifests = Manifests(os.path.join(self.tmp, "manifests"))
            self.node = self._netns("n")
            self._setup_node()
        except BaseException:
            self.close()
            raise

    # -- namespaces --
    def _netns(self, suffix):
        name = f"{self.prefix}{suffix}"
        sh(["ip", "netns", "add", name])
        self.namespaces.append(name)
        sh(["sysctl", "-q", "-w",
            "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
            "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
            "net.ipv6.conf.all.accept_ra=0", "net.ipv6.conf.default.accept_ra=0",
            "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0"],
           ns=name)
        sh(["ip", "-n", name, "link", "set", "lo", "up"])
        return name

    def _setup_node(self):
        # The node's uplink: a veth to an "external" namespace that owns the default gateway and
        # forwards nothing, so any packet the node routes out (e.g. to a ClusterIP without rules)
        # is silently dropped there and never leaves the namespaces of this lab.
        n = self.node
        self.ext = self._netns("x")
        sh(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"], ns=n)
        sh(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0"],
           ns=self.ext)
        sh(["ip", "-n", n, "link", "add", "ext0", "type", "veth", "peer", "name", "uplink",
            "netns", self.ext])
        sh(["ip", "-n", self.ext, "-batch", "-"], input="\n".join([
            "addr add 192.168.100.254/24 dev uplink",
            "addr add fd00:192:168::fe/64 dev uplink nodad",
            "link set uplink up",
        ]) + "\n")
        sh(["ip", "-n", n, "-batch", "-"], input="\n".join([
            f"addr add {NODE_V4}/24 dev ext0",
            f"addr add {NODE_V4_SECONDARY}/24 dev ext0",
            f"addr add {NODE_V6}/64 dev ext0 nodad",
            f"addr add {NODE_V6_SECONDARY}/64 dev ext0 nodad",
            "link set ext0 up",
            "route add default via 192.168.100.254 dev ext0",
            "route add default via fd00:192:168::fe dev ext0",
        ]) + "\n")

    def add_pod(self, name=None):
        i = len(self.pods) + 1
        name = name or f"pod{i}"
        ns = self._netns(f"p{i}")
        veth = f"{self.prefix}v{i}"
        v4 = f"10.244.0.{10 + i}"
        v6 = f"fd00:10:244::{10 + i}"
        sh(["ip", "-n", self.node, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
            "netns", ns])
        # proxy_delay=0: answer proxy ARP at once (Calico does the same; the default delays the
        # first packet of every pod by up to 0.8 s).
        sh(["sysctl", "-q", "-w", f"net.ipv4.conf.{veth}.proxy_arp=1",
            f"net.ipv4.neigh.{veth}.proxy_delay=0",
            f"net.ipv4.conf.{veth}.rp_filter=0", f"net.ipv6.conf.{veth}.accept_dad=0"],
           ns=self.node)
        sh(["ip", "-n", self.node, "-batch", "-"], input="\n".join([
            f"link set {veth} up",
            f"addr add fe80::1/64 dev {veth} nodad",
            f"route add {v4}/32 dev {veth}",
            f"route add {v6}/128 dev {veth}",
        ]) + "\n")
        sh(["sysctl", "-q", "-w", "net.ipv4.conf.eth0.rp_filter=0",
            "net.ipv6.conf.eth0.accept_dad=0"], ns=ns)
        sh(["ip", "-n", ns, "-batch", "-"], input="\n".join([
            f"addr add {v4}/32 dev eth0",
            f"addr add {v6}/128 dev eth0 nodad",
            "link set eth0 up",
            "route add 169.254.1.1 dev eth0 scope link",
            "route add default via 169.254.1.1 dev eth0",
            "route add default via fe80::1 dev eth0",
        ]) + "\n")
        pod = Pod(name, ns, veth, v4, v6)
        self.pods.append(pod)
        return pod

    def add_external_client(self):
        """The outside world: a namespace on its own link to the node (see the module doc).
        Returned as a Pod (agent(), start_echo() work on it) with v4_blocked / v6_blocked, the
        second addresses to bind to for source-range tests."""
        ns = self._netns("c")
        sh(["ip", "-n", self.node, "link", "add", "extc0", "type", "veth", "peer", "name", "eth0",
            "netns", ns])
        sh(["ip", "-n", self.node, "-batch", "-"], input="\n".join([
            f"addr add {NODE_CLIENT_LINK_V4}/24 dev extc0",
            f"addr add {NODE_CLIENT_LINK_V6}/64 dev extc0 nodad",
            "link set extc0 up",
        ]) + "\n")
        sh(["ip", "-n", ns, "-batch", "-"], input="\n".join([
            f"addr add {CLIENT_V4}/24 dev eth0",
            f"addr add {CLIENT_V4_BLOCKED}/24 dev eth0",
            f"addr add {CLIENT_V6}/64 dev eth0 nodad",
            # deprecated: never picked as a source unless bound to explicitly
            f"addr add {CLIENT_V6_BLOCKED}/64 dev eth0 nodad preferred_lft 0",
            "link set eth0 up",
            f"route add default via {NODE_CLIENT_LINK_V4} dev eth0",
            f"route add default via {NODE_CLIENT_LINK_V6} dev eth0",
        ]) + "\n")
        client = Pod("client-ext", ns, "extc0", CLIENT_V4, CLIENT_V6)
        client.v4_blocked, client.v6_blocked = CLIENT_V4_BLOCKED, CLIENT_V6_BLOCKED
        return client

    def add_backends(self, n, tcp=(8080,), udp=(5353,), show_port=False, name="ep", stream=()):
        """n pods, each running an echo server on the given ports."""
        pods = []
        for i in range(n):
            p = self.add_pod(f"{name}{i + 1}")
            self.start_echo(p, tcp=tcp, udp=udp, show_port=show_port, stream=stream)
            pods.append(p)
        return pods

    def node_addresses(self):
        """Every address configured in the node namespace (both families, all interfaces)."""
        data = json.loads(sh(["ip", "-j", "-n", self.node, "addr", "show"]).stdout)
        return {a["local"] for link in data for a in link.get("addr_info", [])}

    # -- processes --
    def start_echo(self, pod, tcp=(), udp=(), show_port=False, addrs=None, stream=()):
        """Echo servers in a pod (or the external client, or `self.node_pod()`) on its two
        addresses, or on `addrs`; `stream`: long-lived TCP ports (echo_server.py --stream)."""
        args = [PY, "-u", ECHO]
        for a in (addrs or (pod.v4, pod.v6)):
            args += ["--addr", a]
        for p in tcp:
            args += ["--tcp", str(p)]
        for p in stream:
            args += ["--stream", str(p)]
        for p in udp:
            args += ["--udp", str(p)]
        if show_port:
            args.append("--show-port")
        errlog = os.path.join(self.tmp, f"echo-{pod.name}-{len(self.procs)}.err")
        with open(errlog, "w") as ferr:
            proc = subprocess.Popen(["ip", "netns", "exec", pod.ns] + args, stdout=subprocess.PIPE,
                                    stderr=ferr, stdin=subprocess.DEVNULL, text=True,
                                    start_new_session=True)
        self.procs.append(proc)
        line = _readline(proc.stdout, 15)
        if not line or line.strip() != "READY":
            with open(errlog) as f:
                raise LabError(f"echo server in {pod} did not start: {line!r} {f.read()[-2000:]}")
        return proc

    def add_upstream_witness(self, addrs, tcp=(), udp=()):
        """Echo servers on `addrs` in the upstream ("external", <prefix>x) namespace, behind the
        node's default route: traffic the node does not DNAT (or drop) reaches them and is answered
        with the address itself, so "not handled here" is visible instead of a silent timeout."""
        sh(["ip", "-n", self.ext, "-batch", "-"], input="\n".join(
            [f"addr add {a}/{128 if ':' in a else 32} dev lo" for a in addrs] +
            ["route replace default via 192.168.100.1 dev uplink",
             f"route replace default via {NODE_V6} dev uplink"]) + "\n")
        return self.start_echo(Pod("upstream", self.ext, None, None, None), tcp=tcp, udp=udp,
                               addrs=addrs)

    def node_pod(self):
        """The node namespace as a Pod, for start_echo (a listener on the node itself)."""
        return Pod("node", self.node, None, NODE_V4, NODE_V6)

    def agent(self, where):
        """A client agent in a pod (Pod) or in the node namespace (the string 'node')."""
        ns = self.node if where == "node" else where.ns
        label = "node" if where == "node" else where.name
        a = Agent(self, ns, f"{label}-{len(self.agents)}")
        self.agents.append(a)
        return a

    def daemon(self, extra_args=(), label=None, sync_flags=None, manifests=True, env=None):
        """manifests=False: no --manifests flag (extra_args or env name the API source)."""
        d = Daemon(self, self.manifests.path if manifests else None, extra_args,
                   label or f"daemon{len(self.daemons) + 1}", sync_flags, env)
        self.daemons.append(d)
        return d

    def start_daemon(self, extra_args=(), label=None, sync_flags=None, manifests=True, env=None):
        """Start the daemon and wait for its first `sync done`."""
        d = self.daemon(extra_args, label, sync_flags, manifests, env).start()
        d.wait_syncs(1)
        return d

    # -- inspection --
    def nft(self, *args, ns=None):
        return sh(["nft"] + list(args), ns=ns or self.node, check=False).stdout

    def table(self, family="ip"):
        p = sh(["nft", "list", "table", family, "kube-proxy"], ns=self.node, check=False)
        return p.stdout if p.returncode == 0 else ""

    def conntrack(self, proto):
        """Parsed `conntrack -L -p proto` of the node: list of (orig dict, reply dict, line)."""
        out = sh(["conntrack", "-L", "-p", proto], ns=self.node, check=False).stdout
        res = []
        for line in out.splitlines():
            kv = re.findall(r"(src|dst|sport|dport)=(\S+)", line)
            orig, reply = {}, {}
            for k, v in kv:
                (reply if k in orig else orig)[k] = v
            res.append((orig, reply, line))
        return res

    def diagnostics(self):
        out = [f"===== lab {self.prefix} ({self.label}); logs kept in {self.tmp}"]
        for d in self.daemons:
            if d.runs:
                out.append(d.tail(80))
        if self.node in self.namespaces:
            rs = sh(["nft", "list", "ruleset"], ns=self.node, check=False)
            lines = (rs.stdout + rs.stderr).splitlines()
            out.append(f"--- nft list ruleset in node ns {self.node} ({len(lines)} lines):")
            out.extend(lines[:600])
            if len(lines) > 600:
                out.append(f"... {len(lines) - 600} more lines")
        for a in self.agents:
            try:
                with open(a.errlog) as f:
                    t = f.read().strip()
                if t:
                    out.append(f"--- agent {a.label} stderr:\n{t[-1500:]}")
            except OSError:
                pass
        return "\n".join(out)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for d in self.daemons:
            d.stop()
        for p in reversed(self.procs):
            _kill_group(p)
        for a in self.agents:
            try:
                a._err.close()
            except Exception:  # noqa: BLE001
                pass
        for ns in reversed(self.namespaces):
            sh(["ip", "netns", "del", ns], check=False)
        if self in LIVE_LABS:
            LIVE_LABS.remove(self)
        if (os.environ.get("KPN_KEEP_TMP") != "1" and not self.keep_tmp
                and getattr(self, "tmp", None)):
            shutil.rmtree(self.tmp, ignore_errors=True)


@atexit.register
def _close_all_labs():
    """Last resort (e.g. an interrupted run): tear down whatever is still up."""
    for lab in list(LIVE_LABS):
        lab.close()


# ---- small assertion helpers ---------------------------------------------------------------------

def connections_to_see_all(k, miss=1e-5):
    """How many random picks among k endpoints make "one was never picked" rarer than `miss`."""
    if k < 2:
        return 1
    return math.ceil(math.log(k / miss) / math.log(k / (k - 1)))


def expect_answers(agent, host, port, endpoints, sources, n=16, proto="tcp", bind=None, what=""):
    """n new connections to host:port all answered, by exactly the addresses `endpoints` (each one
    at least once), every one of which saw a source address in `sources`. With several endpoints
    n is raised so that missing one by chance stays below 1e-5 (18 for two, 32 for three)."""
    n = max(n, connections_to_see_all(len(set(endpoints))))
    res = agent.many(proto, host, port, n, bind=bind, timeout=2.0)
    own, peers, errs = answers(res)
    label = (what + ": " if what else "") + f"{proto} {host}:{port}" + (f" from {bind}" if bind else "")
    assert not errs, f"{label}: {len(errs)} of {n} failed: {sorted(set(errs))}"
    assert set(own) == set(endpoints), f"{label}: answered by {own}, expected exactly {set(endpoints)}"
    assert set(peers) <= set(sources), \
        f"{label}: endpoints saw sources {set(peers)}, expected only {set(sources)}"
    return own


def expect_refused(agent, host, port, proto="tcp", bind=None, what=""):
    """A new connection is rejected (TCP RST / ICMP port unreachable): ECONNREFUSED at once."""
    r = (agent.tcp if proto == "tcp" else agent.udp)(host, port, timeout=1.5, bind=bind)
    assert r == "ERR:ECONNREFUSED", f"{what}: {proto} {host}:{port} from {bind}: {r}, expected a reject"


def expect_dropped(agent, host, port, bind=None, what="", timeout=0.6):
    """A new TCP connection gets no answer at all (dropped, not rejected)."""
    r = agent.tcp(host, port, timeout=timeout, bind=bind)
    assert r == "ERR:ETIMEDOUT", f"{what}: tcp {host}:{port} from {bind}: {r}, expected a silent drop"


def answers(results):
    """Split results into ({own_ip: count}, [peer ips], [errors])."""
    own, peers, errs = {}, [], []
    for r in results:
        if r.startswith("ERR:"):
            errs.append(r)
        else:
            parts = r.split()
            own[parts[0]] = own.get(parts[0], 0) + 1
            peers.append(parts[1])
    return own, peers, errs


# ---- HTTP and Prometheus text from inside a namespace --------------------------------------------

_HTTP_GET = r"""
import http.client, json, sys
host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    c = http.client.HTTPConnection(host, port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    print(json.dumps({"status": r.status, "body": r.read().decode(), "headers": dict(r.getheaders())}))
except OSError as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
"""


def http_get(ns, host, port, path):
    """One HTTP GET from inside namespace `ns`: {"status", "body", "headers"} or {"error"}."""
    return json.loads(sh([PY, "-c", _HTTP_GET, host, str(port), path], ns=ns).stdout)


def metric_sample(text, name, **labels):
    """The value of the first series `name` whose labels include `labels`, in Prometheus' text
    format; None when there is none."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None

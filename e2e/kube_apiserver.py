#!/usr/bin/python3
"""A small Kubernetes API server for the e2e suite (Python 3 stdlib only).

Serves v1 services/nodes/namespaces, discovery.k8s.io/v1 endpointslices,
networking.k8s.io/v1 servicecidrs and events.k8s.io/v1 events (validated as the real server
validates them) with list (paging, selectors), get, create, update, patch
(merge; a strategic merge patch is merged the same way), delete and watch (chunked, one JSON event per line, bookmarks, 410 on expired history),
persists its store, resourceVersion counter and event history in --state-dir like an etcd-backed
API server, answers kubectl's discovery and Table requests, and has test knobs under /_test/
(see e2e/README.md).

    python3 kube_apiserver.py --state-dir DIR --tokens-file F --admin-token T \
        [--tls-cert C --tls-key K [--client-ca CA]] [--port 0] [--bind 127.0.0.1]

Prints `listening on https://127.0.0.1:PORT` once it accepts connections.
"""
import argparse
import base64
import copy
import gzip
import http.server
import ipaddress
import json
import os
import queue
import random
import re
import signal
import socketserver
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import uuid

# ---- resources -----------------------------------------------------------------------------------

RESOURCES = {
    # plural: (group, version, kind, namespaced, shortNames)
    "services": ("", "v1", "Service", True, ["svc"]),
    "nodes": ("", "v1", "Node", False, ["no"]),
    "namespaces": ("", "v1", "Namespace", False, ["ns"]),
    "endpointslices": ("discovery.k8s.io", "v1", "EndpointSlice", True, []),
    "servicecidrs": ("networking.k8s.io", "v1", "ServiceCIDR", False, []),
    "events": ("events.k8s.io", "v1", "Event", True, ["ev"]),
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
SINGULAR = {"services": "service", "nodes": "node", "namespaces": "namespace",
            "endpointslices": "endpointslice", "servicecidrs": "servicecidr", "events": "event"}


GZIP_MIN = 128 * 1024  # responses this large are gzipped for a client that accepts it


def api_version(res):
    g, v = RESOURCES[res][0], RESOURCES[res][1]
    return f"{g}/{v}" if g else v


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def validate_event(ev, old=None):
    """What the real API server checks on an events.k8s.io/v1 Event (ValidateEventCreate /
    ValidateEventUpdate in pkg/apis/core/validation/events.go); a list of field errors."""
    errs = []
    md = ev.get("metadata") or {}
    name = md.get("name", "")
    if not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        errs.append(f"metadata.name: Invalid value: {name!r}: a DNS-1123 subdomain")
    if not ev.get("eventTime"):
        errs.append("eventTime: Required value")
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(f"type: Invalid value: {ev.get('type')!r}: Normal or Warning")
    for f in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount", "deprecatedSource"):
        if ev.get(f):
            errs.append(f"{f}: Invalid value: needs to be unset")
    regarding = ev.get("regarding") or {}
    if not regarding.get("namespace") and md.get("namespace") not in ("default", "kube-system"):
        errs.append("regarding.namespace: does not match event.namespace")
    if regarding.get("namespace") and regarding["namespace"] != md.get("namespace"):
        errs.append("regarding.namespace: does not match event.namespace")
    rc = ev.get("reportingController", "")
    if not rc or not _QUALIFIED.match(rc):
        errs.append(f"reportingController: Invalid value: {rc!r}")
    ri = ev.get("reportingInstance", "")
    if not ri or len(ri) > 128:
        errs.append("reportingInstance: Required value, at most 128 characters")
    for f in ("action", "reason"):
        if not ev.get(f) or len(ev[f]) > 128:
            errs.append(f"{f}: Required value, at most 128 characters")
    if len(ev.get("note", "")) > 1024:
        errs.append("note: Invalid value: at most 1024 characters")
    series = ev.get("series")
    if series is not None and (old is None or series != old.get("series")):
        if int(series.get("count", 0)) < 2:
            errs.append("series.count: Invalid value: should be at least 2")
        if not series.get("lastObservedTime"):
            errs.append("series.lastObservedTime: Required value")
    if old is not None:
        for f in ("regarding", "related", "reason", "note", "type", "eventTime", "action",
                  "reportingController", "reportingInstance"):
            if ev.get(f) != old.get(f):
                errs.append(f"{f}: Invalid value: field is immutable")
    return errs


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            st["details"] = self.details
        return st


def not_found(res, name):
    return ApiError(404, "NotFound", f'{res} "{name}" not found',
                    {"name": name, "kind": res})


def expired_status(msg="too old resource version"):
    return ApiError(410, "Expired", msg)


# ---- selectors -----------------------------------------------------------------------------------

_REQ_SET = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_REQ_OP = re.compile(r"^\s*([^\s!=,()]+)\s*(==|!=|=)\s*([^\s!=,()]*)\s*$")
_REQ_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


def _split_selector(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def parse_label_selector(text):
    """-> list of predicates over a labels dict."""
    preds = []
    for req in _split_selector(text or ""):
        m = _REQ_SET.match(req)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                preds.append(lambda l, k=key, vs=vals: k in l and l[k] in vs)
            else:
                preds.append(lambda l, k=key, vs=vals: k not in l or l[k] not in vs)
            continue
        m = _REQ_OP.match(req)
        if m:
            key, op, val = m.group(1), m.group(2), m.group(3)
            if op == "!=":
                preds.append(lambda l, k=key, v=val: l.get(k) != v)
            else:
                preds.append(lambda l, k=key, v=val: k in l and l[k] == v)
            continue
        m = _REQ_EXISTS.match(req)
        if m:
            neg, key = m.group(1) == "!", m.group(2)
            preds.append((lambda l, k=key: k not in l) if neg else (lambda l, k=key: k in l))
            continue
        raise ApiError(400, "BadRequest", f"unable to parse requirement: {req!r}")
    return preds


FIELDS = {"metadata.name": lambda o: o["metadata"].get("name", ""),
          "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
          "spec.clusterIP": lambda o: o.get("spec", {}).get("clusterIP", ""),
          "spec.type": lambda o: o.get("spec", {}).get("type", "")}


def parse_field_selector(text):
    preds = []
    for req in _split_selector(text or ""):
        m = _REQ_OP.match(req)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {req!r}")
        key, op, val = m.groups()
        if key not in FIELDS:
            raise ApiError(400, "BadRequest",
                           f'"{key}" is not a known field selector: only "metadata.name", '
                           f'"metadata.namespace"')
        get = FIELDS[key]
        if op == "!=":
            preds.append(lambda o, g=get, v=val: g(o) != v)
        else:
            preds.append(lambda o, g=get, v=val: g(o) == v)
    return preds


class Filter:
    def __init__(self, res, namespace, label_selector, field_selector):
        self.res, self.namespace = res, namespace
        self.labels = parse_label_selector(label_selector)
        self.fields = parse_field_selector(field_selector)

    def match(self, res, obj):
        if obj is None or res != self.res:
            return False
        md = obj.get("metadata", {})
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        labels = md.get("labels") or {}
        return all(p(labels) for p in self.labels) and all(p(obj) for p in self.fields)


# ---- store ---------------------------------------------------------------------------------------

def _key(res, ns, name):
    return f"{res}/{ns or ''}/{name}"


class Store:
    """Objects, the global resourceVersion counter and the event history; every change is
    journalled (one JSON line, appended) in state_dir and compacted into snapshot.json."""

    def __init__(self, state_dir, history_max=10000, compact_every=2000):
        self.lock = threading.RLock()
        self.state_dir = state_dir
        self.history_max = history_max
        self.compact_every = compact_every
        self.objects = {}      # key -> object
        self.rv = 100          # last assigned resourceVersion
        self.floor = 100       # every event with rv > floor is in history
        self.history = []      # [{"rv", "res", "type", "obj", "old"}]
        self.watchers = set()
        self.journal_fd = None
        self.journal_len = 0
        if state_dir:
            os.makedirs(state_dir, exist_ok=True)
            self._load()
        else:
            self._seed()

    # -- persistence --
    def _snap_path(self):
        return os.path.join(self.state_dir, "snapshot.json")

    def _journal_path(self):
        return os.path.join(self.state_dir, "journal.jsonl")

    def _seed(self):
        for ns in ("default", "kube-system"):
            self.objects[_key("namespaces", None, ns)] = {
                "kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": ns, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                             "creationTimestamp": now_rfc3339(),
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def _load(self):
        try:
            with open(self._snap_path()) as f:
                snap = json.load(f)
            self.rv, self.floor = snap["rv"], snap["floor"]
            self.history = snap["history"]
            for o in snap["objects"]:
                self.objects[_key(o["res"], o["obj"]["metadata"].get("namespace"),
                                  o["obj"]["metadata"]["name"])] = o["obj"]
        except FileNotFoundError:
            self._seed()
        try:
            with open(self._journal_path(), "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if e["rv"] <= self.rv:
                continue  # already in the snapshot
            if e.get("op") == "expire":
                self.rv = self.floor = e["rv"]
                self.history = []
            else:
                self._apply(e)
        self._trim()
        self._compact()

    def _apply(self, e):
        md = e["obj"]["metadata"]
        k = _key(e["res"], md.get("namespace"), md["name"])
        if e["type"] == "DELETED":
            self.objects.pop(k, None)
        else:
            self.objects[k] = e["obj"]
        self.rv = e["rv"]
        self.history.append(e)

    def _trim(self):
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.floor = self.history[drop - 1]["rv"]
            del self.history[:drop]

    def _compact(self):
        if not self.state_dir:
            return
        snap = {"rv": self.rv, "floor": self.floor, "history": self.history,
                "objects": [{"res": k.split("/", 1)[0], "obj": o} for k, o in self.objects.items()]}
        tmp = self._snap_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(snap, f)
        os.replace(tmp, self._snap_path())
        if self.journal_fd is not None:
            os.close(self.journal_fd)
        self.journal_fd = os.open(self._journal_path(),
                                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.journal_len = 0

    def _journal(self, entry):
        if not self.state_dir:
            return
        os.write(self.journal_fd, (json.dumps(entry) + "\n").encode())
        self.journal_len += 1
        if self.journal_len >= self.compact_every:
            self._compact()

    # -- changes (callers hold self.lock) --
    def emit(self, res, type_, obj, old):
        """Record an event for obj (whose metadata.resourceVersion is already str(self.rv))."""
        e = {"rv": self.rv, "res": res, "type": type_, "obj": obj, "old": old}
        self._journal(e)
        self.history.append(e)
        self._trim()
        for w in list(self.watchers):
            w.offer(e)

    def expire(self):
        """Forget all history: resuming from any resourceVersion handed out so far gives 410."""
        self.rv += 1
        self.floor = self.rv
        self.history = []
        self._journal({"op": "expire", "rv": self.rv})
        for w in list(self.watchers):
            w.q.put(("expire", None))

    def next_rv(self):
        self.rv += 1
        return self.rv

    def create(self, res, k, obj):
        md = obj["metadata"]
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        md["generation"] = 1
        md.pop("deletionTimestamp", None)
        md["resourceVersion"] = str(self.next_rv())
        self.objects[k] = obj
        self.emit(res, "ADDED", obj, None)
        return obj

    def update(self, res, k, obj, old, dry_run=False):
        """-> the stored object (old itself for a no-op update: no new resourceVersion)."""
        md, om = obj["metadata"], old["metadata"]
        for f in ("uid", "creationTimestamp", "generation"):
            if f in om:
                md[f] = om[f]
        md["resourceVersion"] = om["resourceVersion"]
        if obj == old:
            return old
        if {f: v for f, v in obj.items() if f not in ("metadata", "status")} != \
                {f: v for f, v in old.items() if f not in ("metadata", "status")}:
            md["generation"] = om.get("generation", 1) + 1
        if dry_run:
            return obj
        md["resourceVersion"] = str(self.next_rv())
        self.objects[k] = obj
        self.emit(res, "MODIFIED", obj, old)
        return obj

    def delete(self, res, k):
        """-> the deleted object, carrying the resourceVersion of its deletion."""
        old = self.objects.pop(k)
        obj = copy.deepcopy(old)
        obj["metadata"]["resourceVersion"] = str(self.next_rv())
        self.emit(res, "DELETED", obj, old)
        return obj


# ---- the server ----------------------------------------------------------------------------------

class Knobs:
    def __init__(self):
        self.page_rv0 = False
        self.page_size = 0
        self.chunk_split = 0.0          # probability that an event is split over several chunks
        self.bookmark_interval = 1.0
        self.watch_expired_http = False  # 410 as the HTTP status instead of an ERROR event
        self.gzip = True                 # gzip large responses for Accept-Encoding: gzip
        self.fail = None                 # {"code", "count", "match", "retry_after"}
        self.hang = None                 # {"until", "count", "match", "then"}
        self.lock = threading.Lock()


class Watcher:
    def __init__(self, filt):
        self.filt = filt
        self.q = queue.Queue()

    def offer(self, e):
        """Called with the store lock held: translate a store event for this watch's filter."""
        res = e["res"]
        now = self.filt.match(res, e["obj"])
        if e["type"] == "ADDED":
            typ = "ADDED" if now else None
        elif e["type"] == "DELETED":
            typ = "DELETED" if now else None
        else:
            before = self.filt.match(res, e["old"])
            typ = ("MODIFIED" if before else "ADDED") if now else ("DELETED" if before else None)
            if typ == "DELETED":
                # the real API server sends the new object state in a DELETED it synthesises
                # for an object leaving the selector
                self.q.put(("event", {"type": "DELETED", "object": e["obj"]}))
                return
        if typ:
            self.q.put(("event", {"type": typ, "object": e["obj"]}))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    unix = False

    def __init__(self, addr, args):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.args = args
        self.store = Store(args.state_dir, args.history)
        self.knobs = Knobs()
        self.knobs.bookmark_interval = args.bookmark_interval
        self.knobs.chunk_split = args.chunk_split
        self.snapshots = {}  # continue-token id -> (rv, [(res, obj)])
        self.snap_lock = threading.Lock()
        self.ssl_ctx = None
        self.log_lock = threading.Lock()
        self.request_log = []
        self.log_file = open(os.path.join(args.state_dir, "requests.jsonl"), "a",
                             buffering=1) if args.state_dir else None
        self.started = time.time()
        self.closing = False
        if args.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
            if args.client_ca:
                ctx.load_verify_locations(args.client_ca)
                ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.set_alpn_protocols(["http/1.1"])
            self.ssl_ctx = ctx
        super().__init__(addr, Handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        # Not HTTPServer.server_bind: it resolves the bound address with getfqdn, a reverse DNS
        # query that hangs for seconds in a test namespace routed to a black hole.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port

    def finish_request(self, request, client_address):
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if self.ssl_ctx:
            request.settimeout(10)
            try:
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                self.log_request({"method": "-", "path": "-", "auth": "none", "status": 0,
                                  "tls_error": str(e)})
                return
            request.settimeout(None)
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            if self.ssl_ctx:
                try:
                    request.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        pass  # broken connections are normal here (disconnect knob, clients going away)

    def log_request(self, rec):
        rec = dict(rec, ts=round(time.time(), 3), run=os.getpid())
        with self.log_lock:
            self.request_log.append(rec)
            if self.log_file:
                self.log_file.write(json.dumps(rec) + "\n")

    def valid_tokens(self):
        toks = set()
        try:
            with open(self.args.tokens_file) as f:  # re-read on every request: rotation
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#"):
                        toks.add(line.split(",")[0].strip())
        except (OSError, TypeError):
            pass
        return toks


class UnixServer(socketserver.ThreadingUnixStreamServer):
    """The same API and /_test/ on a unix socket: reachable from any network namespace, and
    every request on it counts as the admin."""
    daemon_threads = True
    unix = True

    def __init__(self, path, main):
        self.main = main
        if os.path.exists(path):
            os.unlink(path)
        super().__init__(path, Handler)

    def __getattr__(self, name):
        return getattr(self.main, name)

    def handle_error(self, request, client_address):
        pass


def _human_age(ts):
    try:
        t = time.mktime(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    except (TypeError, ValueError):
        return "<unknown>"
    s = max(0, int(time.time() - t))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _table_columns(res, obj):
    spec = obj.get("spec", {})
    if res == "services":
        ports = ",".join(f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}"
                         f"/{p.get('protocol', 'TCP')}" for p in spec.get("ports", [])) or "<none>"
        ext = ",".join(spec.get("externalIPs", []) +
                       [i.get("ip") or i.get("hostname", "") for i in
                        obj.get("status", {}).get("loadBalancer", {}).get("ingress", [])])
        if spec.get("type") == "ExternalName":
            ext = spec.get("externalName", "")
        return [("Type", spec.get("type", "")), ("Cluster-IP", spec.get("clusterIP", "")),
                ("External-IP", ext or "<none>"), ("Port(s)", ports)]
    if res == "endpointslices":
        ports = ",".join(str(p.get("port")) for p in obj.get("ports") or []) or "<unset>"
        addrs = [a for e in obj.get("endpoints") or [] for a in e.get("addresses", [])]
        return [("AddressType", obj.get("addressType", "")), ("Ports", ports),
                ("Endpoints", ",".join(addrs[:3]) + (" + more..." if len(addrs) > 3 else "")
                 or "<unset>")]
    if res == "nodes":
        return [("Status", "Ready"), ("Roles", "<none>")]
    if res == "servicecidrs":
        return [("CIDRs", ",".join(spec.get("cidrs", [])))]
    if res == "namespaces":
        return [("Status", obj.get("status", {}).get("phase", "Active"))]
    return []


def make_table(res, objs, rv, include):
    sample = _table_columns(res, objs[0] if objs else {"spec": {}})
    cols = ([{"name": "Name", "type": "string", "format": "name", "description": "Name",
              "priority": 0}] +
            [{"name": n, "type": "string", "format": "", "description": n, "priority": 0}
             for n, _ in sample] +
            [{"name": "Age", "type": "string", "format": "", "description": "Age",
              "priority": 0}])
    rows = []
    for o in objs:
        cells = [o["metadata"]["name"]] + [v for _, v in _table_columns(res, o)] + \
                [_human_age(o["metadata"].get("creationTimestamp"))]
        row = {"cells": cells}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": str(rv)}, "columnDefinitions": cols, "rows": rows}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-test"
    sys_version = ""
    timeout = 600

    def log_message(self, fmt, *args):
        pass

    # -- plumbing --
    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline().strip():
                        pass
                    return body
                body += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code, obj, headers=None, ctype="application/json"):
        data = (json.dumps(obj) + "\n").encode() if not isinstance(obj, bytes) else obj
        self._log(code)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        if len(data) > GZIP_MIN and self.server.knobs.gzip and \
                "gzip" in self.headers.get("Accept-Encoding", ""):
            data = gzip.compress(data, 1)  # what the real server does for large responses
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        # headers and body in one write
        self._headers_buffer.append(b"\r\n" + (data if self.command != "HEAD" else b""))
        self.flush_headers()
        self._status = code

    def _log(self, code):
        """Log the request once, before its response goes out (a test that got the answer
        finds it in the log)."""
        if self._rec is not None:
            self.server.log_request(dict(self._rec, status=code))
            self._rec = None

    def _authenticate(self):
        """-> (auth kind or None, record fields)."""
        h = self.headers.get("Authorization", "")
        rec = {}
        tok = h[7:].strip() if h.lower().startswith("bearer ") else None
        if tok is not None:
            rec["token"] = tok
        cert = None
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                cert = self.connection.getpeercert()
            except (ValueError, OSError):
                cert = None
        if cert:
            subj = [x for rdn in cert.get("subject", ()) for x in rdn]
            rec["cn"] = next((v for k, v in subj if k == "commonName"), "")
            rec["groups"] = [v for k, v in subj if k == "organizationName"]
        if self.server.unix or (tok is not None and self.server.args.admin_token
                                and tok == self.server.args.admin_token):
            return "admin", rec
        if tok is not None and tok in self.server.valid_tokens():
            return "token", rec
        if cert:
            return "cert", rec
        if self.server.args.allow_anonymous and tok is None:
            return "anonymous", rec
        return None, rec

    # -- dispatch --
    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _dispatch(self):
        self._status = 0
        self._rec = None
        u = urllib.parse.urlsplit(self.path)
        self.q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        path = u.path.rstrip("/") or "/"
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        auth, rec = self._authenticate()
        rec = dict(rec, method=self.command, path=self.path, auth=auth or "none",
                   ua=self.headers.get("User-Agent", ""))
        if path.startswith("/_test/"):
            if auth != "admin":
                self._send(401, ApiError(401, "Unauthorized", "Unauthorized").status())
                return
            try:
                self._admin(path[len("/_test/"):], body)
            except ApiError as e:
                self._send(e.code, e.status())
            return
        rec["watch"] = self.q.get("watch") in ("true", "1")
        self._rec = rec
        try:
            if auth is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self._knobs(path)
            self._api(path, body, rec)
        except ApiError as e:
            self._send(e.code, e.status(), e.headers)
        except (BrokenPipeError, ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True

    def _knobs(self, path):
        if path in ("/version", "/healthz", "/livez", "/readyz"):
            return
        k = self.server.knobs
        hang = None
        with k.lock:
            if k.hang and time.time() < k.hang["until"] and k.hang["match"] in self.path:
                hang = k.hang
                if hang["count"] > 0:
                    hang["count"] -= 1
                    if hang["count"] == 0:
                        k.hang = None
            fail = k.fail
            if fail and fail["match"] in self.path and fail["count"] > 0:
                fail["count"] -= 1
                if fail["count"] == 0:
                    k.fail = None
            else:
                fail = None
        if hang:
            time.sleep(max(0.0, hang["until"] - time.time()))
            if hang["then"] == "close":
                self.close_connection = True
                raise ConnectionError("hang then close")
        if fail:
            code = fail["code"]
            reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                      410: "Expired", 403: "Forbidden", 401: "Unauthorized"}.get(code, "Unknown")
            hdr = {"Retry-After": fail.get("retry_after", 1)} if code in (429, 503) else {}
            raise ApiError(code, reason, f"injected failure {code}",
                           {"retryAfterSeconds": fail.get("retry_after", 1)} if hdr else None, hdr)

    # -- discovery and resources --
    def _api(self, path, body, rec):
        if path == "/version":
            return self._send(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.4",
                                    "gitCommit": "0" * 40, "gitTreeState": "clean",
                                    "buildDate": "2025-04-22T00:00:00Z", "goVersion": "go1.23.8",
                                    "compiler": "gc", "platform": "linux/amd64"})
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(200, b"ok", ctype="text/plain")
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [
                                        {"clientCIDR": "0.0.0.0/0",
                                         "serverAddress": self.server.args.bind}]})
        groups = sorted({g for g, *_ in RESOURCES.values() if g})
        if path == "/apis":
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                    "groups": [self._group(g) for g in groups]})
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2 and parts[1] == "v1":
            group, rest = "", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2 and parts[1] in groups:
            if len(parts) == 2:
                return self._send(200, dict(self._group(parts[1]), kind="APIGroup",
                                            apiVersion="v1"))
            if parts[2] != "v1":
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            group, rest = parts[1], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        gv = f"{group}/v1" if group else "v1"
        if not rest:
            return self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                    "groupVersion": gv, "resources": [
                                        {"name": r, "singularName": SINGULAR[r], "namespaced": d[3],
                                         "kind": d[2], "verbs": VERBS, "shortNames": d[4]}
                                        for r, d in RESOURCES.items() if d[0] == group]})
        if rest[0] == "watch":  # legacy /api/v1/watch/... paths
            rest = rest[1:]
            self.q["watch"] = "true"
            rec["watch"] = True
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        res = rest[0]
        if res not in RESOURCES or RESOURCES[res][0] != group or len(rest) > 2:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if ns is not None and not RESOURCES[res][3]:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) == 2 else None
        m = self.command
        if name is None:
            if m in ("GET", "HEAD"):
                if self.q.get("watch") in ("true", "1"):
                    return self._watch(res, ns)
                return self._list(res, ns)
            if m == "POST":
                return self._create(res, ns, body)
        else:
            if m in ("GET", "HEAD"):
                return self._get(res, ns, name)
            if m == "PUT":
                return self._update(res, ns, name, body)
            if m == "PATCH":
                return self._patch(res, ns, name, body)
            if m == "DELETE":
                return self._delete(res, ns, name, body)
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {res}")

    def _group(self, g):
        return {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}}

    def _wants_table(self):
        return "as=Table" in self.headers.get("Accept", "")

    def _filter(self, res, ns):
        return Filter(res, ns, self.q.get("labelSelector"), self.q.get("fieldSelector"))

    def _list(self, res, ns):
        srv, store = self.server, self.server.store
        cont = self.q.get("continue")
        limit = int(self.q.get("limit") or 0)
        k = srv.knobs
        if self.q.get("resourceVersion") == "0" and not k.page_rv0:
            limit = 0  # served from the watch cache: no paging
        elif k.page_size:
            limit = min(limit, k.page_size) if limit else k.page_size
        if cont:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont.encode()))
                sid, start = tok["id"], int(tok["start"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "invalid continue token")
            with srv.snap_lock:
                snap = srv.snapshots.get(sid)
            if snap is None:
                raise expired_status("The provided continue parameter is too old to display a "
                                     "consistent list result. You can start a new list without "
                                     "the continue parameter.")
            rv, items = snap
        else:
            filt = self._filter(res, ns)
            with store.lock:
                rv = store.rv
                items = sorted((o for kk, o in store.objects.items()
                                if kk.startswith(res + "/") and filt.match(res, o)),
                               key=lambda o: (o["metadata"].get("namespace", ""),
                                              o["metadata"]["name"]))
            sid, start = None, 0
        page = items[start:start + limit] if limit else items[start:]
        meta = {"resourceVersion": str(rv)}
        end = start + len(page)
        if limit and end < len(items):
            with srv.snap_lock:
                if sid is None:
                    sid = uuid.uuid4().hex[:12]
                    srv.snapshots[sid] = (rv, items)
                    while len(srv.snapshots) > 64:
                        srv.snapshots.pop(next(iter(srv.snapshots)))
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"id": sid, "start": end, "rv": rv}).encode()).decode()
            meta["remainingItemCount"] = len(items) - end
        if self._wants_table():
            t = make_table(res, page, rv, self.q.get("includeObject", "Metadata"))
            t["metadata"] = meta
            return self._send(200, t)
        kind = RESOURCES[res][2]
        return self._send(200, {"kind": f"{kind}List", "apiVersion": api_version(res),
                                "metadata": meta, "items": page})

    def _existing(self, res, ns, name):
        """-> (key, stored object); 404 when missing. The caller holds the store lock."""
        k = _key(res, ns, name)
        obj = self.server.store.objects.get(k)
        if obj is None:
            raise not_found(res, name)
        return k, obj

    @staticmethod
    def _conflict(res, name, why):
        return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res} "{name}": {why}',
                        {"name": name, "kind": res})

    def _get(self, res, ns, name):
        with self.server.store.lock:
            _, obj = self._existing(res, ns, name)
        if self._wants_table():
            return self._send(200, make_table(res, [obj], obj["metadata"]["resourceVersion"],
                                              self.q.get("includeObject", "Metadata")))
        return self._send(200, obj)

    def _parse_obj(self, res, ns, body, name=None):
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"invalid JSON body: {e}")
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body is not an object")
        group, ver, kind, namespaced, _ = RESOURCES[res]
        if obj.get("kind", kind) != kind or obj.get("apiVersion", api_version(res)) != api_version(res):
            raise ApiError(400, "BadRequest", f"the body is {obj.get('apiVersion')}/"
                                              f"{obj.get('kind')}, expected {api_version(res)}/{kind}")
        obj["kind"], obj["apiVersion"] = kind, api_version(res)
        md = obj.setdefault("metadata", {})
        if namespaced:
            if md.get("namespace") and ns and md["namespace"] != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                                                  "match the namespace sent on the request")
            md["namespace"] = ns or md.get("namespace") or "default"
        else:
            md.pop("namespace", None)
        if name is not None and md.get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name "
                                              "on the URL")
        if name is not None:
            md["name"] = name
        return obj

    def _defaults(self, res, obj, old=None):
        if res == "events":
            errs = validate_event(obj, old)
            if errs:
                raise ApiError(422, "Invalid", "Event.events.k8s.io \"" + obj["metadata"].get("name", "") +
                               "\" is invalid: " + "; ".join(errs))
            return
        if res != "services":
            if res == "endpointslices":
                for p in obj.get("ports") or []:
                    p.setdefault("protocol", "TCP")
            return
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        if spec["type"] == "ExternalName":
            return
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if old is not None and not spec.get("clusterIP"):
            for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if f in old.get("spec", {}):
                    spec[f] = old["spec"][f]
        if not spec.get("clusterIP"):
            spec["clusterIP"] = self._alloc_ip()
        if not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        if not spec.get("ipFamilies"):
            fams = []
            for ip in spec["clusterIPs"]:
                try:
                    fams.append("IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4")
                except ValueError:
                    fams.append("IPv4")
            spec["ipFamilies"] = fams
        spec.setdefault("ipFamilyPolicy", "RequireDualStack" if len(spec["clusterIPs"]) > 1
                        else "SingleStack")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
            used = {p.get("nodePort") for o in self.server.store.objects.values()
                    for p in o.get("spec", {}).get("ports") or [] if isinstance(p, dict)}
            nxt = 30000
            for p in spec.get("ports") or []:
                if not p.get("nodePort"):
                    while nxt in used:
                        nxt += 1
                    p["nodePort"] = nxt
                    used.add(nxt)

    def _alloc_ip(self):
        used = {o.get("spec", {}).get("clusterIP") for o in self.server.store.objects.values()}
        for i in range(10, 65534):
            ip = str(ipaddress.ip_address("10.96.0.0") + i)
            if ip not in used:
                return ip
        raise ApiError(500, "InternalError", "no free cluster IP")

    def _create(self, res, ns, body):
        obj = self._parse_obj(res, ns, body)
        md = obj["metadata"]
        if not md.get("name"):
            if md.get("generateName"):
                md["name"] = md["generateName"] + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
                                                          for _ in range(5))
            else:
                raise ApiError(422, "Invalid", "metadata.name: Required value: name or "
                                               "generateName is required")
        store = self.server.store
        with store.lock:
            k = _key(res, md.get("namespace"), md["name"])
            if k in store.objects:
                raise ApiError(409, "AlreadyExists",
                               f'{res} "{md["name"]}" already exists',
                               {"name": md["name"], "kind": res})
            self._defaults(res, obj)
            if not self.q.get("dryRun"):
                store.create(res, k, obj)
        return self._send(201, obj)

    def _store_update(self, res, ns, name, obj, check_rv):
        store = self.server.store
        with store.lock:
            k, old = self._existing(res, ns, name)
            md = obj["metadata"]
            if check_rv and md.get("resourceVersion") and \
                    md["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise self._conflict(res, name, "the object has been modified; please apply your "
                                                "changes to the latest version and try again")
            self._defaults(res, obj, old)
            return store.update(res, k, obj, old, bool(self.q.get("dryRun")))

    def _update(self, res, ns, name, body):
        obj = self._parse_obj(res, ns, body, name)
        return self._send(200, self._store_update(res, ns, name, obj, True))

    def _patch(self, res, ns, name, body):
        ctype = self.headers.get("Content-Type", "")
        if "json-patch+json" in ctype or "apply-patch" in ctype:
            raise ApiError(415, "UnsupportedMediaType", f"patch type {ctype} is not supported")
        try:
            patch = json.loads(body)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"invalid patch: {e}")
        with self.server.store.lock:
            _, old = self._existing(res, ns, name)
            obj = merge_patch(copy.deepcopy(old), patch)
            obj["metadata"]["name"] = name
            check = "resourceVersion" in (patch.get("metadata") or {})
            return self._send(200, self._store_update(res, ns, name, obj, check))

    def _delete(self, res, ns, name, body):
        opts = {}
        if body.strip():
            try:
                opts = json.loads(body)
            except ValueError:
                opts = {}
        pre = (opts or {}).get("preconditions") or {}
        store = self.server.store
        with store.lock:
            k, old = self._existing(res, ns, name)
            om = old["metadata"]
            if (pre.get("resourceVersion") and pre["resourceVersion"] != om["resourceVersion"]) or \
                    (pre.get("uid") and pre["uid"] != om.get("uid")):
                raise self._conflict(res, name, "precondition failed")
            obj = old if self.q.get("dryRun") else store.delete(res, k)
        return self._send(200, obj)

    # -- watch --
    def _watch(self, res, ns):
        srv, store, k = self.server, self.server.store, self.server.knobs
        filt = self._filter(res, ns)
        rv_param = self.q.get("resourceVersion", "")
        bookmarks = self.q.get("allowWatchBookmarks") in ("true", "1")
        initial = self.q.get("sendInitialEvents") in ("true", "1")
        try:
            timeout = float(self.q.get("timeoutSeconds") or 0)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds")
        if timeout <= 0:
            timeout = srv.args.watch_timeout
        kind, apiv = RESOURCES[res][2], api_version(res)
        w = Watcher(filt)
        expired = False
        with store.lock:
            if rv_param in ("", "0") or initial:
                objs = sorted((o for kk, o in store.objects.items()
                               if kk.startswith(res + "/") and filt.match(res, o)),
                              key=lambda o: (o["metadata"].get("namespace", ""),
                                             o["metadata"]["name"]))
                for o in objs:
                    w.q.put(("event", {"type": "ADDED", "object": o}))
                if initial:
                    w.q.put(("event", {"type": "BOOKMARK", "object": {
                        "kind": kind, "apiVersion": apiv,
                        "metadata": {"resourceVersion": str(store.rv),
                                     "annotations": {"k8s.io/initial-events-end": "true"}}}}))
            else:
                try:
                    r = int(rv_param)
                except ValueError:
                    raise ApiError(400, "BadRequest", f"invalid resource version {rv_param!r}")
                if r < store.floor:
                    if k.watch_expired_http:
                        raise expired_status(f"too old resource version: {r} ({store.floor})")
                    expired = True
                else:
                    for e in store.history:
                        if e["rv"] > r:
                            w.offer(e)
            if not expired:
                store.watchers.add(w)
                w.path = self.path
        try:
            self._log(200)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._status = 200
            if expired:
                self._chunk(json.dumps({"type": "ERROR", "object": expired_status(
                    f"too old resource version: {rv_param} ({store.floor})").status()}).encode()
                            + b"\n")
                self._chunk(b"")
                return
            self._watch_loop(w, timeout, bookmarks, kind, apiv)
        finally:
            with store.lock:
                store.watchers.discard(w)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch_loop(self, w, timeout, bookmarks, kind, apiv):
        srv, store, k = self.server, self.server.store, self.server.knobs
        deadline = time.monotonic() + timeout
        next_bm = time.monotonic() + k.bookmark_interval if bookmarks else None
        pending = b""
        rnd = random.Random()
        paused = 0
        while True:
            if pending and w.q.empty():
                self._chunk(pending)
                pending = b""
            now = time.monotonic()
            wait = deadline - now
            if next_bm is not None:
                wait = min(wait, next_bm - now)
            try:
                item, arg = w.q.get(timeout=max(0.0, wait))
            except queue.Empty:
                now = time.monotonic()
                if now >= deadline:
                    if pending:
                        self._chunk(pending)
                    self._chunk(b"")  # clean end of the stream
                    return
                if next_bm is not None and now >= next_bm:
                    with store.lock:  # queued behind every event up to this rv
                        w.q.put(("bookmark", store.rv))
                    next_bm = now + k.bookmark_interval
                continue
            if item == "bookmark":
                if not bookmarks:
                    continue
                item, arg = "event", {"type": "BOOKMARK", "object": {
                    "kind": kind, "apiVersion": apiv, "metadata": {"resourceVersion": str(arg)}}}
            if item == "event":
                pending += json.dumps(arg).encode() + b"\n"
                if k.chunk_split and rnd.random() < k.chunk_split and len(pending) > 2:
                    # cut this event (and whatever is pending) into pieces sent as separate
                    # chunks with a pause in between, and sometimes keep the tail for the next
                    cuts = sorted(rnd.sample(range(1, len(pending)), min(3, len(pending) - 1)))
                    pieces = [pending[a:b] for a, b in zip([0] + cuts, cuts + [len(pending)])]
                    keep = pieces.pop() if (rnd.random() < 0.5 and not w.q.empty()) else b""
                    for i, p in enumerate(pieces):
                        self._chunk(p)
                        if i == 0 and paused < 20:  # so the pieces arrive in separate reads
                            paused += 1
                            time.sleep(0.002)
                    pending = keep
                elif len(pending) > 65536:
                    self._chunk(pending)
                    pending = b""
            elif item == "expire":
                if pending:
                    self._chunk(pending)
                self._chunk(json.dumps({"type": "ERROR", "object": expired_status(
                    "too old resource version: history expired").status()}).encode() + b"\n")
                self._chunk(b"")
                return
            elif item == "close":
                if pending:
                    self._chunk(pending)
                self._chunk(b"")
                self.close_connection = True
                return
            elif item == "disconnect":
                if pending:
                    self._chunk(pending)
                if arg:  # midevent: the first half of an event, then the reset
                    with store.lock:
                        half = json.dumps({"type": "BOOKMARK", "object": {
                            "kind": kind, "apiVersion": apiv,
                            "metadata": {"resourceVersion": str(store.rv)}}}).encode()
                    self._chunk(half[:len(half) // 2])
                self._reset()
                return

    def _reset(self):
        """Close the connection abruptly: no terminating chunk, TCP RST."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.rfile.close()
            sock = self.connection
            if isinstance(sock, ssl.SSLSocket):
                # close the fd below the TLS layer without a close_notify
                os.close(sock.detach())
            else:
                sock.close()
        except OSError:
            pass
        raise ConnectionAbortedError("disconnect knob")

    # -- admin --
    def _admin(self, action, body):
        srv, store, k = self.server, self.server.store, self.server.knobs
        try:
            args = json.loads(body) if body.strip() else {}
        except ValueError:
            raise ApiError(400, "BadRequest", "admin body must be JSON")
        if action == "requests":
            with srv.log_lock:
                return self._send(200, {"requests": list(srv.request_log)})
        if action == "clear_requests":
            with srv.log_lock:
                srv.request_log.clear()
            return self._send(200, {})
        if action == "state":
            with store.lock:
                return self._send(200, {
                    "resourceVersion": str(store.rv), "floor": str(store.floor),
                    "history": len(store.history), "objects": len(store.objects),
                    "watches": sorted(getattr(w, "path", "") for w in store.watchers),
                    "pid": os.getpid()})
        if action == "objects":
            with store.lock:
                return self._send(200, {"objects": [
                    {"resource": kk.split("/", 1)[0], "object": o}
                    for kk, o in sorted(store.objects.items())]})
        if action == "expire":
            with store.lock:
                store.expire()
            with srv.snap_lock:
                srv.snapshots.clear()
            return self._send(200, {"resourceVersion": str(store.rv)})
        if action == "disconnect":
            with store.lock:
                n = len(store.watchers)
                for w in store.watchers:
                    w.q.put(("disconnect", bool(args.get("midevent"))))
            return self._send(200, {"watches": n})
        if action == "close_watches":
            with store.lock:
                n = len(store.watchers)
                for w in store.watchers:
                    w.q.put(("close", None))
            return self._send(200, {"watches": n})
        if action == "bookmark":
            with store.lock:
                for w in store.watchers:
                    w.q.put(("bookmark", store.rv))
                return self._send(200, {"resourceVersion": str(store.rv)})
        if action == "fail":
            with k.lock:
                k.fail = {"code": int(args.get("code", 500)), "count": int(args.get("count", 1)),
                          "match": args.get("match", ""),
                          "retry_after": int(args.get("retry_after", 1))}
                if k.fail["count"] <= 0:
                    k.fail = None
            return self._send(200, {})
        if action == "hang":
            with k.lock:
                secs = float(args.get("seconds", 5))
                k.hang = {"until": time.time() + secs, "count": int(args.get("count", 0)),
                          "match": args.get("match", ""), "then": args.get("then", "serve")}
                if secs <= 0:
                    k.hang = None
            return self._send(200, {})
        if action == "page_rv0":
            k.page_rv0 = bool(args.get("on", True))
            return self._send(200, {})
        if action == "set_page_size":
            k.page_size = int(args.get("size", 0))
            return self._send(200, {})
        if action == "set":
            names = ("page_rv0", "page_size", "chunk_split", "bookmark_interval",
                     "watch_expired_http", "gzip")
            for name in names:
                if name in args:
                    setattr(k, name, type(getattr(k, name))(args[name]))
            return self._send(200, {n: getattr(k, n) for n in names})
        if action in ("put", "remove"):
            return self._send(200, {"resourceVersion": self._admin_write(action, args)})
        raise ApiError(404, "NotFound", f"unknown admin action {action!r}")

    def _admin_write(self, action, args):
        """Create-or-replace (put) or delete (remove) objects straight in the store."""
        store = self.server.store
        by_kind = {(api_version(r), d[2]): r for r, d in RESOURCES.items()}
        with store.lock:
            for o in args.get("objects", []):
                res = by_kind.get((o.get("apiVersion"), o.get("kind")))
                if res is None:
                    raise ApiError(400, "BadRequest", f"unknown kind {o.get('kind')}")
                o = copy.deepcopy(o)
                md = o.setdefault("metadata", {})
                if RESOURCES[res][3]:
                    md.setdefault("namespace", "default")
                else:
                    md.pop("namespace", None)
                kk = _key(res, md.get("namespace"), md["name"])
                old = store.objects.get(kk)
                if action == "remove":
                    if old is not None:
                        store.delete(res, kk)
                    continue
                self._defaults(res, o, old)
                if old is None:
                    store.create(res, kk, o)
                else:
                    store.update(res, kk, o, old)
            return str(store.rv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--state-dir", default=None, help="persistence; none = in memory only")
    ap.add_argument("--tokens-file", default=None, help="valid bearer tokens, one a line "
                    "(or token,user,uid,... CSV); re-read on every request")
    ap.add_argument("--admin-token", default=None, help="bearer token for /_test/ (and the API)")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="CA for client certificates (optional client auth)")
    ap.add_argument("--allow-anonymous", action="store_true",
                    help="requests without credentials are allowed (like the old insecure port)")
    ap.add_argument("--admin-socket", default=None,
                    help="also serve (as the admin, no token) on this unix socket")
    ap.add_argument("--history", type=int, default=10000, help="events kept for watch resumption")
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--chunk-split", type=float, default=0.0,
                    help="probability that a watch event is split over several HTTP chunks")
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="watch length when the request has no timeoutSeconds")
    args = ap.parse_args()

    srv = Server((args.bind, args.port), args)
    scheme = "https" if srv.ssl_ctx else "http"
    host = f"[{args.bind}]" if ":" in args.bind else args.bind

    def on_term(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if args.admin_socket:
        usrv = UnixServer(args.admin_socket, srv)
        threading.Thread(target=usrv.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
    print(f"listening on {scheme}://{host}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.1)
    except SystemExit:
        pass
    # graceful: end every open watch with its terminating chunk, then go
    with srv.store.lock:
        ws = list(srv.store.watchers)
        for w in ws:
            w.q.put(("close", None))
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        with srv.store.lock:
            if not srv.store.watchers:
                break
        time.sleep(0.01)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

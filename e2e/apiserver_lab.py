"""The test Kubernetes API server (kube_apiserver.py) for e2e tests: certificates, tokens,
kubeconfigs, in-cluster files, kubectl, test knobs and the request log.

    api = ApiServer(lab)                 # runs in lab.node, on 127.0.0.1:<ephemeral port> there
    api.put([service(...), endpoint_slice(...), node_object()])   # straight into the store
    d = lab.start_daemon([f"--kubeconfig={api.kubeconfig_token(lab.tmp + '/kc')}"])
    api.expire(); api.disconnect(); api.restart(); api.requests() ...

The server runs as a subprocess inside a network namespace (ns=None: the host's); the test
process talks to its admin endpoint over a unix socket in the temp dir, which works from any
namespace. Every process started here is killed by PID (its own session) in stop()/close(), and
also by Lab.close() when a lab is given.
"""
import atexit
import base64
import ctypes
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import netlab
from netlab import LabError, PY, _kill_group, _readline, to_yaml

SERVER = os.path.join(netlab.HERE, "kube_apiserver.py")
KUBECTL = os.environ.get("KPN_KUBECTL", "/usr/bin/kubectl")
CLIENT_CN, CLIENT_O = "system:kube-proxy", "system:node-proxier"


# ---- certificates --------------------------------------------------------------------------------

def _openssl(*args, cwd):
    p = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        raise LabError(f"openssl {' '.join(args)} failed: {p.stderr}")


def _ca(d, name, cn):
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=d)
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-days", "3650",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             "-out", f"{name}.crt", cwd=d)


def _leaf(d, name, ca, subj, ext):
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=d)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subj, "-out", f"{name}.csr", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" + ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "365", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
             cwd=d)


def make_pki(d):
    """ECDSA P-256 certificates in d (once; reused when d already has them):
    ca.crt/key (server CA), server.crt/key (SANs 127.0.0.1, ::1, localhost,
    kubernetes.default.svc), client-ca.crt/key, client.crt/key (CN=system:kube-proxy,
    O=system:node-proxier, signed by client-ca), wrong-ca.crt/key and wrong-client.crt/key
    (a CA nobody trusts, and a client certificate it signed)."""
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "wrong-client.crt")):
        return d
    _ca(d, "ca", "kpn-test-ca")
    _leaf(d, "server", "ca", "/CN=kube-apiserver",
          "extendedKeyUsage=serverAuth\n"
          "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kubernetes.default.svc,"
          "DNS:kubernetes.default.svc.cluster.local,DNS:kubernetes\n")
    _ca(d, "client-ca", "kpn-test-client-ca")
    _leaf(d, "client", "client-ca", f"/O={CLIENT_O}/CN={CLIENT_CN}",
          "extendedKeyUsage=clientAuth\n")
    _ca(d, "wrong-ca", "kpn-test-wrong-ca")
    _leaf(d, "wrong-client", "wrong-ca", f"/O={CLIENT_O}/CN={CLIENT_CN}",
          "extendedKeyUsage=clientAuth\n")
    return d


def _write_atomic(path, text, mode=0o600):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def _pdeathsig():
    """Child side: die with the test process even if it is SIGKILLed."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def strip_server_fields(obj):
    """A manifest as a user writes it: no resourceVersion/uid/creationTimestamp (a set
    resourceVersion makes `kubectl replace` an optimistic-concurrency update)."""
    obj = json.loads(json.dumps(obj))
    md = obj.get("metadata", {})
    for f in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        md.pop(f, None)
    return obj


def _ident(obj):
    md = obj.get("metadata", {})
    ns = md.get("namespace", "default") if obj.get("kind") in ("Service", "EndpointSlice") else ""
    return obj.get("kind"), ns, md.get("name")


# ---- the server ----------------------------------------------------------------------------------

class ApiServer:
    """kube_apiserver.py in network namespace `ns` (default: lab.node; None: the host's)."""

    _DEFAULT = object()

    def __init__(self, lab=None, ns=_DEFAULT, tls=True, anonymous=None, chunk_split=0.3,
                 bookmark_interval=1.0, history=10000, bind="127.0.0.1", extra_args=(),
                 label="apiserver", start=True):
        self.lab = lab
        self.ns = (lab.node if lab else None) if ns is ApiServer._DEFAULT else ns
        self.tls = tls
        self.anonymous = (not tls) if anonymous is None else anonymous
        self.bind = bind
        self.label = label
        self.opts = ["--chunk-split", str(chunk_split), "--bookmark-interval",
                     str(bookmark_interval), "--history", str(history)] + list(extra_args)
        self.own_tmp = lab is None
        base = lab.tmp if lab else tempfile.mkdtemp(prefix="kpn-apiserver-")
        self.tmp = tempfile.mkdtemp(prefix=f"{label}-", dir=base)
        self.pki = make_pki(os.path.join(base, "apiserver-pki"))
        self.ca = os.path.join(self.pki, "ca.crt")
        self.state_dir = os.path.join(self.tmp, "state")
        self.sock_path = os.path.join(self.tmp, "admin.sock")
        self.tokens_file = os.path.join(self.tmp, "tokens")
        self.admin_token = "admin-" + secrets.token_hex(8)
        self.token = "kp-" + secrets.token_hex(12)   # the daemon's current token
        self.extra_tokens = []
        self.token_file = os.path.join(self.tmp, "token")  # tokenFile users share this file
        self.sa_dir = os.path.join(self.tmp, "serviceaccount")
        self._write_tokens()
        _write_atomic(self.token_file, self.token + "\n")
        self.kubectl_home = os.path.join(self.tmp, "kubectl-home")
        os.makedirs(self.kubectl_home, exist_ok=True)
        self.port = 0
        self.proc = None
        self.procs = []
        self.runs = []     # stderr log per start
        self.closed = False
        if self.own_tmp:
            atexit.register(self.close)
        if start:
            self.start()

    # -- process --
    @property
    def host(self):
        return f"[{self.bind}]" if ":" in self.bind else self.bind

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self):
        if self.alive():
            raise LabError("apiserver already running")
        args = [PY, "-u", SERVER, "--bind", self.bind, "--port", str(self.port),
                "--state-dir", self.state_dir, "--tokens-file", self.tokens_file,
                "--admin-token", self.admin_token, "--admin-socket", self.sock_path] + self.opts
        if self.tls:
            args += ["--tls-cert", os.path.join(self.pki, "server.crt"),
                     "--tls-key", os.path.join(self.pki, "server.key"),
                     "--client-ca", os.path.join(self.pki, "client-ca.crt")]
        if self.anonymous:
            args.append("--allow-anonymous")
        if self.ns:
            args = ["ip", "netns", "exec", self.ns] + args
        log = os.path.join(self.tmp, f"run{len(self.runs) + 1}.stderr")
        self.runs.append(log)
        with open(log, "w") as ferr:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=ferr, text=True, start_new_session=True,
                                         preexec_fn=_pdeathsig)
        self.procs.append(self.proc)
        if self.lab:
            self.lab.procs.append(self.proc)
        line = _readline(self.proc.stdout, 10)
        if not line or not line.startswith("listening on "):
            err = self.stderr()
            _kill_group(self.proc)
            raise LabError(f"apiserver did not start: {line!r}\n{err[-3000:]}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self, run=-1):
        try:
            with open(self.runs[run], errors="replace") as f:
                return f.read()
        except (OSError, IndexError):
            return ""

    def stop(self):
        """SIGTERM: open watches get their terminating chunk, then the process exits."""
        if self.alive():
            _kill_group(self.proc, signal.SIGTERM)  # SIGKILL after 5 s

    def kill9(self):
        if self.alive():
            _kill_group(self.proc, signal.SIGKILL)

    def restart(self, kill=False):
        """Stop (SIGTERM, or SIGKILL with kill=True) and start again on the same port with the
        same state dir: objects, resourceVersions and watch history survive."""
        self.kill9() if kill else self.stop()
        deadline = time.monotonic() + 5
        while True:
            try:
                return self.start()
            except LabError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for p in self.procs:
            _kill_group(p)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        if self.own_tmp:
            shutil.rmtree(os.path.dirname(self.tmp), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- admin endpoint (unix socket) --
    def admin(self, action, method="POST", timeout=10, **args):
        conn = _UnixConnection(self.sock_path, timeout)
        try:
            body = json.dumps(args).encode() if method != "GET" else None
            conn.request(method, f"/_test/{action}", body=body,
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
        finally:
            conn.close()
        if r.status != 200:
            raise LabError(f"admin {action}: {r.status} {data[:500]!r}")
        return json.loads(data)

    def expire(self):
        """Drop the whole event history (and continue tokens); open watches get ERROR 410 and
        end; resuming from any resourceVersion seen so far gives 410. -> the new current RV."""
        return self.admin("expire")["resourceVersion"]

    def disconnect(self, midevent=False):
        """Reset every open watch connection (no terminating chunk, TCP RST). -> how many."""
        return self.admin("disconnect", midevent=midevent)["watches"]

    def close_watches(self):
        """End every open watch cleanly (terminating chunk), like a timeoutSeconds expiry."""
        return self.admin("close_watches")["watches"]

    def fail(self, code, count=1, match="", retry_after=1):
        """The next `count` API requests whose path+query contains `match` answer `code`."""
        self.admin("fail", code=code, count=count, match=match, retry_after=retry_after)

    def hang(self, seconds, count=0, match="", then="serve"):
        """API requests arriving in the next `seconds` (only the next `count` if > 0) wait until
        then and are served (then="serve") or have their connection closed (then="close")."""
        self.admin("hang", seconds=seconds, count=count, match=match, then=then)

    def bookmark(self):
        return self.admin("bookmark")["resourceVersion"]

    def page_rv0(self, on=True):
        self.admin("page_rv0", on=on)

    def set_page_size(self, n):
        self.admin("set_page_size", size=n)

    def set(self, **knobs):
        """page_rv0, page_size, chunk_split (probability), bookmark_interval (s),
        watch_expired_http (410 as the watch's HTTP status instead of an ERROR event)."""
        return self.admin("set", **knobs)

    def state(self):
        """{"resourceVersion", "floor", "history", "objects", "watches": [paths], "pid"}."""
        return self.admin("state", method="GET")

    def resource_version(self):
        return self.state()["resourceVersion"]

    def watches(self, match=""):
        return [w for w in self.state()["watches"] if match in w]

    def wait_watches(self, n, match="", timeout=10.0):
        """Wait until at least n watches whose path contains `match` are open."""
        deadline = time.monotonic() + timeout
        while True:
            ws = self.watches(match)
            if len(ws) >= n:
                return ws
            if time.monotonic() > deadline:
                raise LabError(f"timed out waiting for {n} watches matching {match!r}: {ws}\n"
                               f"{self.summary()}")
            time.sleep(0.05)

    def put(self, objs):
        """Create-or-replace objects straight in the store (no kubectl). -> current RV."""
        return self.admin("put", objects=list(objs))["resourceVersion"]

    def remove(self, objs):
        """Delete objects straight from the store (missing ones are skipped). -> current RV."""
        return self.admin("remove", objects=list(objs))["resourceVersion"]

    def objects(self):
        """[(resource plural, object)] currently stored."""
        return [(o["resource"], o["object"]) for o in self.admin("objects", method="GET")["objects"]]

    def events(self, reason=None):
        """The Events the daemon recorded (events.k8s.io/v1, as stored: series and all), oldest
        first; only those with `reason` when given."""
        evs = [o for r, o in self.objects() if r == "events" and (reason is None or o.get("reason") == reason)]
        return sorted(evs, key=lambda e: e.get("eventTime", ""))

    def wait_events(self, reason, n=1, pred=None, timeout=20.0):
        """Wait until at least n Events with `reason` (and pred(event) true) are stored; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            got = [e for e in self.events(reason) if pred is None or pred(e)]
            if len(got) >= n:
                return got
            if time.monotonic() > deadline:
                raise LabError(f"timed out waiting for {n} {reason} events; have: "
                               f"{[(e.get('reason'), e.get('series')) for e in self.events()]}\n{self.summary()}")
            time.sleep(0.05)

    # -- request log --
    def requests(self, since=0, include_admin=False):
        """The request log of every run, oldest first: dicts with method, path (with query),
        watch, status, auth ("token"|"cert"|"admin"|"anonymous"|"none"), token (the bearer
        token presented, if any), cn/groups (client certificate), ua, ts, run (server pid).
        TLS handshake failures appear as method "-" with tls_error. kubectl's requests (the
        admin token) are left out unless include_admin. `since`: a mark()."""
        out = []
        try:
            with open(os.path.join(self.state_dir, "requests.jsonl")) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines[since:]:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if include_admin or r.get("auth") != "admin":
                out.append(r)
        return out

    def mark(self):
        """A position in the request log for requests(since=...)."""
        try:
            with open(os.path.join(self.state_dir, "requests.jsonl")) as f:
                return len(f.read().splitlines())
        except FileNotFoundError:
            return 0

    def wait_request(self, pred, since=0, timeout=10.0):
        """Wait for a logged request with pred(rec) true; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            for r in self.requests(since):
                if pred(r):
                    return r
            if time.monotonic() > deadline:
                raise LabError(f"timed out waiting for a request; saw:\n{self.summary(since)}")
            time.sleep(0.05)

    def summary(self, since=0):
        return "\n".join(f"{r['method']} {r['path']} -> {r['status']} ({r['auth']})"
                         for r in self.requests(since))[-4000:]

    # -- tokens --
    def _write_tokens(self):
        _write_atomic(self.tokens_file, "\n".join([self.token] + self.extra_tokens) + "\n")

    def add_token(self, token):
        """Another valid bearer token (e.g. a second client)."""
        self.extra_tokens.append(token)
        self._write_tokens()

    def rotate_token(self, new=None, revoke_old=True):
        """Make `new` the daemon's token: valid at once, written to the shared token file and
        the service-account dir (atomic renames); the old one is rejected (401) afterwards
        unless revoke_old=False. -> the new token."""
        new = new or "kp-" + secrets.token_hex(12)
        old = self.token
        self.extra_tokens.append(new)
        self._write_tokens()
        _write_atomic(self.token_file, new + "\n")
        if os.path.isdir(self.sa_dir):
            _write_atomic(os.path.join(self.sa_dir, "token"), new)
        self.extra_tokens.remove(new)
        self.token = new
        if not revoke_old:
            self.extra_tokens.append(old)
        self._write_tokens()
        return new

    # -- kubeconfigs --
    def _kubeconfig(self, path, user, ca=None, inline_ca=False, insecure=False, server=None):
        cluster = {"server": server or self.url}
        if self.tls:
            ca = ca or self.ca
            if insecure:
                cluster["insecure-skip-tls-verify"] = True
            elif inline_ca:
                cluster["certificate-authority-data"] = _b64file(ca)
            else:
                cluster["certificate-authority"] = ca
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "kpn",
               "clusters": [{"name": "kpn", "cluster": cluster}],
               "contexts": [{"name": "kpn", "context": {"cluster": "kpn", "user": "kpn",
                                                        "namespace": "default"}}],
               "users": [{"name": "kpn", "user": user}], "preferences": {}}
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        _write_atomic(path, to_yaml(cfg))
        return path

    def kubeconfig_token(self, path, token=None, token_file=False, inline_ca=False,
                         insecure=False, server=None):
        """Bearer-token kubeconfig: `token: <token or the daemon's>`, or with token_file=True
        `tokenFile:` the shared token file that rotate_token() rewrites."""
        user = {"tokenFile": self.token_file} if token_file else {"token": token or self.token}
        return self._kubeconfig(path, user, inline_ca=inline_ca, insecure=insecure, server=server)

    def kubeconfig_client_cert(self, path, inline_data=False, wrong=False):
        """Client-certificate kubeconfig (CN=system:kube-proxy, O=system:node-proxier); paths or,
        with inline_data, client-certificate-data/client-key-data/certificate-authority-data.
        wrong=True: a certificate from a CA the server does not trust."""
        crt = os.path.join(self.pki, "wrong-client.crt" if wrong else "client.crt")
        key = os.path.join(self.pki, "wrong-client.key" if wrong else "client.key")
        if inline_data:
            user = {"client-certificate-data": _b64file(crt), "client-key-data": _b64file(key)}
        else:
            user = {"client-certificate": crt, "client-key": key}
        return self._kubeconfig(path, user, inline_ca=inline_data)

    def kubeconfig_wrong_ca(self, path):
        """Token kubeconfig whose certificate-authority did not sign the server certificate."""
        return self._kubeconfig(path, {"token": self.token},
                                ca=os.path.join(self.pki, "wrong-ca.crt"))

    def kubeconfig_admin(self, path=None):
        return self.kubeconfig_token(path or os.path.join(self.tmp, "admin.kubeconfig"),
                                     token=self.admin_token)

    def incluster_env(self, namespace="kube-system"):
        """-> (env, sa_dir): KUBERNETES_SERVICE_HOST/PORT for this server and a service-account
        dir with token (the daemon's, kept current by rotate_token), ca.crt and namespace.
        Pass --service-account-dir=<sa_dir> to the daemon."""
        os.makedirs(self.sa_dir, exist_ok=True)
        _write_atomic(os.path.join(self.sa_dir, "token"), self.token)
        shutil.copyfile(self.ca, os.path.join(self.sa_dir, "ca.crt"))
        _write_atomic(os.path.join(self.sa_dir, "namespace"), namespace)
        return ({"KUBERNETES_SERVICE_HOST": self.bind, "KUBERNETES_SERVICE_PORT": str(self.port)},
                self.sa_dir)

    # -- kubectl --
    def kubectl(self, *args, input=None, check=True, timeout=30, kubeconfig=None):
        """kubectl (the admin kubeconfig unless given, its own cache dir/HOME) in the server's
        namespace; -> stdout; raises LabError with stderr on failure (check=False: -> the
        CompletedProcess)."""
        kc = kubeconfig or self.kubeconfig_admin()
        cmd = [KUBECTL, f"--kubeconfig={kc}",
               f"--cache-dir={os.path.join(self.kubectl_home, 'cache')}"] + list(args)
        if self.ns:
            cmd = ["ip", "netns", "exec", self.ns] + cmd
        env = {"HOME": self.kubectl_home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "KUBECONFIG": kc}
        p = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout,
                           env=env)
        if check and p.returncode != 0:
            raise LabError(f"kubectl {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
        return p.stdout if check else p

    def _kubectl_file(self, verb, objs, *flags):
        objs = [strip_server_fields(o) for o in objs]
        if not objs:
            return ""
        path = os.path.join(self.tmp, f"kubectl-{verb}-{time.monotonic_ns()}.yaml")
        with open(path, "w") as f:
            f.write("---\n".join(to_yaml(o) for o in objs))
        try:
            if verb in ("create", "replace"):
                flags = ("--validate=false",) + flags
            return self.kubectl(verb, "-f", path, *flags)
        finally:
            os.unlink(path)

    def create(self, objs):
        return self._kubectl_file("create", objs)

    def replace(self, objs):
        return self._kubectl_file("replace", objs)

    def delete(self, objs, wait=True):
        return self._kubectl_file("delete", objs, f"--wait={'true' if wait else 'false'}")

    def apply_objects(self, objs):
        """Create the missing objects and replace the existing ones, with kubectl."""
        have = {_ident(o) for _, o in self.objects()}
        objs = list(objs)
        out = self.create([o for o in objs if _ident(o) not in have])
        return out + self.replace([o for o in objs if _ident(o) in have])

    # -- a raw client (self-tests, ad-hoc checks from the host namespace only) --
    def ssl_context(self, ca=None, client_cert=False):
        ctx = ssl.create_default_context(cafile=ca or self.ca)
        if client_cert:
            ctx.load_cert_chain(os.path.join(self.pki, "client.crt"),
                                os.path.join(self.pki, "client.key"))
        return ctx


    def http(self, method, path, body=None, token=None, client_cert=False, ctx=None,
             headers=None, timeout=10.0):
        """One request over TCP (a server in the test process's namespace only, ns=None) with
        the daemon's token (token=False: none). -> (status, headers dict, parsed JSON, else
        text, else bytes)."""
        if self.tls:
            conn = http.client.HTTPSConnection(
                self.bind, self.port, timeout=timeout,
                context=ctx or self.ssl_context(client_cert=client_cert))
        else:
            conn = http.client.HTTPConnection(self.bind, self.port, timeout=timeout)
        hdrs = {"Accept": "application/json"}
        tok = self.token if token is None else token
        if tok:
            hdrs["Authorization"] = f"Bearer {tok}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(raw)
        except ValueError:  # (UnicodeDecodeError too) text, or bytes when not UTF-8
            try:
                parsed = raw.decode()
            except UnicodeDecodeError:
                parsed = raw
        return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed


class RawWatch:
    """A watch read straight off the socket: keeps every HTTP chunk as received, so tests can
    see how events were split; events() parses by newline as a correct client must.
    Only for a server in the test process's own namespace (ns=None)."""

    def __init__(self, api, path, token=None, ctx=None, timeout=10.0):
        raw = socket.create_connection((api.bind, api.port), timeout=timeout)
        self.sock = (ctx or api.ssl_context()).wrap_socket(raw, server_hostname=api.bind) \
            if api.tls else raw
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {api.bind}\r\n"
                           f"Authorization: Bearer {token or api.token}\r\n"
                           f"Accept: application/json\r\n\r\n").encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip()
                        for l in lines[1:] if ":" in l}
        self.chunks = []
        self.ended = False    # terminating chunk seen
        self.reset = False    # connection closed/reset without it
        self._data = b""

    def _fill(self):
        try:
            d = self.sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError, BrokenPipeError) as e:
            self.reset = True
            raise EOFError(str(e))
        if not d:
            self.reset = True
            raise EOFError("eof")
        self.buf += d

    def _until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_chunk(self):
        """-> the next chunk's bytes, or None at the end of the stream."""
        if self.ended:
            return None
        n = int(self._until(b"\r\n").split(b";")[0], 16)
        if n == 0:
            self._until(b"\r\n")
            self.ended = True
            return None
        data = self._exact(n)
        self._exact(2)
        self.chunks.append(data)
        return data

    def next_event(self, timeout=5.0):
        """-> the next event dict, or None when the stream ended (cleanly or not)."""
        self.sock.settimeout(timeout)
        while b"\n" not in self._data:
            try:
                c = self.read_chunk()
            except EOFError:
                return None
            if c is None:
                return None
            self._data += c
        line, self._data = self._data.split(b"\n", 1)
        return json.loads(line)

    def events(self, n=None, timeout=5.0, skip_bookmarks=True):
        """Up to n events (all until the stream ends when n is None)."""
        out = []
        while n is None or len(out) < n:
            e = self.next_event(timeout)
            if e is None:
                break
            if skip_bookmarks and e["type"] == "BOOKMARK":
                continue
            out.append(e)
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

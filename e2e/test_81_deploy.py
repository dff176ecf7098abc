"""deploy/: every document parses; the DaemonSet runs --config from the ConfigMap with probes on
/livez and /healthz; the configurations decode with the daemon's own decoder; resources fit the
measured peak (docs/benchmarks.md); RBAC gives exactly what the reflectors call, checked against
the code and against a running daemon's requests; `systemd-analyze verify` passes the unit."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

import netlab
from apiserver_lab import ApiServer
from netlab import node_object, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

DEPLOY = os.path.join(netlab.REPO, "deploy")


def docs(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(name, kind):
    found = [d for d in docs(name) if d["kind"] == kind]
    assert len(found) == 1, f"{name}: {len(found)} {kind} documents"
    return found[0]


def container():
    ds = one("daemonset.yaml", "DaemonSet")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return ds, c


def flag(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name} in {args}"
    return values[0]


def effective_config(tmp, config_text):
    """The daemon's own decoder and validation on a configuration: its --write-config-to output."""
    src, out = os.path.join(tmp, "in.conf"), os.path.join(tmp, "out.yaml")
    with open(src, "w") as f:
        f.write(config_text)
    p = subprocess.run([netlab.BIN, f"--config={src}", f"--write-config-to={out}"], capture_output=True, text=True,
                       timeout=15)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        return yaml.safe_load(f)


def code_resources():
    """(apiGroup, resource) of every reflector in the API source."""
    with open(os.path.join(netlab.REPO, "pkg", "source", "api_source.cc")) as f:
        text = f.read()
    # The reflectors' collections (a lookup by name lists one of them too).
    paths = re.findall(r'make\([^,]+, \{"[A-Za-z]+", "(/apis?/[^"]+)"', text)
    out = set()
    for p in paths:
        parts = p.strip("/").split("/")
        out.add(("", parts[2]) if parts[0] == "api" else (parts[1], parts[3]))
    return out


def code_event_resource():
    """(apiGroup, resource) the event recorder writes to."""
    with open(os.path.join(netlab.REPO, "pkg", "events", "event.cc")) as f:
        (path,) = re.findall(r'"(/apis/[^"]+/namespaces/)"', f.read())
    parts = path.strip("/").split("/")
    return parts[1], "events"


def rbac_rules():
    role = one("rbac.yaml", "ClusterRole")
    allowed = {}
    for rule in role["rules"]:
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                allowed.setdefault((g, r), set()).update(rule["verbs"])
    return allowed


def test_every_document_parses_and_has_the_expected_kinds():
    names = [os.path.relpath(os.path.join(d, n), DEPLOY) for d, _, files in os.walk(DEPLOY) for n in files]
    kinds = {name: sorted(d["kind"] for d in docs(name)) for name in sorted(names) if name.endswith(".yaml")}
    assert kinds == {"configmap.yaml": ["ConfigMap"], "daemonset.yaml": ["DaemonSet"],
                     "rbac.yaml": ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"],
                     "monitoring/podmonitor.yaml": ["PodMonitor"],
                     "monitoring/prometheusrule.yaml": ["PrometheusRule"]}, kinds


def test_daemonset_runs_the_configmaps_config_with_probes_ports_and_mounts(tmp_path):
    ds, c = container()
    pod = ds["spec"]["template"]["spec"]
    cm = one("configmap.yaml", "ConfigMap")
    # --config from the ConfigMap's mount, --hostname-override from the downward API, as kube-proxy.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    cfg_path = flag(c["command"], "config")
    cfg_mount = [m for m in mounts.values() if cfg_path.startswith(m["mountPath"] + "/")]
    assert len(cfg_mount) == 1, (cfg_path, mounts)
    assert volumes[cfg_mount[0]["name"]]["configMap"]["name"] == cm["metadata"]["name"]
    key = cfg_path[len(cfg_mount[0]["mountPath"]) + 1:]
    assert key in cm["data"], f"{key} not in the ConfigMap"
    assert flag(c["command"], "hostname-override") == "$(NODE_NAME)"
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == one("rbac.yaml", "ServiceAccount")["metadata"]["name"]
    assert "NET_ADMIN" in c["securityContext"]["capabilities"]["add"]

    # The configuration decodes (our decoder, strict) and its kubeconfig is the ConfigMap's other key.
    conf = effective_config(str(tmp_path), cm["data"][key])
    kc = conf["clientConnection"]["kubeconfig"]
    assert kc.startswith(cfg_mount[0]["mountPath"] + "/") and kc.rsplit("/", 1)[1] in cm["data"], kc
    assert yaml.safe_load(cm["data"][kc.rsplit("/", 1)[1]])["kind"] == "Config"
    # Probes on the health port the configuration binds; metrics on every node address, on the
    # port kube-prometheus's PodMonitor scrapes (monitoring/podmonitor.yaml: <pod IP>:10249).
    health_port = int(conf["healthzBindAddress"].rsplit(":", 1)[1])
    assert conf["healthzBindAddress"].startswith("0.0.0.0:")
    assert conf["metricsBindAddress"] == "0.0.0.0:10249"
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": health_port}
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": health_port}
    assert {"name": "healthz", "containerPort": health_port, "protocol": "TCP"} in c["ports"]
    assert {"name": "metrics", "containerPort": 10249, "protocol": "TCP"} in c["ports"]
    # kubeadm's pod label, which that PodMonitor selects and names the job after.
    assert ds["spec"]["template"]["metadata"]["labels"]["k8s-app"] == "kube-proxy"


def mib(quantity):
    m = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    assert m, quantity
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def test_resources_fit_the_measured_peak_at_10k_services():
    with open(os.path.join(netlab.REPO, "docs", "benchmarks.md")) as f:
        bench = f.read()
    # The sync table: "| 10k × 10 ClusterIP | ... | RSS after | peak RSS |".
    rows = re.findall(r"^\| 10k × 10[^|]*\|.*\| (\d+) MiB \| (\d+) MiB \|$", bench, re.M)
    assert len(rows) >= 2, "docs/benchmarks.md has no 10k rows to size against"
    settled, peak = max(int(r[0]) for r in rows), max(int(r[1]) for r in rows)
    _, c = container()
    assert mib(c["resources"]["requests"]["memory"]) >= settled, (settled, c["resources"])
    assert mib(c["resources"]["limits"]["memory"]) >= peak, (peak, c["resources"])


def test_rbac_gives_exactly_list_and_watch_on_what_the_reflectors_read_and_events_create_patch():
    assert code_resources() == {("", "services"), ("", "nodes"), ("discovery.k8s.io", "endpointslices"),
                                ("networking.k8s.io", "servicecidrs")}
    assert code_event_resource() == ("events.k8s.io", "events")
    want = {r: {"list", "watch"} for r in code_resources()}
    want[code_event_resource()] = {"create", "patch"}  # a repeated event's series is a PATCH
    assert rbac_rules() == want
    binding = one("rbac.yaml", "ClusterRoleBinding")
    sa = one("rbac.yaml", "ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": one("rbac.yaml", "ClusterRole")["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


def request_verb(r):
    """(apiGroup, resource, verb) of a logged request, as RBAC names it."""
    path = r["path"].split("?", 1)[0].strip("/").split("/")
    if path[0] == "api":
        group, rest = "", path[2:]
    else:
        group, rest = path[1], path[3:]
    if rest and rest[0] == "watch":
        rest = rest[1:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:]
    if r["method"] in ("POST", "PATCH", "PUT", "DELETE"):
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}[r["method"]]
    else:
        verb = "watch" if r.get("watch") else ("list" if len(rest) == 1 else "get")
    return group, rest[0], verb


def test_rbac_covers_every_request_of_the_daemon_running_the_deploy_config(lab):
    api = ApiServer(lab)
    api.create([node_object()])
    kubeconfig = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"), token_file=True)
    cm = one("configmap.yaml", "ConfigMap")
    conf = yaml.safe_load(cm["data"]["config.conf"])
    conf["clientConnection"]["kubeconfig"] = kubeconfig  # the only change: the test API server
    path = os.path.join(lab.tmp, "config.conf")
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)
    d = lab.daemon([f"--config={path}"], sync_flags=(), manifests=False).start()
    d.wait_syncs(1, timeout=30)
    # Each reflector opens its watch after its list: the first sync (right after the last list)
    # can come before the last watch is open.
    api.wait_watches(4)
    seen = {request_verb(r) for r in api.requests() if r.get("ua", "").startswith("kube-proxy-nft")}
    allowed = rbac_rules()
    assert seen, "no requests logged"
    for group, resource, verb in seen:
        assert verb in allowed.get((group, resource), set()), f"{verb} {group}/{resource} not in rbac.yaml"
    for res in [("", "services"), ("discovery.k8s.io", "endpointslices"), ("", "nodes")]:
        assert {(*res, "list"), (*res, "watch")} <= seen, (res, seen)
    # The Starting event on its Node, as upstream records it.
    api.wait_events("Starting")
    seen = {request_verb(r) for r in api.requests() if r.get("ua", "").startswith("kube-proxy-nft")}
    assert ("events.k8s.io", "events", "create") in seen, seen
    for group, resource, verb in seen:
        assert verb in allowed.get((group, resource), set()), f"{verb} {group}/{resource} not in rbac.yaml"


def test_systemd_unit_verifies_and_its_config_decodes(tmp_path):
    # The unit as shipped, with ExecStart's binary pointed at the one just built (verify checks that
    # the executable exists).
    with open(os.path.join(DEPLOY, "kube-proxy-nft.service")) as f:
        unit = f.read()
    assert "ExecStart=/usr/local/bin/kube-proxy-nft --config=/etc/kube-proxy-nft/config.conf" in unit
    local = tmp_path / "kube-proxy-nft.service"
    local.write_text(unit.replace("/usr/local/bin/kube-proxy-nft", netlab.BIN))
    assert shutil.which("systemd-analyze"), "systemd-analyze missing: `make deps` installs systemd"
    p = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "kube-proxy-nft.service" not in p.stderr, p.stderr
    with open(os.path.join(DEPLOY, "kube-proxy-nft.conf")) as f:
        conf = effective_config(str(tmp_path), f.read())
    assert conf["clientConnection"]["kubeconfig"] == "/etc/kube-proxy-nft/kubeconfig"
    assert conf["mode"] == "nftables"


def dockerfile_runtime_packages():
    """The packages the Dockerfile's runtime stage installs (its apt-get install list)."""
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    stage = text.split(" AS runtime", 1)[1].split("\nFROM ", 1)[0]
    (install,) = [l for l in stage.splitlines() if "apt-get install" in l]
    words = install.split("apt-get install", 1)[1].split("&&")[0].split()
    return {w for w in words if not w.startswith("-")}


def packages_of(paths):
    """{path: the Debian package that ships it}, in one dpkg call. With bookworm's merged /usr,
    dpkg knows each file under one spelling (/lib/... or /usr/lib/..., the link or its target):
    every spelling is asked."""
    def spellings(p):
        out = set()
        for q in (p, os.path.realpath(p)):
            out.add(q)
            out.add(q[4:] if q.startswith("/usr/") else "/usr" + q)
        return out
    asked = {p: spellings(p) for p in paths}
    out = subprocess.run(["dpkg", "-S", *sorted(set().union(*asked.values()))], capture_output=True,
                         text=True).stdout
    owner = {}
    for line in out.splitlines():
        pkg, path = line.split(": ", 1)
        owner[path] = pkg.split(":")[0].split(",")[0].strip()
    found = {p: next((owner[q] for q in sorted(qs) if q in owner), None) for p, qs in asked.items()}
    missing = [p for p, pkg in found.items() if pkg is None]
    assert not missing, f"no Debian package ships {missing}"
    return found


def test_the_image_installs_the_package_of_every_library_the_binary_loads():
    # The runtime stage once lacked three of them: the image could not start the binary at all.
    out = subprocess.run(["ldd", netlab.BIN], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"=> (/\S+)", out) + re.findall(r"^\s*(/\S+ld-linux\S*)", out, re.M)
    assert len(libs) > 10, out
    installed = dockerfile_runtime_packages()
    missing = {}
    for lib, pkg in packages_of(libs).items():
        if pkg not in installed:
            missing.setdefault(pkg, []).append(lib)
    assert not missing, f"deploy/Dockerfile's runtime stage does not install {missing}"

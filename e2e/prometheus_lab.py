"""A real Prometheus server (Debian's `prometheus`) for the e2e suite: in the lab's node namespace,
on loopback, with the test's scrape jobs and rule files, scraping and evaluating every second; its
own config and data directory under the lab's temp dir; killed by PID with the lab.

Also the one thing between a PodMonitor and that server that prometheus-operator would do: the
scrape job it generates for a PodMonitor (pkg/prometheus/promcfg.go, generatePodMonitorConfig:
keep the pods its selector matches, label namespace/container/pod, job from `jobLabel`, then the
PodMonitor's own relabelings), with one pod's discovery labels as a static target in place of
Kubernetes service discovery."""
import calendar
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse

import yaml

from netlab import LabError, http_get

def get(lab, host, port, path):
    """An HTTP GET from inside the lab's node namespace."""
    return http_get(lab.node, host, port, path)


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def static_job(name, target):
    return {"job_name": name, "static_configs": [{"targets": [target]}]}


def _label(name):
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _relabel(r):
    """A PodMonitor relabeling (camelCase, as the CRD spells it) as Prometheus' relabel_config."""
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    out = {keys.get(k, k): v for k, v in r.items()}
    if "action" in out:
        out["action"] = out["action"].lower()
    return out


def podmonitor_job(podmonitor, pod):
    """The scrape job prometheus-operator generates for the first podMetricsEndpoint of
    `podmonitor` (a parsed PodMonitor), with `pod` as what Kubernetes discovery would find:
    {"namespace", "name", "labels", "node", "ip", "container"}. None when the PodMonitor's
    namespaceSelector leaves the pod's namespace out."""
    spec = podmonitor["spec"]
    names = spec.get("namespaceSelector", {}).get("matchNames")
    if names is not None and pod["namespace"] not in names:
        return None
    (ep,) = spec["podMetricsEndpoints"]
    meta = {"__meta_kubernetes_namespace": pod["namespace"], "__meta_kubernetes_pod_name": pod["name"],
            "__meta_kubernetes_pod_node_name": pod["node"], "__meta_kubernetes_pod_ip": pod["ip"],
            "__meta_kubernetes_pod_container_name": pod["container"], "__meta_kubernetes_pod_phase": "Running"}
    for k, v in pod["labels"].items():
        meta[f"__meta_kubernetes_pod_label_{_label(k)}"] = v
        meta[f"__meta_kubernetes_pod_labelpresent_{_label(k)}"] = "true"
    relabel = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
               {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"}]
    for k, v in sorted(spec["selector"].get("matchLabels", {}).items()):
        relabel.append({"action": "keep", "regex": f"({v});true",
                        "source_labels": [f"__meta_kubernetes_pod_label_{_label(k)}",
                                          f"__meta_kubernetes_pod_labelpresent_{_label(k)}"]})
    assert not spec["selector"].get("matchExpressions"), "only matchLabels is translated here"
    if ep.get("port"):
        relabel.append({"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                        "regex": ep["port"]})
    relabel += [{"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"target_label": "job",
                 "replacement": f"{podmonitor['metadata']['namespace']}/{podmonitor['metadata']['name']}"}]
    if spec.get("jobLabel"):
        relabel.append({"source_labels": [f"__meta_kubernetes_pod_label_{_label(spec['jobLabel'])}"],
                        "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
    if ep.get("port"):
        relabel.append({"target_label": "endpoint", "replacement": ep["port"]})
    relabel += [_relabel(r) for r in ep.get("relabelings", [])]
    job = {"job_name": f"podMonitor/{podmonitor['metadata']['namespace']}/{podmonitor['metadata']['name']}/0",
           "honor_labels": bool(ep.get("honorLabels", False)),
           "static_configs": [{"targets": [pod["ip"]], "labels": meta}], "relabel_configs": relabel}
    for key, field in (("path", "metrics_path"), ("scheme", "scheme"), ("interval", "scrape_interval")):
        if key in ep:
            job[field] = ep[key]
    return job


class Prometheus:
    """`prometheus` in the node namespace on 127.0.0.1:<free port>. scrape_jobs: Prometheus
    scrape_configs entries; rule_groups: rule groups (the `groups` of a rule file)."""

    def __init__(self, lab, scrape_jobs, rule_groups=(), interval="1s"):
        self.lab = lab
        self.dir = os.path.join(lab.tmp, "prometheus")
        os.makedirs(os.path.join(self.dir, "data"))
        with socket.socket() as s:  # a free port number; the node namespace has its own ports
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        cfg = {"global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
               "scrape_configs": list(scrape_jobs)}
        if rule_groups:
            rules = os.path.join(self.dir, "rules.yaml")
            with open(rules, "w") as f:
                yaml.safe_dump({"groups": list(rule_groups)}, f, sort_keys=False)
            cfg["rule_files"] = [rules]
        path = os.path.join(self.dir, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)
        check = subprocess.run(["promtool", "check", "config", path], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        self.log = os.path.join(self.dir, "stderr")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", lab.node, "prometheus", f"--config.file={path}",
                 f"--storage.tsdb.path={self.dir}/data", f"--web.listen-address=127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        lab.procs.append(self.proc)

    def api(self, path, **params):
        """The `data` of a /api/v1 answer; None until the server answers."""
        query = urllib.parse.urlencode(params)
        r = get(self.lab, "127.0.0.1", self.port, f"/api/v1/{path}" + (f"?{query}" if query else ""))
        if r.get("status") != 200:
            return None
        body = json.loads(r["body"])
        return body["data"] if body.get("status") == "success" else None

    def query(self, expr):
        data = self.api("query", query=expr)
        return None if data is None else data["result"]

    def label_values(self, label, match):
        return self.api(f"label/{label}/values", **{"match[]": match})

    def alerts(self):
        """Active alerts (pending or firing): [{"labels", "state", ...}]; None until the server answers."""
        data = self.api("alerts")
        return None if data is None else data["alerts"]

    def wait_evaluated(self, timeout=30):
        """Until every rule has been evaluated again after this call (healthy): then its state
        reflects every sample scraped before it."""
        start = time.time()

        def after():
            rules = self.api("rules")
            if rules is None:
                return False
            evaluated = [r for g in rules["groups"] for r in g["rules"]]
            if any(r.get("health") == "err" for r in evaluated):
                raise LabError(f"a rule fails to evaluate: {[r for r in evaluated if r.get('health') == 'err']}")
            return evaluated and all(_rfc3339(r["lastEvaluation"]) > start for r in evaluated)
        wait_for(after, timeout, "every rule evaluated")

    def tail(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-3000:]


def _rfc3339(text):
    """Seconds since the epoch of Prometheus' RFC 3339 timestamps (nanosecond fractions)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        return 0.0
    base = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    if m.group(3) != "Z":
        sign = 1 if m.group(3)[0] == "+" else -1
        base -= sign * (int(m.group(3)[1:3]) * 3600 + int(m.group(3)[4:6]) * 60)
    return base + float(m.group(2) or 0)

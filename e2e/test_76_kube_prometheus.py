"""Monitoring as most clusters run it (issue 23): kube-prometheus's PodMonitor scraping the daemon
that deploy/ runs, and kubernetes-mixin's kube-proxy dashboard and alerts evaluated by a real
Prometheus (Debian's `prometheus`, in the lab's node namespace).

The daemon runs with deploy/configmap.yaml's configuration (only its kubeconfig points at the test
API server); Prometheus scrapes it through the scrape job prometheus-operator generates from the
PodMonitor for the pod deploy/daemonset.yaml makes (prometheus_lab.podmonitor_job): a hostNetwork
pod in kube-system whose IP is the node's. The mixin's queries and alerts are quoted below as data,
as kube-prometheus renders them (defaults: job="kube-proxy", cluster label `cluster`)."""
import os

import pytest
import yaml

import netlab
from apiserver_lab import ApiServer
from netlab import NODE_NAME, NODE_V4, endpoint_slice, node_object, service
from prometheus_lab import Prometheus, podmonitor_job, wait_for
from test_75_metrics_health import aged_change
from test_92_events import hold_port

pytestmark = pytest.mark.usefixtures("daemon_bin")

DEPLOY = os.path.join(netlab.REPO, "deploy")
HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]

# kube-prometheus's PodMonitor for kube-proxy: prometheus-operator/kube-prometheus,
# jsonnet/kube-prometheus/components/k8s-control-plane.libsonnet, `podMonitorKubeProxy` (rendered
# when kubernetesControlPlane.kubeProxy is true; namespace: the stack's, `monitoring`).
KUBE_PROMETHEUS_PODMONITOR = {
    "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
    "metadata": {"name": "kube-proxy", "namespace": "monitoring", "labels": {"k8s-app": "kube-proxy"}},
    "spec": {
        "jobLabel": "k8s-app",
        "namespaceSelector": {"matchNames": ["kube-system"]},
        "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
        "podMetricsEndpoints": [{"honorLabels": True, "relabelings": [
            {"action": "replace", "regex": "(.*)", "replacement": "$1",
             "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"},
            {"action": "replace", "regex": "(.*)", "replacement": "$1:10249",
             "sourceLabels": ["__meta_kubernetes_pod_ip"], "targetLabel": "__address__"},
        ]}],
    },
}

# kubernetes-monitoring/kubernetes-mixin, dashboards/proxy.libsonnet ("Kubernetes / Proxy"), as
# kube-prometheus's manifests/grafana-dashboardDefinitions.yaml has it: (panel, legend, query).
DASHBOARD = [
    ("Up", "", 'sum(up{cluster="$cluster", job="kube-proxy"})'),
    ("Rules Sync Rate", "rate", 'sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_count{cluster="$cluster", '
                                'job="kube-proxy", instance=~"$instance"}[$__rate_interval]))'),
    ("Rules Sync Latency 99th Quantile", "{{instance}}",
     'histogram_quantile(0.99,rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket{cluster="$cluster", '
     'job="kube-proxy", instance=~"$instance"}[$__rate_interval]))'),
    ("Network Programming Rate", "rate",
     'sum(rate(kubeproxy_network_programming_duration_seconds_count{cluster="$cluster", job="kube-proxy", '
     'instance=~"$instance"}[$__rate_interval]))'),
    ("Network Programming Latency 99th Quantile", "{{instance}}",
     'histogram_quantile(0.99, sum(rate(kubeproxy_network_programming_duration_seconds_bucket{cluster="$cluster", '
     'job="kube-proxy", instance=~"$instance"}[$__rate_interval])) by (instance, le))'),
] + [
    ("Kube API Request Rate", f"{c}xx", 'sum(rate(rest_client_requests_total{cluster="$cluster",job="kube-proxy", '
                                        f'instance=~"$instance",code=~"{c}.."}}[$__rate_interval]))')
    for c in "2345"
] + [
    ("Post Request Latency 99th Quantile", "{{verb}}",
     'histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster="$cluster", '
     'job="kube-proxy",instance=~"$instance",verb="POST"}[$__rate_interval])) by (verb, le))'),
    ("Get Request Latency 99th Quantile", "{{verb}}",
     'histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster="$cluster", '
     'job="kube-proxy", instance=~"$instance", verb="GET"}[$__rate_interval])) by (verb, le))'),
    ("Memory", "{{instance}}", 'process_resident_memory_bytes{cluster="$cluster", job="kube-proxy",instance=~"$instance"}'),
    ("CPU usage", "{{instance}}",
     'rate(process_cpu_seconds_total{cluster="$cluster", job="kube-proxy",instance=~"$instance"}[$__rate_interval])'),
    ("Goroutines", "{{instance}}", 'go_goroutines{cluster="$cluster", job="kube-proxy",instance=~"$instance"}'),
]
# The dashboard's template variables (label_values(<match>, <label>)).
CLUSTER_VARIABLE = ("cluster", 'up{job="kube-proxy"}')
INSTANCE_VARIABLE = ("instance", 'up{job="kube-proxy", cluster="$cluster", job="kube-proxy"}')

# Queries that stay empty on this daemon, and why (docs/operations.md, Monitoring, says the same).
# The error rates are filled in the test's second part, when the API server answers errors.
NO_DATA_HERE = {
    ("Kube API Request Rate", "3xx"): "no redirects: the API server sends none (client-go would follow one)",
    ("Kube API Request Rate", "4xx"): "a healthy run has no client errors (filled below, with injected ones)",
    ("Kube API Request Rate", "5xx"): "a healthy run has no server errors (filled below, with injected ones)",
    ("Goroutines", "{{instance}}"): "not a Go program: no go_* runtime metrics",
}

# kubernetes-mixin's alerts on kube-proxy, as kube-prometheus renders them: alerts/kube_proxy.libsonnet
# (lib/absent_alert.libsonnet, lib/instance_unreachable_alert.libsonnet) and alerts/system_alerts.libsonnet.
# KubeClientErrors has selected only the API server's job since March 2023 (kube-prometheus:
# job="apiserver"); its earlier form, still in clusters on older releases, covers every client,
# kube-proxy among them: both are here.
MIXIN_ALERT_GROUPS = [
    {"name": "kubernetes-system-kube-proxy", "rules": [
        {"alert": "KubeProxyDown", "expr": 'absent(up{job="kube-proxy"})\n', "for": "15m",
         "labels": {"severity": "critical"}},
        {"alert": "KubeProxyInstanceUnreachable", "expr": 'up{job="kube-proxy"} == 0\n', "for": "15m",
         "labels": {"severity": "warning"}},
    ]},
    {"name": "kubernetes-system", "rules": [
        {"alert": "KubeVersionMismatch",
         "expr": 'count by (cluster) (count by (git_version, cluster) (label_replace(kubernetes_build_info'
                 '{job!~"kube-dns|coredns"},"git_version","$1","git_version","(v[0-9]*.[0-9]*).*"))) > 1\n',
         "for": "15m", "labels": {"severity": "warning"}},
        {"alert": "KubeClientErrors",
         "expr": '(sum(rate(rest_client_requests_total{job="apiserver",code=~"5.."}[5m])) by (cluster, instance, job, namespace)\n'
                 '  /\nsum(rate(rest_client_requests_total{job="apiserver"}[5m])) by (cluster, instance, job, namespace))\n> 0.01\n',
         "for": "15m", "labels": {"severity": "warning"}},
    ]},
    {"name": "kubernetes-system-before-2023", "rules": [
        {"alert": "KubeClientErrors",
         "expr": '(sum(rate(rest_client_requests_total{code=~"5.."}[5m])) by (cluster, instance, job, namespace)\n'
                 '  /\nsum(rate(rest_client_requests_total[5m])) by (cluster, instance, job, namespace))\n> 0.01\n',
         "for": "15m", "labels": {"severity": "warning"}},
    ]},
]
# KubeVersionMismatch compares the Kubernetes versions every component reports: this stands in
# for the API server's own kubernetes_build_info (a real cluster scrapes it from the API server).
API_SERVER_BUILD_INFO = {"name": "stand-in-for-the-api-server", "rules": [
    {"record": "kubernetes_build_info", "expr": "vector(1)",
     "labels": {"job": "apiserver", "git_version": "v1.33.1", "git_commit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828"}},
]}


def deploy_docs(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def the(name, kind):
    (doc,) = [d for d in deploy_docs(name) if d["kind"] == kind]
    return doc


def deployed_pod():
    """What Kubernetes discovery finds for the DaemonSet's pod on this lab's node."""
    ds = the("daemonset.yaml", "DaemonSet")
    tmpl = ds["spec"]["template"]
    (c,) = tmpl["spec"]["containers"]
    assert tmpl["spec"]["hostNetwork"] is True  # the pod IP is the node's
    return {"namespace": ds["metadata"]["namespace"], "name": f"{ds['metadata']['name']}-x7k2p",
            "labels": tmpl["metadata"]["labels"], "node": NODE_NAME, "ip": NODE_V4, "container": c["name"]}


def deployed_config(lab, kubeconfig):
    """deploy/configmap.yaml's config.conf, its kubeconfig path replaced by the test's."""
    conf = yaml.safe_load(the("configmap.yaml", "ConfigMap")["data"]["config.conf"])
    conf["clientConnection"]["kubeconfig"] = kubeconfig
    path = os.path.join(lab.tmp, "config.conf")
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)
    return path


def grafana(expr, instance):
    """The query as Grafana sends it: one cluster (the variable is empty: no `cluster` label), the
    node picked in the instance variable, and $__rate_interval as Grafana computes it for the mixin's
    1m minimum interval: max($__interval + the scrape interval, 4 x the scrape interval), with the
    data source's default scrape interval (15 s) = 75 s. Every window is the mixin's own."""
    return expr.replace("$cluster", "").replace("$instance", instance).replace("$__rate_interval", "75s")


def filled(result):
    """The series a panel draws: a number above 0 (every panel here is a rate, a latency, a size or
    `up`; 0 where the test made activity means Prometheus missed it, NaN means no observation)."""
    return [r for r in result if float(r["value"][1]) > 0]


def active(prom):
    alerts = prom.alerts()
    assert alerts is not None, "Prometheus does not answer"
    return sorted((a["labels"]["alertname"], a["state"], a["labels"].get("instance", "")) for a in alerts)


def web(ips, eps, trigger=None):
    slices = [endpoint_slice("web", [ip for ip in eps if ":" not in ip], HTTP_SLICE),
              endpoint_slice("web", [ip for ip in eps if ":" in ip], HTTP_SLICE, address_type="IPv6")]
    for s in slices:
        if trigger:
            s["metadata"]["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time": trigger}
    return [service("web", HTTP, ips)] + slices


def our_rule_groups():
    return the("monitoring/prometheusrule.yaml", "PrometheusRule")["spec"]["groups"]


def start_deployed(lab, api):
    """The daemon with deploy/'s configuration, and Prometheus scraping it as kube-prometheus does,
    with the mixin's alerts and ours loaded."""
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"))
    d = lab.start_daemon([f"--config={deployed_config(lab, kc)}"], manifests=False)
    job = podmonitor_job(KUBE_PROMETHEUS_PODMONITOR, deployed_pod())
    assert job is not None, "the PodMonitor does not look in the DaemonSet's namespace"
    prom = Prometheus(lab, [job], MIXIN_ALERT_GROUPS + [API_SERVER_BUILD_INFO] + our_rule_groups())
    try:
        wait_for(lambda: prom.query('count_over_time(up{job="kube-proxy"}[1m]) >= 3'), 30,
                 'three scrapes of job="kube-proxy"')
    except netlab.LabError:
        raise netlab.LabError(f"targets: {prom.api('targets')}\nprometheus:\n{prom.tail()}")
    return d, prom


def test_our_podmonitor_is_kube_prometheus_own_and_selects_the_daemonsets_pods():
    ours = the("monitoring/podmonitor.yaml", "PodMonitor")
    assert ours == KUBE_PROMETHEUS_PODMONITOR
    ds = the("daemonset.yaml", "DaemonSet")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert labels.get("k8s-app") == "kube-proxy", "kubeadm's label, which the PodMonitor and the mixin's job select"
    assert ds["metadata"]["namespace"] in ours["spec"]["namespaceSelector"]["matchNames"]
    assert set(ds["spec"]["selector"]["matchLabels"].items()) <= set(labels.items())


def test_kube_prometheus_scrapes_the_deployed_daemon_and_every_mixin_panel_and_alert_has_its_data(lab):
    api = ApiServer(lab)
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()] + web(["10.96.0.10", "fd00:10:96::10"], [a.v4, a.v6]))
    d, prom = start_deployed(lab, api)

    # The target, as the PodMonitor's relabelling names it: job from the pod label, instance the node.
    up = prom.query('up{job="kube-proxy"}')
    assert [(r["metric"]["instance"], r["metric"]["namespace"], r["value"][1]) for r in up] == \
        [(NODE_NAME, "kube-system", "1")], up

    # Activity inside the dashboard's window: a change stamped by the EndpointSlice controller
    # (network programming latency), syncs, and watches established again (GETs); and a Kubernetes
    # Event (a POST), as upstream records one when a Service's health-check node port is taken.
    b, = lab.add_backends(1, tcp=[8080], udp=[], name="ep2")
    with d.change():
        api.put(web(["10.96.0.10", "fd00:10:96::10"], [a.v4, a.v6, b.v4, b.v6], trigger=aged_change(0)))
    api.close_watches()
    api.wait_watches(3)
    hold_port(lab, 32101)
    api.put([service("hc", [("p80", 80, "TCP", 8080, 30101)], ["10.96.0.11"], type="LoadBalancer", etp="Local",
                     lb_ingress=["198.51.100.11"], health_check_node_port=32101),
             endpoint_slice("hc", [a.v4], [("p80", 8080, "TCP")])])
    api.wait_events("FailedToStartServiceHealthcheck")

    assert prom.label_values(*CLUSTER_VARIABLE) == [], "one cluster: no cluster label, the variable stays empty"
    assert prom.label_values(INSTANCE_VARIABLE[0], grafana(INSTANCE_VARIABLE[1], "")) == [NODE_NAME]
    # Every panel fills once Prometheus has scraped that activity (the queries' windows are the
    # mixin's; nothing is shortened).
    def unfilled():
        empty, unexpected = {}, {}
        for panel, legend, expr in DASHBOARD:
            got = filled(prom.query(grafana(expr, NODE_NAME)) or [])
            if (panel, legend) in NO_DATA_HERE:
                if got:
                    unexpected[f"{panel} ({legend})"] = got
            elif not got:
                empty[f"{panel} ({legend})"] = expr
        assert not unexpected, f"data where NO_DATA_HERE says none (update it and docs/operations.md): {unexpected}"
        return empty
    try:
        wait_for(lambda: not unfilled(), 20, "every panel filled")
    except netlab.LabError:
        raise netlab.LabError(f"panels without data: {unfilled()}")

    # Each family this node serves has its own series and counts each sync once (dual-stack here).
    latency = prom.query(grafana(DASHBOARD[2][2], NODE_NAME))
    assert sorted(r["metric"]["ip_family"] for r in latency) == ["IPv4", "IPv6"], latency

    # No kube-proxy alert pending or firing, ours included; the version check sees only the API server.
    prom.wait_evaluated()
    assert active(prom) == []
    versions = prom.query('count by (git_version) (label_replace(kubernetes_build_info{job!~"kube-dns|coredns"},'
                          '"git_version","$1","git_version","(v[0-9]*.[0-9]*).*"))')
    assert [r["metric"]["git_version"] for r in versions] == ["v1.33"], versions
    assert prom.query('kubernetes_build_info{job="kube-proxy"}') == [], "a Kubernetes version we are not"
    assert prom.query('kubeproxy_nftables_build_info{job="kube-proxy"} == 1')

    # The error rates and KubeClientErrors (its form that covers every client) with real errors:
    # the API server answers watches 500, then 403. A code's series starts at its first error (as
    # client-go's: the codes are not known ahead), so a rate sees the errors after the first.
    for code, panel in ((500, "5xx"), (403, "4xx")):
        for n in (1, 2):
            api.fail(code, count=1, match="watch")
            api.close_watches()
            wait_for(lambda: prom.query(f'rest_client_requests_total{{job="kube-proxy",code="{code}"}} >= {n}'), 20,
                     f"error {n} ({code}) counted and scraped")
        expr = next(e for p, legend, e in DASHBOARD if legend == panel)
        wait_for(lambda: filled(prom.query(grafana(expr, NODE_NAME)) or []), 10, f"the {panel} rate")
    prom.wait_evaluated()
    assert ("KubeClientErrors", "pending", NODE_NAME) in active(prom), active(prom)
    assert not d.failed_syncs()

"""The daemon's own endpoints as operators and load balancers use them: Prometheus /metrics with
upstream's names (checked by promtool and scraped by a real Prometheus server), /proxyMode,
/healthz and /livez with upstream's bodies and 503 rules, and a metrics port that is already
taken. Everything runs in the lab's node namespace, on its loopback or its own addresses."""
import json
import os
import re
import subprocess
import time

import pytest

from apiserver_lab import ApiServer
from netlab import LabError, NODE_V4, NODE_V6, PY, endpoint_slice, node_object, service, trigger_time
from netlab import metric_sample as sample
from prometheus_lab import Prometheus, get, static_job, wait_for

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]
METRICS = "127.0.0.1:10249"

# Every upstream metric the issue names (kube-proxy nftables mode, client-go, process).
UPSTREAM_METRICS = {
    "kubeproxy_sync_proxy_rules_duration_seconds": "histogram",
    "kubeproxy_sync_full_proxy_rules_duration_seconds": "histogram",
    "kubeproxy_sync_partial_proxy_rules_duration_seconds": "histogram",
    "kubeproxy_sync_proxy_rules_last_timestamp_seconds": "gauge",
    "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds": "gauge",
    "kubeproxy_network_programming_duration_seconds": "histogram",
    "kubeproxy_sync_proxy_rules_endpoint_changes_pending": "gauge",
    "kubeproxy_sync_proxy_rules_endpoint_changes_total": "counter",
    "kubeproxy_sync_proxy_rules_service_changes_pending": "gauge",
    "kubeproxy_sync_proxy_rules_service_changes_total": "counter",
    "kubeproxy_sync_proxy_rules_nftables_sync_failures_total": "counter",
    "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total": "counter",
    "kubeproxy_proxy_healthz_total": "counter",
    "kubeproxy_proxy_livez_total": "counter",
    "kubeproxy_sync_proxy_rules_no_local_endpoints_total": "gauge",
    "rest_client_requests_total": "counter",
    "rest_client_request_duration_seconds": "histogram",
    "process_cpu_seconds_total": "counter",
    "process_resident_memory_bytes": "gauge",
    "process_open_fds": "gauge",
    "process_start_time_seconds": "gauge",
}
OURS = ["kubeproxy_nftables_transaction_operations", "kubeproxy_nftables_transaction_bytes",
        "kubeproxy_nftables_commit_duration_seconds", "kubeproxy_nftables_table_reconcile_total",
        "kubeproxy_nftables_build_info"]
# promtool's lint objects to upstream's own name for a gauge; nothing else may be reported.
UPSTREAM_LINT = {"kubeproxy_sync_proxy_rules_no_local_endpoints_total non-counter metrics should not have "
                 "\"_total\" suffix"}

def scrape(lab):
    r = get(lab, "127.0.0.1", 10249, "/metrics")
    assert r.get("status") == 200, r
    return r["body"]


def promtool_problems(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    problems = {l.strip() for l in (p.stdout + p.stderr).splitlines() if l.strip()}
    # 0: clean; 3: lint findings only (1 would be a text that does not parse).
    assert p.returncode in (0, 3), f"promtool exit {p.returncode}: {problems}"
    return problems


def aged_change(age):
    """The trigger time of a change made now, after the daemon started (a daemon counts only
    changes made after its start, as upstream's), once it is `age` seconds old."""
    made = time.time()
    wait_for(lambda: time.time() >= made + age, age + 1, f"the change to be {age} s old")
    return trigger_time(made)


def web(name, ip, eps, trigger=None):
    s = endpoint_slice(name, eps, HTTP_SLICE)
    if trigger:
        s["metadata"]["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time": trigger}
    return [service(name, HTTP, [ip]), s]


def test_metrics_carry_upstreams_names_pass_promtool_and_a_prometheus_server_scrapes_them(lab):
    api = ApiServer(lab)
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()])
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"))
    d = lab.start_daemon([f"--kubeconfig={kc}"], manifests=False)
    # A change stamped by the EndpointSlice controller: network programming latency is measured
    # from its trigger time (a second before it reaches the daemon) to the commit that carries it.
    trigger = aged_change(1)
    with d.change():
        api.create(web("web", "10.96.0.10", [a.v4], trigger=trigger))
    assert get(lab, "127.0.0.1", 10256, "/healthz").get("status") == 200

    text = scrape(lab)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for name, kind in UPSTREAM_METRICS.items():
        assert types.get(name) == kind, f"{name}: {types.get(name)} (want {kind})"
    for name in OURS:
        assert name in types, name
    assert promtool_problems(text) <= UPSTREAM_LINT

    # The values say what happened: syncs on both families, the change counted, the client's
    # requests to the API server by code, the trigger time observed (1 s old, so above 0.25 s).
    for fam in ("IPv4", "IPv6"):
        assert sample(text, "kubeproxy_sync_proxy_rules_duration_seconds_count", ip_family=fam) >= 2
        assert sample(text, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", ip_family=fam) > time.time() - 60
        assert sample(text, "kubeproxy_network_programming_duration_seconds_count", ip_family=fam) >= 1
        assert sample(text, "kubeproxy_network_programming_duration_seconds_bucket", ip_family=fam, le="0.25") == 0
    assert sample(text, "kubeproxy_sync_proxy_rules_endpoint_changes_total") >= 1
    assert sample(text, "kubeproxy_sync_proxy_rules_service_changes_total") >= 1
    assert sample(text, "rest_client_requests_total", code="200", method="GET") >= 3  # lists of each kind
    assert sample(text, "kubeproxy_proxy_healthz_total", code="200") >= 1
    assert sample(text, "kubeproxy_nftables_build_info") == 1
    assert sample(text, "process_open_fds") > 3
    assert sample(text, "process_resident_memory_bytes") > 1 << 20
    assert sample(text, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", ip_family="IPv4") == 0

    mode = get(lab, "127.0.0.1", 10249, "/proxyMode")
    assert (mode.get("status"), mode.get("body")) == (200, "nftables"), mode
    for path in ("/healthz", "/livez"):
        assert get(lab, "127.0.0.1", 10249, path).get("status") == 200, path

    prom = Prometheus(lab, [static_job("kube-proxy", METRICS)])
    try:
        wait_for(lambda: prom.query("kubeproxy_sync_proxy_rules_duration_seconds_count > 0"), 60,
                 "Prometheus to scrape kubeproxy_sync_proxy_rules_duration_seconds_count > 0")
        up = prom.query('up{job="kube-proxy"}')
        assert up and up[0]["value"][1] == "1", up
    except LabError:
        raise LabError("prometheus:\n" + prom.tail())
    assert not d.failed_syncs()


def family_labels(text):
    return set(re.findall(r'ip_family="([^"]*)"', text))


def test_a_single_stack_node_has_only_its_familys_series_and_counts_each_sync_once(lab):
    """Issue 23: a kernel without IPv6 nftables (the helper's failpoint refuses the ip6 family, as
    test_42_isolation does) serves IPv4 only. Upstream runs one proxier per served family: one
    sync is one observation, where a dual-stack node (the other tests) has one per family."""
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", [service("web", HTTP, ["10.96.0.10", "fd00:10:96::10"]),
                         endpoint_slice("web", [a.v4], HTTP_SLICE),
                         endpoint_slice("web", [a.v6], HTTP_SLICE, address_type="IPv6")])
    d = lab.start_daemon(env={"KPN_FAULT_REFUSE_TEXT": '"family":"ip6"'})
    with d.change():
        m.write("web.yaml", [service("web", HTTP, ["10.96.0.10", "fd00:10:96::10"]),
                             endpoint_slice("web", [], HTTP_SLICE),
                             endpoint_slice("web", [a.v6], HTTP_SLICE, address_type="IPv6")])
    assert "nftables family ip6 is not available on this node" in d.stderr()
    text = scrape(lab)
    assert family_labels(text) == {"IPv4"}, family_labels(text)
    syncs = sum(float(v) for v in re.findall(r"^kubeproxy_nftables_table_reconcile_total\{[^}]*\} (\S+)$", text, re.M))
    assert syncs >= 2
    assert sample(text, "kubeproxy_sync_proxy_rules_duration_seconds_count", ip_family="IPv4") == syncs
    # Series a rate needs from zero exist before their first observation.
    assert sample(text, "kubeproxy_network_programming_duration_seconds_count", ip_family="IPv4") == 0
    assert sample(text, "kubeproxy_nftables_table_reconcile_total", plan="full", result="failed") == 0


def test_network_programming_latency_counts_only_changes_made_after_the_start(lab):
    """Upstream ignores trigger times from before it started (the endpoints change tracker's start
    time): a restart must not observe every EndpointSlice's last change, hours old, as latency."""
    api = ApiServer(lab)
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.0.10", [a.v4], trigger=trigger_time(time.time() - 3600)))
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"))
    d = lab.start_daemon([f"--kubeconfig={kc}"], manifests=False)
    text = scrape(lab)
    assert sample(text, "kubeproxy_network_programming_duration_seconds_count", ip_family="IPv4") == 0, \
        "a change from an hour before the start was observed"
    with d.change():
        api.put(web("web", "10.96.0.10", [b.v4], trigger=aged_change(0)))
    text = scrape(lab)
    assert sample(text, "kubeproxy_network_programming_duration_seconds_count", ip_family="IPv4") == 1
    assert sample(text, "kubeproxy_network_programming_duration_seconds_bucket", ip_family="IPv4", le="10") == 1


def test_healthz_and_livez_bodies_on_both_families_and_an_ipv6_metrics_address(lab):
    lab.manifests.write("node.yaml", node_object())
    lab.start_daemon(["--healthz-bind-address=[::]:10256", "--metrics-bind-address=[::1]:10249"])
    for host in ("127.0.0.1", "::1", NODE_V4, NODE_V6):
        r = get(lab, host, 10256, "/healthz")
        assert r.get("status") == 200, (host, r)
        assert r["headers"].get("Content-Type") == "application/json"
        assert r["headers"].get("X-Content-Type-Options") == "nosniff"
        body = json.loads(r["body"])
        assert set(body) == {"lastUpdated", "currentTime", "nodeEligible", "healthy", "status"}, body
        assert body["nodeEligible"] is True and body["healthy"] is True
        assert set(body["status"]) == {"IPv4", "IPv6"}
        assert all(s["healthy"] for s in body["status"].values())
        live = json.loads(get(lab, host, 10256, "/livez")["body"])
        assert "nodeEligible" not in live and live["healthy"] is True
    assert get(lab, "127.0.0.1", 10256, "/metrics").get("status") == 404
    # An IPv6 literal listens there only.
    r = get(lab, "::1", 10249, "/metrics")
    assert r.get("status") == 200 and "# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram" in r["body"]
    assert "ConnectionRefusedError" in get(lab, "127.0.0.1", 10249, "/metrics").get("error", ""), "IPv4 must refuse"


class OwnedTable:
    """A real kernel rejection of every commit: our ip table is replaced by one created with the
    `owner` flag by another process (`nft -i`, kept running). The kernel refuses any change to
    an owned table from anyone but its owner (EPERM), so the daemon's syncs fail until the owner
    exits, when the kernel deletes the table and the daemon's next retry recreates ours."""

    def __init__(self, lab):
        self.proc = subprocess.Popen(["ip", "netns", "exec", lab.node, "nft", "-i"], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        lab.procs.append(self.proc)
        # One line, one transaction: between a separate delete and add the daemon's repair (it
        # listens to nftables events) would recreate our table first.
        self.proc.stdin.write("delete table ip kube-proxy; add table ip kube-proxy { flags owner; }\n")
        self.proc.stdin.flush()
        wait_for(lambda: "flags owner" in lab.nft("list", "table", "ip", "kube-proxy"), 10, "the owned table")

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_healthz_turns_503_while_the_kernel_rejects_every_commit_and_200_once_it_takes_them(lab):
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", web("web", "10.96.0.10", [a.v4]))
    # 2 x sync-period (4 s) is how long a change may wait for its sync before /healthz says 503.
    d = lab.start_daemon(sync_flags=("--min-sync-period=0s", "--sync-period=2s"))
    assert get(lab, "127.0.0.1", 10256, "/healthz")["status"] == 200

    owner = OwnedTable(lab)
    queued = time.monotonic()
    m.write("web.yaml", web("web", "10.96.0.10", [b.v4]))
    wait_for(lambda: d.failed_syncs(), 20, "a rejected sync")
    r = wait_for(lambda: (lambda x: x if x.get("status") == 503 else None)(get(lab, "127.0.0.1", 10256, "/healthz")),
                 20, "/healthz 503")
    assert time.monotonic() - queued >= 4.0 - 0.2, "503 before the change had waited 2 x sync-period"
    body = json.loads(r["body"])
    assert body["healthy"] is False and body["nodeEligible"] is True
    assert body["status"]["IPv4"]["healthy"] is False
    assert body["lastUpdated"] == body["status"]["IPv4"]["lastUpdated"] != body["currentTime"]
    assert get(lab, "127.0.0.1", 10256, "/livez")["status"] == 503  # upstream: livez follows the proxy too
    text = scrape(lab)
    assert sample(text, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", ip_family="IPv4") >= 1
    assert sample(text, "kubeproxy_proxy_healthz_total", code="503") >= 1
    assert "Operation not permitted" in d.stderr()

    owner.release()
    wait_for(lambda: get(lab, "127.0.0.1", 10256, "/healthz").get("status") == 200, 20, "/healthz 200 again")
    assert "flags owner" not in lab.table("ip")
    assert "10.244.0." in lab.table("ip")  # our table is back, with the endpoint
    assert get(lab, "127.0.0.1", 10256, "/livez")["status"] == 200


def healthz_503(lab):
    r = get(lab, "127.0.0.1", 10256, "/healthz")
    return r if r.get("status") == 503 else None


def test_healthz_turns_503_within_2x_sync_period_when_no_sync_ever_succeeds(lab):
    """Issue 24 defect 1: every commit refused from the start (the helper's failpoint matches
    every transaction of our tables). Upstream counts the start as an update of each family, so a
    change that then waits 2 x sync-period turns /healthz and /livez 503; before it, nothing is
    late (the retries of the initial sync are not queued changes, as upstream's)."""
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", web("web", "10.96.0.10", [a.v4]))
    d = lab.daemon(sync_flags=("--min-sync-period=0s", "--sync-period=2s"),
                   env={"KPN_FAULT_REFUSE_TEXT": '"table":"kube-proxy"'}).start()
    wait_for(lambda: d.failed_syncs(), 20, "a refused sync")
    started = get(lab, "127.0.0.1", 10256, "/healthz")
    assert started["status"] == 200, started

    m.write("web2.yaml", web("web2", "10.96.0.11", [a.v4]))
    queued = time.monotonic()
    r = wait_for(lambda: healthz_503(lab), 15, "/healthz 503")
    waited = time.monotonic() - queued
    # 2 x sync-period = 4 s after the change; the change reaches the daemon within ~0.1 s (inotify)
    # and the poll adds up to 0.1 s plus a python start.
    assert 4.0 - 0.2 <= waited <= 4.0 + 1.5, f"503 after {waited:.2f}s, want 2 x sync-period (4 s)"
    body = json.loads(r["body"])
    assert body["healthy"] is False and body["nodeEligible"] is True, body
    assert set(body["status"]) == {"IPv4", "IPv6"}
    for fam in body["status"].values():
        # Never synced: the family's last update is the start, as upstream's "in case Sync() never succeeds".
        assert fam == {"lastUpdated": body["lastUpdated"], "healthy": False}, body
    assert body["lastUpdated"] < body["currentTime"]
    assert get(lab, "127.0.0.1", 10256, "/livez")["status"] == 503
    # Before the change: healthy, and already the families with the start as their last update.
    started = json.loads(started["body"])
    assert started["healthy"] is True, started
    assert started.get("status") == {f: {"lastUpdated": body["lastUpdated"], "healthy": True}
                                     for f in ("IPv4", "IPv6")}, started
    assert "sync done" not in d.stderr(), "a sync succeeded: the failpoint did not refuse every commit"
    assert d.alive()


def test_an_ipv4_only_node_reports_no_ipv6_family(lab):
    """Issue 24 defect 1: status lists the families this node serves; a kernel without ip6
    nftables (the start-up probe refused, through the helper's failpoint) serves IPv4 only."""
    m = lab.manifests
    m.write("node.yaml", node_object())
    d = lab.start_daemon(env={"KPN_FAULT_REFUSE_TEXT": '"family":"ip6"'})
    assert "nftables family ip6 is not available on this node" in d.stderr(), d.tail()
    for path in ("/healthz", "/livez"):
        r = get(lab, "127.0.0.1", 10256, path)
        assert r["status"] == 200, r
        body = json.loads(r["body"])
        assert set(body["status"]) == {"IPv4"}, body


def test_livez_stays_200_while_only_the_node_is_being_deleted(lab):
    m = lab.manifests
    node = node_object()
    m.write("node.yaml", node)
    d = lab.start_daemon()
    assert get(lab, "127.0.0.1", 10256, "/healthz")["status"] == 200

    for change in ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
                   {"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
                                         "effect": "NoSchedule"}]}}):
        dying = json.loads(json.dumps(node))
        for k, v in change.items():
            dying[k].update(v)
        with d.change():
            m.write("node.yaml", dying)
        r = wait_for(lambda: (lambda x: x if x.get("status") == 503 else None)(get(lab, "127.0.0.1", 10256, "/healthz")),
                     10, f"/healthz 503 for {change}")
        body = json.loads(r["body"])
        assert body["nodeEligible"] is False and body["healthy"] is True, body
        live = get(lab, "127.0.0.1", 10256, "/livez")
        assert live["status"] == 200, live
        with d.change():
            m.write("node.yaml", node)
        wait_for(lambda: get(lab, "127.0.0.1", 10256, "/healthz").get("status") == 200, 10, "/healthz 200 again")


HOLD = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); print("ready", flush=True); time.sleep(600)
"""


def test_a_taken_metrics_port_gives_one_clear_line_and_hard_fail_exits_1(lab):
    holder = subprocess.Popen(["ip", "netns", "exec", lab.node, PY, "-c", HOLD, "10249"], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    lab.procs.append(holder)
    assert holder.stdout.readline().strip() == "ready"
    lab.manifests.write("node.yaml", node_object())
    d = lab.start_daemon()
    lines = [l for l in d.stderr().splitlines() if "10249" in l]
    assert len(lines) == 1, lines
    assert re.search(r"metrics server: bind 127\.0\.0\.1:10249: Address already in use; retrying every 5 s$",
                     lines[0]), lines[0]
    assert get(lab, "127.0.0.1", 10256, "/healthz")["status"] == 200  # the rest of the daemon serves on

    # Its own healthz port would be taken by the first daemon: leave it out to see the metrics line.
    hard = lab.daemon(["--bind-address-hard-fail", "--healthz-bind-address="], label="hardfail").start()
    rc = hard.proc.wait(timeout=20)
    assert rc == 1
    err = hard.stderr()
    assert "metrics server: bind 127.0.0.1:10249: Address already in use (bindAddressHardFail: exiting)" in err
    assert "sync done" not in err


def test_healthz_follows_the_node_from_the_api_server(lab):
    """The same rule through the API source: the Node's deletionTimestamp and taints arrive by
    watch (decoded by the wire path, not the manifest reader)."""
    api = ApiServer(lab)
    node = node_object()
    api.create([node])
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"))
    lab.start_daemon([f"--kubeconfig={kc}"], manifests=False)
    assert get(lab, "127.0.0.1", 10256, "/healthz")["status"] == 200
    tainted = json.loads(json.dumps(node))
    tainted["spec"]["taints"] = [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
                                  "effect": "NoSchedule"}]
    api.put([tainted])
    r = wait_for(lambda: (lambda x: x if x.get("status") == 503 else None)(get(lab, "127.0.0.1", 10256, "/healthz")),
                 20, "/healthz 503 for the tainted Node")
    assert json.loads(r["body"])["nodeEligible"] is False
    assert get(lab, "127.0.0.1", 10256, "/livez")["status"] == 200
    api.put([node])
    wait_for(lambda: get(lab, "127.0.0.1", 10256, "/healthz").get("status") == 200, 20, "/healthz 200 again")

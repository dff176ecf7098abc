"""Kubernetes Events (issue 28), against the test API server, which validates them as the real one
does (events.k8s.io/v1): upstream's Node event "Starting" at start and its Warnings when the
health or metrics server cannot start, upstream's FailedToStartServiceHealthcheck on a Service
whose health-check node port is taken, and ours on a Service whose rules the kernel refuses
(Warning FailedToProgramService, a series as the refusal repeats) and when they are programmed
again (Normal ServiceProgrammed). Events never hold up a sync, and when the API server does not
take them they are dropped and counted. Each event request is a POST (a PATCH for a series), so
kubernetes-mixin's POST latency panel has data."""
import os
import subprocess
import time

import pytest

from apiserver_lab import ApiServer
from netlab import PY, endpoint_slice, expect_answers, node_object, service
from test_60_kube_api import wait_for
from test_75_metrics_health import sample, scrape

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]

HOLD_ANY = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True); time.sleep(600)
"""


def hold_port(lab, port):
    """A listener on 0.0.0.0:port in the node namespace (ours: ended with the lab)."""
    p = subprocess.Popen(["ip", "netns", "exec", lab.node, PY, "-c", HOLD_ANY, str(port)], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    lab.procs.append(p)
    assert p.stdout.readline().strip() == "ready"
    return p


def start(lab, api, extra=(), env=None):
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"))
    return lab.start_daemon([f"--kubeconfig={kc}", *extra], manifests=False, env=env)


def hostname_in(lab):
    return subprocess.run(["ip", "netns", "exec", lab.node, "hostname"], capture_output=True, text=True).stdout.strip()


def test_starting_event_on_the_node_as_upstream_records_it_and_its_post_is_measured(lab):
    api = ApiServer(lab)
    api.put([node_object()])
    d = start(lab, api)
    (ev,) = api.wait_events("Starting")
    assert ev["type"] == "Normal" and ev["action"] == "StartKubeProxy" and ev["note"] == "", ev
    assert ev["reportingController"] == "kube-proxy", ev
    assert ev["reportingInstance"] == "kube-proxy-" + hostname_in(lab), ev
    assert ev["regarding"] == {"kind": "Node", "name": "node1", "uid": "node1"}, ev
    # A cluster-scoped object's events live in "default" (client-go's makeEvent), named
    # <object>.<hex nanoseconds>.
    assert ev["metadata"]["namespace"] == "default" and ev["metadata"]["name"].startswith("node1."), ev
    assert ev["eventTime"].endswith("Z") and len(ev["eventTime"].split(".")[1]) == 7, ev["eventTime"]
    posts = [r for r in api.requests() if r["method"] == "POST"]
    assert [(r["path"], r["status"]) for r in posts] == [("/apis/events.k8s.io/v1/namespaces/default/events", 201)], posts
    assert posts[0]["ua"].startswith("kube-proxy-nft"), posts[0]
    # kubernetes-mixin's "Post Request Latency" panel reads this histogram.
    text = scrape(lab)
    assert sample(text, "rest_client_request_duration_seconds_count", verb="POST") == 1, text
    assert sample(text, "rest_client_requests_total", method="POST", code="201") == 1, text
    assert d.alive()


def test_a_refused_service_gets_a_warning_a_series_and_a_normal_event_when_programmed_again(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.put([node_object(), service("keep", HTTP, ["10.96.5.11"]), endpoint_slice("keep", [a.v4], HTTP_SLICE),
             service("bad", HTTP, ["10.96.5.12"]), endpoint_slice("bad", [a.v4], HTTP_SLICE)])
    # The libnftables helper refuses, as the kernel refuses, whatever names default/bad's port http
    # (test_42_isolation.py): the daemon leaves the service out and retries it with backoff.
    d = start(lab, api, env={"KPN_FAULT_REFUSE_TEXT": '"default/bad:http"'})
    expect_answers(lab.agent(client), "10.96.5.11", 80, {a.v4}, {client.v4}, n=2, what="keep beside the refused one")
    (warn,) = api.wait_events("FailedToProgramService")
    assert warn["type"] == "Warning" and warn["action"] == "SyncProxyRules", warn
    assert warn["regarding"] == {"apiVersion": "v1", "kind": "Service", "namespace": "default", "name": "bad"}, warn
    assert warn["metadata"]["namespace"] == "default", warn
    assert "node node1: nftables refuses the rules of this Service" in warn["note"], warn
    assert len(warn["note"]) <= 1024
    # Each retry the kernel refuses again is the same event: one series, counted by a PATCH, not
    # a new event each time (the retries come at 0.5, 1, 2 s...).
    (warn,) = api.wait_events("FailedToProgramService", pred=lambda e: (e.get("series") or {}).get("count", 0) >= 2)
    assert warn["series"]["lastObservedTime"] >= warn["eventTime"], warn
    assert [r["status"] for r in api.requests() if r["method"] == "PATCH"][:1] == [200]
    assert len(api.events("FailedToProgramService")) == 1
    assert sample(scrape(lab), "rest_client_request_duration_seconds_count", verb="PATCH") >= 1

    # The owner fixes it (here: the port's name, which the failpoint refused): programmed again.
    api.put([service("bad", [("web", 80, "TCP", 8080)], ["10.96.5.12"]),
             endpoint_slice("bad", [a.v4], [("web", 8080, "TCP")])])
    (ok,) = api.wait_events("ServiceProgrammed")
    assert ok["type"] == "Normal" and ok["regarding"]["name"] == "bad", ok
    assert ok["note"] == "node node1: the rules of this Service are programmed again", ok
    expect_answers(lab.agent(client), "10.96.5.12", 80, {a.v4}, {client.v4}, n=2, what="bad, programmed again")
    assert d.alive()


def test_events_never_hold_up_a_sync_and_are_dropped_with_a_metric_when_the_api_does_not_take_them(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    api.put([node_object(), service("web", HTTP, ["10.96.5.21"]), endpoint_slice("web", [a.v4], HTTP_SLICE)])
    # Every event request hangs for 20 s, then its connection is dropped.
    api.hang(20, match="/events", then="close")
    d = start(lab, api)
    cli = lab.agent(client)
    expect_answers(cli, "10.96.5.21", 80, {a.v4}, {client.v4}, n=2, what="the first sync, the Starting event hanging")
    t0 = time.monotonic()
    api.put([endpoint_slice("web", [b.v4], HTTP_SLICE)])
    wait_for(lambda: cli.tcp("10.96.5.21", 80, timeout=0.5).split()[:1] == [b.v4], 10, "the change programmed")
    assert time.monotonic() - t0 < 5, "a sync waited for the hanging event"
    assert api.events() == []

    # An API server that answers 503 to events: the recorder tries three times, then drops the
    # event and counts it; the daemon's own work goes on.
    api.hang(0)
    api.fail(503, count=1000, match="/events", retry_after=0)
    d.stop()
    d2 = start(lab, api)
    wait_for(lambda: (sample(scrape(lab), "kubeproxy_nftables_events_dropped_total", reason="api_unavailable") or 0) >= 1,
             30, "the dropped event counted")
    assert api.events() == []
    assert d2.alive()


def test_server_bind_failures_are_warnings_on_the_node_and_a_taken_health_check_port_one_on_the_service(lab):
    api = ApiServer(lab)
    (a,) = lab.add_backends(1, tcp=[80], udp=[])
    api.put([node_object(),
             service("lb", [("p80", 80, "TCP", 80, 30080)], ["10.96.5.31"], type="LoadBalancer", etp="Local",
                     lb_ingress=["198.51.100.31"], health_check_node_port=32100),
             endpoint_slice("lb", [a.v4], [("p80", 80, "TCP")])])
    hold_port(lab, 32100)
    hold_port(lab, 10249)
    # Without bindAddressHardFail the metrics server retries; upstream's reason says it did not start.
    d = start(lab, api)
    (m,) = api.wait_events("FailedToStartMetricServer")
    assert m["type"] == "Warning" and m["action"] == "StartKubeProxy" and m["regarding"]["kind"] == "Node", m
    assert "metrics server: bind 127.0.0.1:10249: Address already in use" in m["note"], m
    (hc,) = api.wait_events("FailedToStartServiceHealthcheck")
    assert hc["action"] == "Listen" and hc["regarding"]["kind"] == "Service" and hc["regarding"]["name"] == "lb", hc
    assert hc["metadata"]["namespace"] == "default", hc
    assert hc["note"].startswith('node node1 failed to start healthcheck "default/lb" on port 32100: '), hc
    d.stop()
    # With it, as upstream: the Warning, then exit 1 (the event is sent before the exit).
    hold_port(lab, 10256)
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "hard.kubeconfig"))
    hard = lab.daemon([f"--kubeconfig={kc}", "--bind-address-hard-fail"], manifests=False, label="hard").start()
    assert hard.proc.wait(timeout=30) == 1
    (h,) = api.wait_events("FailedToStartProxierHealthcheck")
    assert "healthz server: bind *:10256: Address already in use (bindAddressHardFail: exiting)" in h["note"], h

"""Health-check node ports with real HTTP from the outside client (upstream's
TestHealthCheckNodePortWhenTerminating and the service health server's contract): an
externalTrafficPolicy=Local LoadBalancer Service answers on its healthCheckNodePort at the node's
addresses, 200 while this node has a ready endpoint, 503 when its local endpoints only terminate
(or live elsewhere); ports open and close as services come and go."""
import json
import re

import pytest

from netlab import NODE_NAME, NODE_V4, NODE_V6, PY, endpoint_slice, node_object, service, sh
from test_70_external import LB_V4, LB_V6, REMOTE

pytestmark = pytest.mark.usefixtures("daemon_bin")

HC_PORT, HC_PORT_2 = 30200, 30201
GET = r"""
import http.client, json, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    c = http.client.HTTPConnection(host, port, timeout=2)
    c.request("GET", "/anything")
    r = c.getresponse()
    print(json.dumps({"status": r.status, "body": r.read().decode(), "type": r.getheader("Content-Type")}))
except OSError as e:
    print(json.dumps({"error": type(e).__name__}))
"""


def http_get(client, host, port):
    out = sh([PY, "-c", GET, host, str(port)], ns=client.ns).stdout
    return json.loads(out)


def lb(name, cluster_ips, hc_port, np):
    return service(name, [("p80", 80, "TCP", 80, np)], cluster_ips, type="LoadBalancer", etp="Local",
                   lb_ingress=[LB_V4, LB_V6], health_check_node_port=hc_port)


def eps(pods, fam, node=NODE_NAME, ready=True, terminating=False):
    return [{"ip": getattr(p, fam), "node": node,
             "conditions": {"ready": ready, "serving": True, "terminating": terminating}} for p in pods]


def slices_of(name, local, remote=(), local_ready=True):
    out = []
    for fam, kind in (("v4", "IPv4"), ("v6", "IPv6")):
        items = eps(local, fam, ready=local_ready, terminating=not local_ready) + eps(remote, fam, node=REMOTE)
        out.append(endpoint_slice(name, items, [("p80", 80, "TCP")], address_type=kind))
    return out


def expect_health(client, port, code, local, name="hc"):
    for host in (NODE_V4, NODE_V6):
        r = http_get(client, host, port)
        assert r.get("status") == code, f"{host}:{port}: {r}"
        assert r["type"] == "application/json"
        assert json.loads(r["body"]) == {"service": {"namespace": "default", "name": name},
                                         "localEndpoints": local, "serviceProxyHealthy": True}, r


def expect_closed(client, port):
    for host in (NODE_V4, NODE_V6):
        r = http_get(client, host, port)
        assert r.get("error") == "ConnectionRefusedError", f"{host}:{port} should be closed: {r}"


def test_health_check_node_port_follows_local_endpoints_and_terminating_ones_do_not_count(lab):
    client = lab.add_external_client()
    a, b, far = lab.add_backends(3, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] + slices_of("hc", [a, b], [far]))
    d = lab.start_daemon()
    expect_health(client, HC_PORT, 200, 2)

    # Both local endpoints terminate (still serving): the node must stop getting new LB traffic.
    with d.change():
        m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] +
                slices_of("hc", [a, b], [far], local_ready=False))
    expect_health(client, HC_PORT, 503, 0)

    # One ready local endpoint again.
    with d.change():
        m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] + slices_of("hc", [a], [far]))
    expect_health(client, HC_PORT, 200, 1)

    # Only a remote endpoint: 503.
    with d.change():
        m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] + slices_of("hc", [], [far]))
    expect_health(client, HC_PORT, 503, 0)

    # A second service opens its own port; removing the first closes only the first.
    with d.change():
        m.write("hc2.yaml", [lb("hc2", ["10.96.0.52", "fd00:10:96::52"], HC_PORT_2, 30052)] + slices_of("hc2", [b]))
    expect_health(client, HC_PORT_2, 200, 1, name="hc2")
    with d.change():
        m.delete("hc.yaml")
    expect_closed(client, HC_PORT)
    expect_health(client, HC_PORT_2, 200, 1, name="hc2")

    # eTP=Cluster services have no health-check server.
    with d.change():
        m.write("hc2.yaml", [service("hc2", [("p80", 80, "TCP", 80, 30052)], ["10.96.0.52", "fd00:10:96::52"],
                                     type="LoadBalancer", etp="Cluster", lb_ingress=[LB_V4, LB_V6])] +
                slices_of("hc2", [b]))
    expect_closed(client, HC_PORT_2)
    assert not d.failed_syncs()


def test_health_check_port_answers_503_with_the_reason_while_the_proxy_is_unhealthy(lab):
    """Beyond upstream (kubernetes/kubernetes#115825): while the proxy is unhealthy (a change has
    waited 2 x sync-period: the kernel refuses every commit, so this node's rules are stale) the
    health-check port of an eTP=Local service with a ready local endpoint answers 503, and its
    body says why; 200 again once a sync lands."""
    from test_75_metrics_health import OwnedTable, wait_for

    client = lab.add_external_client()
    a, b = lab.add_backends(2, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] + slices_of("hc", [a]))
    lab.start_daemon(sync_flags=("--min-sync-period=0s", "--sync-period=2s"))
    expect_health(client, HC_PORT, 200, 1)

    owner = OwnedTable(lab)
    m.write("hc.yaml", [lb("hc", ["10.96.0.51", "fd00:10:96::51"], HC_PORT, 30051)] + slices_of("hc", [a, b]))
    r = wait_for(lambda: (lambda x: x if x.get("status") == 503 else None)(http_get(client, NODE_V4, HC_PORT)),
                 20, "the health-check port to answer 503")
    body = json.loads(r["body"])
    assert body["serviceProxyHealthy"] is False and body["localEndpoints"] == 1, body
    assert re.match(r"^kube-proxy is unhealthy: IPv4, IPv6: a change has waited \d+\.\ds for a successful sync "
                    r"\(limit 4\.0s\); the last one was at \d{4}-", body["reason"]), body["reason"]
    assert set(body) == {"service", "localEndpoints", "serviceProxyHealthy", "reason"}

    owner.release()
    wait_for(lambda: http_get(client, NODE_V4, HC_PORT).get("status") == 200, 20, "200 again")
    expect_health(client, HC_PORT, 200, 2)

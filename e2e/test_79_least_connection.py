"""Least connection (issue 26) with real connections: long-lived TCP connections opened one after
another through a least-connection service end up evenly spread; after the connections on one
endpoint close, the next go there; UDP flows count as inactive; a service without the
annotation keeps every endpoint in its slots and has no per-endpoint gauges; IPv4 and IPv6.

Each connection waits until the slots name the endpoints with the fewest connections as the test
counts them (the daemon's choice has reached the kernel): the decisions are the daemon's, the
waiting is on that condition, never on a fixed sleep."""
import json
import time

import pytest

from netlab import endpoint_slice, http_get, metric_sample, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

VIP = {"v4": "10.96.0.78", "v6": "fd00:10:96::78"}
PLAIN_VIP = {"v4": "10.96.0.79", "v6": "fd00:10:96::79"}
TABLE = {"v4": "ip", "v6": "ip6"}
LC = {"kube-proxy-nft.io/scheduler": "least-connection"}


def lc_service(name, vip, proto="TCP", port=80, target=8080, annotations=LC):
    svc = service(name, [("p", port, proto, target)], [vip])
    if annotations:
        svc["metadata"]["annotations"] = dict(annotations)
    return svc


def slots(lab, family, vip, port=80, proto="tcp"):
    """The endpoint addresses the destination's slots name now (what the next connection picks from)."""
    out = sh(["nft", "-j", "list", "map", TABLE[family], "kube-proxy", f"backends-{proto}"], ns=lab.node,
             check=False).stdout
    if not out:
        return set()
    found = set()
    for item in json.loads(out)["nftables"]:
        for elem in item.get("map", {}).get("elem", []):
            key, value = elem
            key = key["elem"]["val"] if "elem" in key else key  # an element with a comment
            key = key["concat"]
            if key[0] == vip and key[1] == port:
                found.add(value["concat"][0])
    return found


def wait_slots(lab, family, vip, want, port=80, proto="tcp", timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        now = slots(lab, family, vip, port, proto)
        if now == want:
            return
        assert time.monotonic() < deadline, f"the slots of {vip}:{port} name {sorted(now)}, not {sorted(want)}"
        time.sleep(0.01)


def least(counts):
    low = min(counts.values())
    return {ep for ep, n in counts.items() if n == low}


def endpoint_gauge(lab, endpoint, state, service="lc"):
    body = http_get(lab.node, "127.0.0.1", 10249, "/metrics").get("body", "")
    return metric_sample(body, "kubeproxy_nftables_endpoint_connections", service=service, endpoint=endpoint,
                         state=state)


def wait_gauge(lab, endpoint, state, want, service="lc", timeout=10.0):
    deadline = time.monotonic() + timeout
    while (got := endpoint_gauge(lab, endpoint, state, service)) != want:
        assert time.monotonic() < deadline, f"{endpoint} {state}: {got}, not {want}"
        time.sleep(0.05)


def gauge_endpoint(addr, port=8080):
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_long_lived_connections_spread_evenly_and_a_freed_endpoint_takes_the_next(lab, family):
    pods = lab.add_backends(3, tcp=[], udp=[], stream=[8080])
    eps = [p.v4 if family == "v4" else p.v6 for p in pods]
    vip, plain = VIP[family], PLAIN_VIP[family]
    m = lab.manifests
    m.write("node.yaml", node_object())
    addr_type = "IPv4" if family == "v4" else "IPv6"
    m.write("lc.yaml", [lc_service("lc", vip), endpoint_slice("lc", eps, [("p", 8080, "TCP")], address_type=addr_type)])
    m.write("plain.yaml", [lc_service("plain", plain, annotations=None),
                           endpoint_slice("plain", eps, [("p", 8080, "TCP")], address_type=addr_type)])
    lab.start_daemon(["--endpoint-connection-metrics"])
    cli = lab.agent(lab.add_pod("client"))

    counts = {ep: 0 for ep in eps}
    held = {}

    def open_one(i):
        want = least(counts)
        wait_slots(lab, family, vip, want)
        answer = cli.hold_open(f"c{i}", vip, 80)
        ep = answer.split()[0]
        assert ep in want, f"connection {i} reached {answer!r}, not one of the least loaded {sorted(want)}"
        counts[ep] += 1
        held[f"c{i}"] = ep

    # Nine long-lived connections, one after another: three on each endpoint.
    for i in range(9):
        open_one(i)
    assert sorted(counts.values()) == [3, 3, 3], counts
    for ep in eps:
        wait_gauge(lab, gauge_endpoint(ep), "active", 3)
    # The service without the annotation: every endpoint in its slots, no gauges.
    assert slots(lab, family, plain) == set(eps)
    assert endpoint_gauge(lab, gauge_endpoint(eps[0]), "active", service="plain") is None

    # The connections on one endpoint close: it is the least loaded (closed connections linger in
    # conntrack as inactive, 1/256 of an established one); the next three go there.
    freed = eps[1]
    for hid, ep in list(held.items()):
        if ep == freed:
            cli.hold_close(hid)
            del held[hid]
    wait_gauge(lab, gauge_endpoint(freed), "active", 0)
    for i in range(9, 12):
        wait_slots(lab, family, vip, {freed})
        answer = cli.hold_open(f"c{i}", vip, 80)
        assert answer.split()[0] == freed, f"connection {i} reached {answer!r}, not the freed {freed}"
    assert slots(lab, family, plain) == set(eps)


def test_udp_flows_count_as_inactive(lab):
    pods = lab.add_backends(3, tcp=[], udp=[5353])
    eps = [p.v4 for p in pods]
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("lc.yaml", [lc_service("lc", VIP["v4"], proto="UDP", port=53, target=5353),
                        endpoint_slice("lc", eps, [("p", 5353, "UDP")])])
    lab.start_daemon(["--endpoint-connection-metrics"])
    cli = lab.agent(lab.add_pod("client"))
    counts = {ep: 0 for ep in eps}
    # Six flows, one after another (each its own socket: its own conntrack entry, kept by its
    # answer): each counts as one inactive connection, so they spread two by two.
    for i in range(6):
        want = least(counts)
        wait_slots(lab, "v4", VIP["v4"], want, port=53, proto="udp")
        cli.udp_open(f"u{i}", VIP["v4"], 53)
        answer = cli.udp_ask(f"u{i}")
        ep = answer.split()[0]
        assert ep in want, f"flow {i} reached {answer!r}, not one of {sorted(want)}"
        counts[ep] += 1
    assert sorted(counts.values()) == [2, 2, 2], counts
    for ep in eps:
        wait_gauge(lab, gauge_endpoint(ep, 5353), "inactive", 2)
        assert endpoint_gauge(lab, gauge_endpoint(ep, 5353), "active") == 0

"""ClientIP session affinity with real connections (IPv4 and IPv6): each client sticks to one
endpoint until the timeout, then picks at random again; an endpoint that goes takes its clients'
stickiness with it (their next connection reaches a live endpoint); a daemon restart keeps it."""
import time

import pytest

import netlab
from netlab import answers, connections_to_see_all, endpoint_slice, node_object, service

pytestmark = pytest.mark.usefixtures("daemon_bin")

V4, V6 = "10.96.0.73", "fd00:10:96::73"
PORTS = [("http", 80, "TCP", 8080)]
SLICE_PORTS = [("http", 8080, "TCP")]


def sticky_service(timeout):
    svc = service("sticky", PORTS, [V4, V6])
    svc["spec"]["sessionAffinity"] = "ClientIP"
    svc["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": timeout}}
    return svc


def write(lab, eps, timeout):
    lab.manifests.write("sticky.yaml", [
        sticky_service(timeout),
        endpoint_slice("sticky", [p.v4 for p in eps], SLICE_PORTS, address_type="IPv4"),
        endpoint_slice("sticky", [p.v6 for p in eps], SLICE_PORTS, address_type="IPv6"),
    ])


def stuck_to(agent, host, n=20, what=""):
    """n new connections all answered by one endpoint: return it."""
    own, _, errs = answers(agent.many("tcp", host, 80, n))
    assert not errs, f"{what} {host}: {sorted(set(errs))}"
    assert len(own) == 1, f"{what} {host}: {n} connections spread over {own}, expected one endpoint"
    return next(iter(own))


def start_lab(lab, timeout):
    clients = [lab.add_pod("client1"), lab.add_pod("client2")]
    eps = lab.add_backends(3, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    write(lab, eps, timeout)
    d = lab.start_daemon()
    return d, [lab.agent(c) for c in clients], eps


def setup_and_stick(lab, family, timeout):
    """Two clients, three endpoints; each client's 20 connections stick to one endpoint."""
    d, agents, eps = start_lab(lab, timeout)
    host = V4 if family == "v4" else V6
    addr = (lambda p: p.v4) if family == "v4" else (lambda p: p.v6)
    stuck = [stuck_to(a, host, what=f"client{i + 1}") for i, a in enumerate(agents)]
    return d, agents, eps, host, addr, stuck


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_clients_stick_then_pick_at_random_after_the_timeout(lab, family):
    d, agents, eps, host, addr, stuck = setup_and_stick(lab, family, timeout=3)
    print("stuck to", stuck)
    assert set(stuck) <= {addr(p) for p in eps}
    # The map holds the clients' entries with their expiry.
    table = lab.table("ip" if family == "v4" else "ip6")
    assert "expires" in table, f"no affinity entry with a timeout in the table:\n{table}"
    # After the timeout (3 s, refreshed by each connection above), the choice is random again:
    # one connection after each quiet spell of 3.5 s; over enough spells every endpoint answers.
    seen = set()
    deadline = time.monotonic() + 60
    while seen != {addr(p) for p in eps} and time.monotonic() < deadline:
        time.sleep(3.5)
        r = agents[0].tcp(host, 80)
        assert not r.startswith("ERR:"), r
        seen.add(r.split()[0])
    assert seen == {addr(p) for p in eps}, f"after timeouts client1 reached only {seen}"


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_a_removed_endpoint_releases_its_clients_and_a_restart_keeps_stickiness(lab, family):
    d, agents, eps, host, addr, stuck = setup_and_stick(lab, family, timeout=600)

    # A restart (the table is not flushed) keeps every client where it was.
    d.stop()
    d.start()
    d.wait_syncs(1)
    for i, a in enumerate(agents):
        assert stuck_to(a, host, what=f"client{i + 1} after a restart") == stuck[i]

    # The endpoint client1 is stuck to goes: its next connection reaches a live one, and it sticks
    # there. client2 reaches a live endpoint too (it stays where it was unless its endpoint is the
    # one that moved into the freed slot: docs/architecture.md, session affinity).
    gone = stuck[0]
    left = [p for p in eps if addr(p) != gone]
    with d.change():
        write(lab, left, timeout=600)
    live = {addr(p) for p in left}
    moved = stuck_to(agents[0], host, what="client1 after its endpoint left")
    assert moved != gone and moved in live
    now = stuck_to(agents[1], host, what="client2 after client1's endpoint left")
    assert now in live
    print(f"client2: {stuck[1]} -> {now}")


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_a_client_stays_on_its_endpoint_whichever_address_of_the_service_port_it_dials(lab, family):
    """As upstream: the scope of an entry is the service port, so the ClusterIP, an external IP
    and the NodePort all reach the endpoint a client is stuck to."""
    client = lab.add_pod("client1")
    eps = lab.add_backends(3, tcp=[8080], udp=[])
    ext = "192.0.2.73" if family == "v4" else "2001:db8:73::1"
    svc = sticky_service(600)
    svc["spec"]["type"] = "NodePort"
    svc["spec"]["ports"][0]["nodePort"] = 30073
    svc["spec"]["externalIPs"] = ["192.0.2.73", "2001:db8:73::1"]
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("sticky.yaml", [
        svc,
        endpoint_slice("sticky", [p.v4 for p in eps], SLICE_PORTS, address_type="IPv4"),
        endpoint_slice("sticky", [p.v6 for p in eps], SLICE_PORTS, address_type="IPv6"),
    ])
    lab.start_daemon()
    agent = lab.agent(client)
    cluster_ip, node_ip = (V4, netlab.NODE_V4) if family == "v4" else (V6, netlab.NODE_V6)
    first = stuck_to(agent, cluster_ip, what="ClusterIP")
    for host, port in [(ext, 80), (node_ip, 30073), (cluster_ip, 80)]:
        own, _, errs = answers(agent.many("tcp", host, port, 10))
        assert not errs and set(own) == {first}, f"{host}:{port} after sticking to {first} via {cluster_ip}: {own} {errs}"

"""Shared by the takeover tests (test_80, test_81): a dual-stack NodePort service `web` (http 80 ->
8080, nodePort 30080, and a long-lived `chat` port 7000 -> 7070) and `none` (no endpoints), and
the takeover itself: our
daemon starts while a NEW TCP connection every 20 ms and one long-lived connection per family keep
running, and every one of them must get through."""
import time

import netlab
from netlab import endpoint_slice, expect_answers, expect_refused, node_object, service

V4 = {"family": "ip", "addr": lambda pod: pod.v4, "web": "10.96.8.1", "none": "10.96.8.2", "gone": "10.96.8.3",
      "cidr": netlab.CLUSTER_CIDR_V4, "service_cidr": "10.96.0.0/16", "node": netlab.NODE_V4}
V6 = {"family": "ip6", "addr": lambda pod: pod.v6, "web": "fd00:10:96::8:1", "none": "fd00:10:96::8:2",
      "gone": "fd00:10:96::8:3",
      "cidr": netlab.CLUSTER_CIDR_V6, "service_cidr": "fd00:10:96::/112", "node": netlab.NODE_V6}
FAMILIES = (V4, V6)
NODE_PORT = 30080
PORTS = [("http", 80, "TCP", 8080, NODE_PORT), ("chat", 7000, "TCP", 7070)]
SLICE_PORTS = [("http", 8080, "TCP"), ("chat", 7070, "TCP")]


def write_manifests(lab, eps):
    """node.yaml, and web.yaml with `web` served by eps and `none`."""
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("web.yaml", [
        service("web", PORTS, [V4["web"], V6["web"]], type="NodePort"),
        endpoint_slice("web", [p.v4 for p in eps], SLICE_PORTS),
        endpoint_slice("web", [p.v6 for p in eps], SLICE_PORTS, address_type="IPv6"),
        service("none", [("http", 80, "TCP", 8080)], [V4["none"], V6["none"]]),
    ])


def outside(lab):
    """(an agent in an outside client, the node's addresses): for assert_serves' NodePort check."""
    return lab.agent(lab.add_external_client()), lab.node_addresses()


def assert_serves(agent, client, eps, what, outside=None):
    """Both families: `web` answers from exactly eps and sees the client's own address (pod to
    ClusterIP is not masqueraded); `none` rejects. outside=(agent, node addresses): web's NodePort
    on the node's primary address answers an outside client, masqueraded to a node address."""
    for fam in FAMILIES:
        addr = fam["addr"]
        expect_answers(agent, fam["web"], 80, [addr(p) for p in eps], [addr(client)],
                       what=f"{fam['family']} {what}")
        expect_refused(agent, fam["none"], 80, what=f"{fam['family']} {what}: service without endpoints")
        if outside:
            expect_answers(outside[0], fam["node"], NODE_PORT, [addr(p) for p in eps], outside[1],
                           what=f"{fam['family']} {what}: NodePort from outside")


def wait_loop_attempts(agent, more, timeout=20.0):
    """Waits until the 20 ms loop made `more` further attempts."""
    start = agent.loop_stats()["attempts"]
    deadline = time.monotonic() + timeout
    while agent.loop_stats()["attempts"] < start + more:
        assert time.monotonic() < deadline, f"the 20 ms loop made no {more} attempts in {timeout} s"
        time.sleep(0.05)


def take_over(lab, client, eps, daemon_args=(), wait_log=None):
    """Starts our daemon under the loops; returns it once its first sync (and, with wait_log, that
    log line) is followed by 50 more loop attempts. Asserts that nothing failed."""
    loops = [(fam, lab.agent(client)) for fam in FAMILIES]
    for fam, a in loops:
        a.loop_start(fam["web"], 80)
        a.stream_start("chat", fam["web"], 7000)
    try:
        wait_loop_attempts(loops[0][1], 10)
        d = lab.start_daemon(daemon_args)
        if wait_log:
            d.wait_for(wait_log)
        wait_loop_attempts(loops[0][1], 50)
    finally:
        stats = [(fam, a.loop_stop(), a.stream_stop("chat")) for fam, a in loops]
    print("syncs:", d.syncs())
    for fam, loop, stream in stats:
        f = fam["family"]
        print(f"{f}: 20 ms loop {loop}; long-lived connection {stream}")
        assert loop["failures"] == [], \
            f"{f}: {len(loop['failures'])} of {loop['attempts']} new connections failed during the takeover " \
            f"(t in s, error): {loop['failures'][:20]}"
        assert set(loop["answers"]) == {fam["addr"](p) for p in eps}, f"{f}: {loop['answers']}"
        assert stream["failures"] == [], f"{f}: the long-lived connection broke: {stream}"
        assert len(stream["answers"]) == 1, f"{f}: the long-lived connection changed endpoint: {stream}"
        assert stream["exchanges"] >= stream["elapsed"] / 0.02 * 0.3, f"{f}: the long-lived connection stalled: {stream}"
    assert d.failed_syncs() == [], d.failed_syncs()
    return d

"""Topology hints and the schedulers with real connections: a 3-zone slice with hints answers from
this node's zone only, a missing hint means every endpoint, PreferSameNode with a local endpoint
means only it; round-robin rotates exactly; source-hash is stable per client, spreads clients,
and moves few of them when an endpoint goes (Maglev)."""
import pytest

from netlab import answers, endpoint_slice, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

PORTS = [("http", 80, "TCP", 8080)]
SLICE_PORTS = [("http", 8080, "TCP")]
VIP = "10.96.0.74"


def zoned_node(zone):
    n = node_object()
    n["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    return n


def hinted_slice(eps, zones, nodes=None, family="v4"):
    """eps: pods; zones[i]: the zone hint of eps[i] (None: no hint); nodes[i]: node name and hint."""
    sl = endpoint_slice("topo", [{"ip": p.v4 if family == "v4" else p.v6,
                                  "node": (nodes[i] if nodes else "node1")} for i, p in enumerate(eps)],
                        SLICE_PORTS, address_type="IPv4" if family == "v4" else "IPv6")
    for i, ep in enumerate(sl["endpoints"]):
        hints = {}
        if zones[i]:
            hints["forZones"] = [{"name": zones[i]}]
        if nodes and nodes[i]:
            hints["forNodes"] = [{"name": nodes[i]}]
        if hints:
            ep["hints"] = hints
    return sl


def topo_service():
    svc = service("topo", PORTS, [VIP])
    svc["spec"]["trafficDistribution"] = "PreferClose"
    return svc


def test_zone_hints_missing_hints_and_same_node(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(4, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", zoned_node("zone-a"))
    zones = ["zone-a", "zone-a", "zone-b", "zone-c"]
    m.write("topo.yaml", [topo_service(), hinted_slice(eps, zones)])
    d = lab.start_daemon()
    cli = lab.agent(client)

    def who(n=40):
        own, _, errs = answers(cli.many("tcp", VIP, 80, n))
        assert not errs, sorted(set(errs))
        return set(own)

    assert who() == {eps[0].v4, eps[1].v4}, "zone hints: only zone-a's endpoints may answer"
    # The Node moves to zone-b: re-rendered, only zone-b's endpoint answers.
    with d.change():
        m.write("node.yaml", zoned_node("zone-b"))
    assert who() == {eps[2].v4}
    # One endpoint without a hint: all answer.
    with d.change():
        m.write("topo.yaml", [topo_service(), hinted_slice(eps, ["zone-a", "zone-a", "zone-b", None])])
    assert who(60) == {p.v4 for p in eps}
    # PreferSameNode: node hints on all, one of them this node's: only it answers.
    with d.change():
        m.write("topo.yaml", [topo_service(), hinted_slice(eps, zones, nodes=["node2", "node1", "node3", "node4"])])
    assert who() == {eps[1].v4}


def rr_or_sh_service(name, vip, scheduler):
    svc = service(name, PORTS, [vip])
    svc["metadata"]["annotations"] = {"kube-proxy-nft.io/scheduler": scheduler}
    return svc


def test_round_robin_rotates_exactly(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(3, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("rr.yaml", [rr_or_sh_service("rr", VIP, "round-robin"),
                                    endpoint_slice("rr", [p.v4 for p in eps], SLICE_PORTS)])
    lab.start_daemon()
    res = lab.agent(client).many("tcp", VIP, 80, 30)
    seq = [r.split()[0] for r in res]
    assert not [r for r in res if r.startswith("ERR:")], res
    first = seq[:3]
    assert len(set(first)) == 3, f"the first three connections did not reach three endpoints: {seq}"
    assert seq == first * 10, f"not an exact rotation: {seq}"


def test_source_hash_is_stable_spreads_and_moves_few_clients(lab):
    eps = lab.add_backends(5, tcp=[8080], udp=[])
    client = lab.add_pod("client")
    # 30 client addresses on the client pod (the pod's own address is its route back).
    srcs = [f"10.244.1.{i}" for i in range(1, 31)]
    sh(["ip", "-n", client.ns, "-batch", "-"], input="".join(f"addr add {s}/32 dev eth0\n" for s in srcs))
    sh(["ip", "-n", lab.node, "-batch", "-"], input="".join(f"route add {s}/32 dev {client.veth}\n" for s in srcs))
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("sh.yaml", [rr_or_sh_service("sh", VIP, "source-hash"),
                        endpoint_slice("sh", [p.v4 for p in eps], SLICE_PORTS)])
    d = lab.start_daemon()
    cli = lab.agent(client)

    def where():
        out = {}
        for s in srcs:
            own, _, errs = answers(cli.many("tcp", VIP, 80, 20 if s == srcs[0] else 3, bind=s))
            assert not errs, (s, sorted(set(errs)))
            assert len(own) == 1, f"client {s} was not stable: {own}"
            out[s] = next(iter(own))
        return out

    before = where()
    assert set(before.values()) == {p.v4 for p in eps}, f"30 clients did not reach all 5 endpoints: {before}"
    gone = before[srcs[0]]
    with d.change():
        m.write("sh.yaml", [rr_or_sh_service("sh", VIP, "source-hash"),
                            endpoint_slice("sh", [p.v4 for p in eps if p.v4 != gone], SLICE_PORTS)])
    after = where()
    stayed = [s for s in srcs if before[s] != gone]
    moved = [s for s in stayed if after[s] != before[s]]
    print(f"{len(moved)} of {len(stayed)} clients not on the removed endpoint moved")
    assert all(after[s] != gone for s in srcs)
    assert len(moved) * 4 <= len(stayed), f"{len(moved)} of {len(stayed)} moved (Maglev: about none)"

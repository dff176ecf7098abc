"""Topology hints and the schedulers with real connections: a 3-zone slice with hints answers from
this node's zone only, a missing hint means every endpoint, PreferSameNode with a local endpoint
means only it; round-robin rotates exactly; source-hash is stable per client, spreads clients,
moves only the clients of an endpoint that goes or comes (also when the table grows) and keeps
every client across a restart."""
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


def extra_addresses(lab, pod, addrs):
    """More /32 addresses on a pod, routed to it from the node."""
    sh(["ip", "-n", pod.ns, "-batch", "-"], input="".join(f"addr add {a}/32 dev eth0\n" for a in addrs))
    sh(["ip", "-n", lab.node, "-batch", "-"], input="".join(f"route add {a}/32 dev {pod.veth}\n" for a in addrs))


def sh_client(lab, n):
    """A client pod with n source addresses (its own address stays its route back)."""
    client = lab.add_pod("client")
    srcs = [f"10.244.1.{i}" for i in range(1, n + 1)]
    extra_addresses(lab, client, srcs)
    return lab.agent(client), srcs


def where(cli, srcs, vip=VIP):
    """The endpoint each source address reaches, checking that it is the same every time."""
    out = {}
    for s in srcs:
        own, _, errs = answers(cli.many("tcp", vip, 80, 20 if s == srcs[0] else 3, bind=s))
        assert not errs, (s, sorted(set(errs)))
        assert len(own) == 1, f"client {s} was not stable: {own}"
        out[s] = next(iter(own))
    return out


def sh_manifests(m, eps):
    m.write("sh.yaml", [rr_or_sh_service("sh", VIP, "source-hash"), endpoint_slice("sh", eps, SLICE_PORTS)])


def test_source_hash_is_stable_spreads_and_moves_only_the_changed_endpoints_clients(lab):
    eps = [p.v4 for p in lab.add_backends(5, tcp=[8080], udp=[])]
    m = lab.manifests
    m.write("node.yaml", node_object())
    sh_manifests(m, eps)
    cli, srcs = sh_client(lab, 30)
    d = lab.start_daemon()

    before = where(cli, srcs)
    assert set(before.values()) == set(eps), f"30 clients did not reach all 5 endpoints: {before}"
    gone = before[srcs[0]]
    with d.change():
        sh_manifests(m, [e for e in eps if e != gone])
    after = where(cli, srcs)
    stayed = [s for s in srcs if before[s] != gone]
    moved = [s for s in stayed if after[s] != before[s]]
    assert all(after[s] != gone for s in srcs)
    # The table is sticky (docs/schedulers.md): only the removed endpoint's clients move.
    assert not moved, f"{len(moved)} of {len(stayed)} clients not on the removed endpoint moved: {moved}"
    # The endpoint comes back: it takes its share; every other client stays or moves to it.
    with d.change():
        sh_manifests(m, eps)
    back = where(cli, srcs)
    assert all(back[s] in (after[s], gone) for s in srcs), f"clients moved elsewhere than to the newcomer: {after} -> {back}"
    # A restart adopts the table from the kernel: every client stays where it was.
    d.stop()
    d.start()
    d.wait_syncs(1)
    assert where(cli, srcs) == back


def test_source_hash_crossing_a_table_size_moves_only_the_newcomers_clients(lab):
    """Issue 26 defect 1: 25 -> 26 endpoints grows the table (251 -> 1021 slots before), which
    moved 96 % of the clients. Now the grown table keeps every slot's endpoint and the newcomer
    takes its share: only clients that now reach it moved."""
    pod = lab.add_pod("endpoints")
    eps = [f"10.244.2.{i}" for i in range(1, 27)]
    extra_addresses(lab, pod, eps)
    lab.start_echo(pod, tcp=[8080], addrs=eps)
    m = lab.manifests
    m.write("node.yaml", node_object())
    sh_manifests(m, eps[:25])
    cli, srcs = sh_client(lab, 40)
    d = lab.start_daemon()
    before = where(cli, srcs)
    with d.change():
        sh_manifests(m, eps)
    after = where(cli, srcs)
    moved = [s for s in srcs if after[s] != before[s]]
    print(f"{len(moved)} of {len(srcs)} clients moved, all to the newcomer: {[after[s] for s in moved]}")
    assert all(after[s] == eps[25] for s in moved), f"clients moved to old endpoints: {before} -> {after}"
    # Its share is 1/26 of the clients: 40 of them put 8 or more on it with probability < 0.1 %.
    assert len(moved) < 8, f"{len(moved)} of {len(srcs)} clients moved"

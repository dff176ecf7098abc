"""Dual-stack services: the v6 ClusterIP in `table ip6 kube-proxy`, IPv6 EndpointSlices."""
import pytest

from netlab import answers, endpoint_slice, node_object, service

pytestmark = pytest.mark.usefixtures("daemon_bin")

PORTS = [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)]
SLICE_PORTS = [("http", 8080, "TCP"), ("dns", 5353, "UDP")]


def dual(name, v4, v6, eps, v6_eps=None):
    objs = [service(name, PORTS, [v4, v6])]
    if eps is not None:
        objs.append(endpoint_slice(name, [p.v4 for p in eps], SLICE_PORTS, address_type="IPv4"))
        objs.append(endpoint_slice(name, [p.v6 for p in (v6_eps or eps)], SLICE_PORTS,
                                   address_type="IPv6"))
    return objs


def test_ipv6_cluster_ip_spreads_over_ipv6_endpoints_without_masquerade(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(3)
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("ds.yaml", dual("ds", "10.96.0.70", "fd00:10:96::70", eps))
    lab.start_daemon()
    assert "fd00:10:96::70" in lab.table("ip6"), "v6 ClusterIP missing from table ip6 kube-proxy"
    cli = lab.agent(client)
    for proto, port in (("tcp", 80), ("udp", 53)):
        own, peers, errs = answers(cli.many(proto, "fd00:10:96::70", port, 45))
        print(f"v6 {proto}:", own, errs)
        assert not errs, f"v6 {proto}: {sorted(set(errs))}"
        assert set(own) == {p.v6 for p in eps}, f"v6 {proto}: endpoints that answered {own}"
        assert set(peers) == {client.v6}, f"v6 {proto}: masqueraded: {set(peers)}"
    # the v4 half of the same service is independent and works too
    own, peers, errs = answers(cli.many("tcp", "10.96.0.70", 80, 30))
    assert not errs and set(own) == {p.v4 for p in eps} and set(peers) == {client.v4}


def test_ipv6_no_endpoints_and_unknown_ports_are_refused(lab):
    client = lab.add_pod("client")
    (ep,) = lab.add_backends(1)
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svcs.yaml", dual("empty6", "10.96.0.71", "fd00:10:96::71", None)
                        + dual("live6", "10.96.0.72", "fd00:10:96::72", [ep])
                        + [service("v4slice", PORTS, ["10.96.0.74", "fd00:10:96::74"]),
                           endpoint_slice("v4slice", [ep.v4], SLICE_PORTS)])
    lab.start_daemon()
    cli = lab.agent(client)
    assert cli.tcp("fd00:10:96::72", 80) == f"{ep.v6} {client.v6}", "live v6 service must work"
    assert cli.tcp("10.96.0.74", 80) == f"{ep.v4} {client.v4}", "v4 half with a v4 slice must work"
    results = {
        "TCP v6 no endpoints": cli.tcp("fd00:10:96::71", 80),
        "UDP v6 no endpoints": cli.udp("fd00:10:96::71", 53),
        "TCP v6 unknown port": cli.tcp("fd00:10:96::72", 81),
        "UDP v6 unknown port": cli.udp("fd00:10:96::72", 81),
        "TCP v6 of a dual-stack service with only an IPv4 slice": cli.tcp("fd00:10:96::74", 80),
    }
    print(results)
    bad = {k: v for k, v in results.items() if v != "ERR:ECONNREFUSED"}
    assert not bad, f"expected ECONNREFUSED, got {bad}"


def test_ipv6_hairpin_is_masqueraded_to_a_node_address(lab):
    (ep,) = lab.add_backends(1)
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("hp6.yaml", dual("hp6", "10.96.0.73", "fd00:10:96::73", [ep]))
    lab.start_daemon()
    node_addrs = lab.node_addresses()
    me = lab.agent(ep)
    for proto, port in (("tcp", 80), ("udp", 53)):
        res = me.many(proto, "fd00:10:96::73", port, 5)
        own, peers, errs = answers(res)
        print(proto, res)
        assert not errs, f"v6 hairpin {proto}: {sorted(set(errs))}"
        assert set(own) == {ep.v6}
        assert ep.v6 not in peers, f"v6 hairpin {proto} not masqueraded"
        assert set(peers) <= node_addrs, f"{set(peers)} not node addresses {node_addrs}"

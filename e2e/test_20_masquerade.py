"""Who gets masqueraded: hairpin, traffic from outside the cluster CIDR, --masquerade-all; and who
does not: a pod talking to another pod through a ClusterIP."""
import pytest

import netlab
from netlab import answers, endpoint_slice, node_object, service

pytestmark = pytest.mark.usefixtures("daemon_bin")


def dual_stack_service(name, v4, v6, ports, eps):
    """Service with clusterIPs [v4, v6] and one slice per family over the pods `eps`."""
    slice_ports = [(p[0], p[3], p[2]) for p in ports]
    return [service(name, ports, [v4, v6]),
            endpoint_slice(name, [p.v4 for p in eps], slice_ports, address_type="IPv4"),
            endpoint_slice(name, [p.v6 for p in eps], slice_ports, address_type="IPv6")]


def test_hairpin_endpoint_reaching_itself_through_cluster_ip_is_masqueraded_to_a_node_address(lab):
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[5353])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("hairpin.yaml", [
        service("hairpin", [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)], ["10.96.0.60"]),
        endpoint_slice("hairpin", [ep.v4], [("http", 8080, "TCP"), ("dns", 5353, "UDP")]),
    ])
    lab.start_daemon()
    node_addrs = lab.node_addresses()
    me = lab.agent(ep)
    for proto in ("tcp", "udp"):
        port = 80 if proto == "tcp" else 53
        res = me.many(proto, "10.96.0.60", port, 5)
        own, peers, errs = answers(res)
        print(proto, res)
        assert not errs, f"hairpin over {proto} failed: {sorted(set(errs))}"
        assert set(own) == {ep.v4}, f"{proto}: did not reach itself: {own}"
        assert ep.v4 not in peers, f"{proto}: hairpin not masqueraded, endpoint saw its own IP"
        assert set(peers) <= node_addrs, f"{proto}: source {set(peers)} is not a node address {node_addrs}"


def test_node_to_cluster_ip_is_masqueraded_but_pod_to_cluster_ip_is_not(lab):
    client = lab.add_pod("client")
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[5353])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", dual_stack_service("web", "10.96.0.61", "fd00:10:96::61",
                                           [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
                                           [ep]))
    lab.start_daemon()
    node_addrs = lab.node_addresses()

    pod = lab.agent(client)
    assert pod.tcp("10.96.0.61", 80) == f"{ep.v4} {client.v4}", "pod->ClusterIP must keep the pod IP"
    assert pod.udp("10.96.0.61", 53) == f"{ep.v4} {client.v4}", "pod->ClusterIP must keep the pod IP"
    assert pod.tcp("fd00:10:96::61", 80) == f"{ep.v6} {client.v6}", "pod->ClusterIP must keep the pod IP"

    node = lab.agent("node")
    # Bound to the node's secondary address: without masquerade the endpoint would see exactly
    # that address; masquerade rewrites it to the address the kernel picks for the pod's veth
    # (the primary one).
    res = node.tcp("10.96.0.61", 80, bind=netlab.NODE_V4_SECONDARY)
    print("node->ClusterIP (bound to secondary):", res)
    own, peer = res.split()[:2] if not res.startswith("ERR:") else (res, "")
    assert own == ep.v4, f"node->ClusterIP failed: {res}"
    assert peer != netlab.NODE_V4_SECONDARY, "node->ClusterIP (source outside the cluster CIDR) was not masqueraded"
    assert peer in node_addrs
    for host, port, fn in (("10.96.0.61", 80, node.tcp), ("10.96.0.61", 53, node.udp),
                           ("fd00:10:96::61", 80, node.tcp)):
        res = fn(host, port)
        print(f"node->{host}:{port}:", res)
        assert not res.startswith("ERR:"), f"node->{host}:{port} failed: {res}"
        assert res.split()[1] in node_addrs, res


def test_masquerade_all_masquerades_pod_to_cluster_ip(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(2, tcp=[8080], udp=[5353])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", dual_stack_service("web", "10.96.0.62", "fd00:10:96::62",
                                           [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
                                           eps))
    lab.start_daemon(["--masquerade-all"])
    node_addrs = lab.node_addresses()
    cli = lab.agent(client)
    for proto, host, port in (("tcp", "10.96.0.62", 80), ("udp", "10.96.0.62", 53),
                              ("tcp", "fd00:10:96::62", 80)):
        own, peers, errs = answers(cli.many(proto, host, port, 10))
        print(proto, host, own, set(peers), errs)
        assert not errs, f"{proto} {host}: {sorted(set(errs))}"
        assert client.v4 not in peers and client.v6 not in peers, \
            f"--masquerade-all: {proto} {host} still shows the pod IP"
        assert set(peers) <= node_addrs, f"{set(peers)} are not node addresses"

"""Traffic policies with real packets (upstream's scenarios, reference §7): external and internal
traffic policy, who is masqueraded from where (with and without a local-traffic detector, with
--masquerade-all), terminating endpoints, the eTP=Local no-local-endpoint drop, unallocated
ServiceCIDR addresses, and the other --detect-local-mode variants."""
import pytest

import netlab
from netlab import (NODE_V4, NODE_V6, endpoint_slice, expect_answers, expect_dropped, expect_refused,
                    node_object, service, service_cidr)
from test_70_external import EXT_V4, EXT_V6, LB_V4, LB_V6, REMOTE, slices, v4s, v6s

pytestmark = pytest.mark.usefixtures("daemon_bin")


def lb(name, ip_v4, ip_v6, np, etp="Cluster", itp=None, lb_v4=LB_V4, lb_v6=LB_V6, ext=(EXT_V4, EXT_V6)):
    return service(name, [("p80", 80, "TCP", 80, np)], [ip_v4, ip_v6], type="LoadBalancer", etp=etp, itp=itp,
                   external_ips=list(ext), lb_ingress=[lb_v4, lb_v6])


@pytest.mark.parametrize("etp", ["Local", "Cluster"])
def test_external_traffic_policy(lab, etp):
    """TestExternalTrafficPolicyLocal / …Cluster, IPv4 and IPv6: one remote and one local endpoint.
    Local: outside clients reach only the local endpoint and keep their source; pods reach both
    (short-circuit, source kept); the node reaches both, masqueraded. Cluster: everything reaches
    both; all but pod -> ClusterIP is masqueraded."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    remote, local = lab.add_backends(2, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [lb("svc1", "10.96.0.41", "fd00:10:96::41", 30001, etp=etp)] +
                        slices("svc1", [remote, local], [("p80", 80, "TCP")], remote=[remote]))
    d = lab.start_daemon()
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")
    for fam, eps, ext_ip, lb_ip, node_ip, cip in (
            ("v4", v4s([remote, local]), EXT_V4, LB_V4, NODE_V4, "10.96.0.41"),
            ("v6", v6s([remote, local]), EXT_V6, LB_V6, NODE_V6, "fd00:10:96::41")):
        pod_src, client_src, local_ep = getattr(pod, fam), getattr(client, fam), getattr(local, fam)
        expect_answers(cli, cip, 80, eps, {pod_src}, what="pod to ClusterIP")
        for host, port in ((ext_ip, 80), (lb_ip, 80), (node_ip, 30001)):
            if etp == "Local":
                expect_answers(cli, host, port, eps, {pod_src}, what="pod short-circuit")
                expect_answers(ext, host, port, {local_ep}, {client_src}, n=8, what="external: local only, source kept")
            else:
                expect_answers(cli, host, port, eps, node_addrs, what="pod to external address: masqueraded")
                expect_answers(ext, host, port, eps, node_addrs, what="external: masqueraded")
            expect_answers(node, host, port, eps, node_addrs, what="node: all endpoints, masqueraded")
    assert not d.failed_syncs()
    # A restart adopts every backend range (also the local one ending external-<...>): no change.
    d.stop()
    d = lab.start_daemon(label="restarted")
    assert d.syncs()[0]["ops"] == 0, f"restart changed the ruleset: {d.syncs()[0]}\n{d.tail()}"


def test_overall_svc2_etp_local_without_local_endpoints_drops_outside_traffic(lab):
    """TestOverallNFTablesRules (svc2): eTP=Local with only a remote endpoint. Outside traffic to
    the LB IP, external IP and NodePort is dropped (not rejected); pods still reach the remote
    endpoint with their source, the node masqueraded. A witness behind the node proves the drops
    are drops, not traffic passed on."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    (remote,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.add_upstream_witness([LB_V4, EXT_V4], tcp=[80])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [lb("svc2", "10.96.0.42", "fd00:10:96::42", 30002, etp="Local")] +
                        slices("svc2", [remote], [("p80", 80, "TCP")], remote=[remote]))
    lab.start_daemon()
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")
    for host, port in ((LB_V4, 80), (EXT_V4, 80), (NODE_V4, 30002), (LB_V6, 80), (EXT_V6, 80), (NODE_V6, 30002)):
        v6 = ":" in host
        expect_dropped(ext, host, port, what="outside, no local endpoint")
        expect_answers(cli, host, port, {remote.v6 if v6 else remote.v4}, {pod.v6 if v6 else pod.v4}, n=3,
                       what="pod short-circuit")
        expect_answers(node, host, port, {remote.v6 if v6 else remote.v4}, node_addrs, n=3, what="node")
    table = lab.table("ip")
    assert "198.51.100.10 . tcp . 80 comment \"default/svc2:p80\" : drop" in table, table


MASQ_VARIANTS = {
    # name: (extra daemon args, detector, masquerade-all)
    "base": ((), True, False),
    "no-detector": (("--cluster-cidr=",), False, False),
    "masquerade-all": (("--masquerade-all",), True, True),
    "masquerade-all-no-detector": (("--masquerade-all", "--cluster-cidr="), False, True),
}


def test_internal_external_masquerade_all_variants(lab):
    """TestInternalExternalMasquerade, all four variants, IPv4 and IPv6: svc1 eTP=Cluster, svc2
    eTP=Local, svc3 iTP=Local, each with a local and a remote endpoint; from a pod, the node and
    outside, to the ClusterIP, the NodePort and the LB IP: which endpoints answer, and who is
    masqueraded."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    eps = lab.add_backends(6, tcp=[80], udp=[])
    local = {"svc1": eps[0], "svc2": eps[1], "svc3": eps[2]}
    remote = {"svc1": eps[3], "svc2": eps[4], "svc3": eps[5]}
    lab.manifests.write("node.yaml", node_object())
    objs = []
    for i, (name, etp, itp) in enumerate((("svc1", "Cluster", None), ("svc2", "Local", None),
                                          ("svc3", "Cluster", "Local"))):
        objs.append(service(name, [("p80", 80, "TCP", 80, 30001 + i)], [f"10.96.0.{41 + i}", f"fd00:10:96::{41 + i}"],
                            type="LoadBalancer", etp=etp, itp=itp,
                            lb_ingress=[f"198.51.100.{10 + i}", f"2001:db8:5::{10 + i}"]))
        objs += slices(name, [local[name], remote[name]], [("p80", 80, "TCP")], remote=[remote[name]])
    lab.manifests.write("svcs.yaml", objs)
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")

    for variant, (args, detector, masq_all) in MASQ_VARIANTS.items():
        if lab.daemons:
            lab.daemons[-1].stop()
        lab.start_daemon(list(args), label=variant)
        node_addrs = lab.node_addresses()
        for fam in ("v4", "v6"):
            v6 = fam == "v6"
            node_src = {NODE_V6, netlab.NODE_V6_SECONDARY} if v6 else {NODE_V4}  # the node's own choice
            pod_src, client_src = getattr(pod, fam), getattr(client, fam)
            for i, name in enumerate(("svc1", "svc2", "svc3")):
                both, loc = {getattr(local[name], fam), getattr(remote[name], fam)}, {getattr(local[name], fam)}
                cip = f"fd00:10:96::{41 + i}" if v6 else f"10.96.0.{41 + i}"
                vip = f"2001:db8:5::{10 + i}" if v6 else f"198.51.100.{10 + i}"
                np, node_ip = 30001 + i, NODE_V6 if v6 else NODE_V4
                what = f"[{variant} {fam}] {name}"
                internal = loc if name == "svc3" else both
                # ClusterIP: pods keep their source unless masquerade-all; node and outside are
                # masqueraded only when a detector can tell them apart (or masquerade-all).
                expect_answers(cli, cip, 80, internal, node_addrs if masq_all else {pod_src}, what=what + " pod->ClusterIP")
                expect_answers(node, cip, 80, internal, node_addrs if (detector or masq_all) else node_src,
                               what=what + " node->ClusterIP")
                expect_answers(ext, cip, 80, internal, node_addrs if (detector or masq_all) else {client_src},
                               what=what + " outside->ClusterIP")
                for host, port in ((node_ip, np), (vip, 80)):
                    if name == "svc2":
                        # eTP=Local: pods short-circuit to all endpoints with their source, but only
                        # with a detector; without one they are treated as outside traffic.
                        if detector:
                            expect_answers(cli, host, port, both, {pod_src}, what=what + " pod->external (short-circuit)")
                        else:
                            expect_answers(cli, host, port, loc, {pod_src}, n=6, what=what + " pod->external (no detector)")
                        expect_answers(ext, host, port, loc, {client_src}, n=6, what=what + " outside->external")
                    else:
                        expect_answers(cli, host, port, both, node_addrs, what=what + " pod->external")
                        expect_answers(ext, host, port, both, node_addrs, what=what + " outside->external")
                    expect_answers(node, host, port, both, node_addrs, what=what + " node->external")


def test_internal_traffic_policy(lab):
    """TestInternalTrafficPolicy: Cluster uses every endpoint; Local only this node's; Local with
    none here drops; with no endpoints at all it rejects."""
    pod = lab.add_pod("pod")
    e1, e2, e3 = lab.add_backends(3, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())

    def write(itp, eps):
        m.write("svc.yaml", [service("svc1", [("p80", 80, "TCP", 80)], ["10.96.1.1", "fd00:10:96::1:1"], itp=itp),
                             endpoint_slice("svc1", eps, [("p80", 80, "TCP")])])

    write("Cluster", [{"ip": e1.v4}, {"ip": e2.v4, "node": "node1b"}, {"ip": e3.v4, "node": "node2"}])
    d = lab.start_daemon()
    cli = lab.agent(pod)
    expect_answers(cli, "10.96.1.1", 80, v4s([e1, e2, e3]), {pod.v4}, n=24, what="Cluster")
    with d.change():
        write("Local", [{"ip": e1.v4}, {"ip": e2.v4, "node": "node1b"}, {"ip": e3.v4, "node": "node2"}])
    expect_answers(cli, "10.96.1.1", 80, {e1.v4}, {pod.v4}, n=8, what="Local, one local")
    with d.change():
        write("Local", [{"ip": e1.v4}, {"ip": e2.v4}, {"ip": e3.v4, "node": "node2"}])
    expect_answers(cli, "10.96.1.1", 80, v4s([e1, e2]), {pod.v4}, what="Local, two local")
    with d.change():
        write("Local", [{"ip": e1.v4, "node": "node2"}, {"ip": e2.v4, "node": "node2"}])
    expect_dropped(cli, "10.96.1.1", 80, what="Local, none local")
    with d.change():
        m.write("svc.yaml", service("svc1", [("p80", 80, "TCP", 80)], ["10.96.1.1", "fd00:10:96::1:1"], itp="Local"))
    expect_refused(cli, "10.96.1.1", 80, what="Local, slice deleted")


TERM = {"ready": False, "serving": True, "terminating": True}
GONE = {"ready": False, "serving": False, "terminating": True}


@pytest.mark.parametrize("etp", ["Local", "Cluster"])
def test_terminating_endpoints_traffic_policy(lab, etp):
    """TestTerminatingEndpointsTrafficPolicyLocal / …Cluster: ready endpoints first, serving and
    terminating ones as the fallback, chosen separately for the local set."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    p = lab.add_backends(5, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())

    def write(conds):
        """conds: per pod 1..5 its conditions; pod 5 is remote."""
        eps = [dict({"ip": p[i].v4, "conditions": c}, **({"node": REMOTE} if i == 4 else {}))
               for i, c in enumerate(conds) if c is not None]
        objs = [service("svc1", [("p80", 80, "TCP", 80)], ["10.96.1.1"], type="LoadBalancer", etp=etp,
                        lb_ingress=[LB_V4])]
        if eps:
            objs.append(endpoint_slice("svc1", eps, [("p80", 80, "TCP")]))
        m.write("svc.yaml", objs)

    ready = {"ready": True, "serving": True, "terminating": False}
    d = lab.daemon()
    write([ready, ready, TERM, GONE, ready])  # (a)
    d.start().wait_syncs(1)
    node_addrs = lab.node_addresses()
    ext, cli = lab.agent(client), lab.agent(pod)
    local_src = {client.v4} if etp == "Local" else node_addrs

    expect_answers(cli, "10.96.1.1", 80, v4s([p[0], p[1], p[4]]), {pod.v4}, what="(a) ClusterIP")
    expect_answers(ext, LB_V4, 80, v4s([p[0], p[1]] if etp == "Local" else [p[0], p[1], p[4]]), local_src,
                   what="(a) LB")
    with d.change():
        write([None, TERM, TERM, GONE, ready if etp == "Local" else TERM])  # (b)
    expect_answers(cli, "10.96.1.1", 80, v4s([p[4]] if etp == "Local" else [p[1], p[2], p[4]]), {pod.v4},
                   what="(b) ClusterIP")
    expect_answers(ext, LB_V4, 80, v4s([p[1], p[2]] if etp == "Local" else [p[1], p[2], p[4]]), local_src,
                   what="(b) LB")
    with d.change():
        write([None, None, None, GONE, TERM])  # (c) only a remote serving-terminating endpoint
    expect_answers(cli, "10.96.1.1", 80, {p[4].v4}, {pod.v4}, n=3, what="(c) ClusterIP")
    if etp == "Local":
        expect_dropped(ext, LB_V4, 80, what="(c) LB, nothing local")
    else:
        expect_answers(ext, LB_V4, 80, {p[4].v4}, node_addrs, n=3, what="(c) LB")
    with d.change():
        write([None, GONE, GONE, GONE, GONE])  # (d) nothing serving
    expect_refused(cli, "10.96.1.1", 80, what="(d) ClusterIP")
    expect_refused(ext, LB_V4, 80, what="(d) LB")
    with d.change():
        write([None] * 5)  # slice deleted
    expect_refused(cli, "10.96.1.1", 80, what="no slice, ClusterIP")
    expect_refused(ext, LB_V4, 80, what="no slice, LB")


def test_unallocated_service_cidr_addresses_are_dropped(lab):
    """Addresses inside a ServiceCIDR that no Service holds are dropped (upstream); unknown ports
    of a live ClusterIP are still rejected; outside the ServiceCIDRs nothing changes. A witness
    behind the node answers whatever is passed on."""
    pod = lab.add_pod("pod")
    (ep,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.add_upstream_witness(["10.96.200.99", "10.97.0.99", "fd00:10:96::c899"], tcp=[80])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("svc.yaml", [service("svc1", [("p80", 80, "TCP", 80)], ["10.96.0.41"]),
                         endpoint_slice("svc1", [ep.v4], [("p80", 80, "TCP")])])
    d = lab.start_daemon()
    cli = lab.agent(pod)
    # Before any ServiceCIDR: passed on like any address.
    expect_answers(cli, "10.96.200.99", 80, {"10.96.200.99"}, {pod.v4}, n=2, what="no ServiceCIDR yet")
    with d.change():
        m.write("cidrs.yaml", service_cidr("kubernetes", ["10.96.0.0/16", "fd00:10:96::/112"]))
    expect_dropped(cli, "10.96.200.99", 80, what="unallocated, inside the ServiceCIDR")
    expect_dropped(cli, "fd00:10:96::c899", 80, what="unallocated, inside the IPv6 ServiceCIDR")
    expect_answers(cli, "10.97.0.99", 80, {"10.97.0.99"}, {pod.v4}, n=2, what="outside the ServiceCIDR")
    expect_answers(cli, "10.96.0.41", 80, {ep.v4}, {pod.v4}, n=2, what="an allocated ClusterIP")
    expect_refused(cli, "10.96.0.41", 81, what="unknown port of a live ClusterIP")
    # Only the base part changed: one small transaction, not a re-render of every service.
    syncs = d.syncs()
    assert syncs[-1]["full"] == 0 and syncs[-1]["ops"] < 10, syncs[-1]


@pytest.mark.parametrize("mode", ["InterfaceNamePrefix", "NodeCIDR"])
def test_detect_local_modes(lab, mode):
    """--detect-local-mode InterfaceNamePrefix (iifname "<prefix>*") and NodeCIDR (the Node's
    podCIDRs): pods keep their source to a ClusterIP and short-circuit an eTP=Local LB; the node is
    masqueraded."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    remote, local = lab.add_backends(2, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [lb("svc1", "10.96.0.41", "fd00:10:96::41", 30001, etp="Local")] +
                        slices("svc1", [remote, local], [("p80", 80, "TCP")], remote=[remote]))
    args = ["--cluster-cidr=", f"--detect-local-mode={mode}"]
    if mode == "InterfaceNamePrefix":
        args.append(f"--pod-interface-name-prefix={lab.prefix}v")
    lab.start_daemon(args)
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")
    both = v4s([remote, local])
    expect_answers(cli, "10.96.0.41", 80, both, {pod.v4}, what="pod to ClusterIP")
    expect_answers(node, "10.96.0.41", 80, both, node_addrs, what="node to ClusterIP")
    expect_answers(cli, LB_V4, 80, both, {pod.v4}, what="pod short-circuit")
    expect_answers(ext, LB_V4, 80, {local.v4}, {client.v4}, n=6, what="outside: local only")
    rule = f'iifname != "{lab.prefix}v*"' if mode == "InterfaceNamePrefix" else "ip saddr != 10.244.0.0/24"
    assert rule in lab.table("ip"), lab.table("ip")

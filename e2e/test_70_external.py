"""External traffic with real packets: NodePorts, LoadBalancer IPs, external IPs, source ranges,
ipMode Proxy, conflicts and bad input (upstream's scenarios, reference §7). An outside client
namespace reaches the node over its own link; every check looks at which endpoints answer and
which source address they saw."""
import json
import time

import pytest

import netlab
from netlab import (CLIENT_V4, CLIENT_V6, NODE_CLIENT_LINK_V4, NODE_V4, NODE_V4_SECONDARY, NODE_V6,
                    NODE_V6_SECONDARY, endpoint_slice, expect_answers, expect_dropped,
                    expect_refused, node_object, service)

pytestmark = pytest.mark.usefixtures("daemon_bin")

LB_V4, LB_V4_2, LB_V6 = "198.51.100.10", "198.51.100.11", "2001:db8:5::10"
EXT_V4, EXT_V6 = "198.51.100.20", "2001:db8:5::20"
REMOTE = "node2"  # endpoints with this nodeName are another node's (the pods still live here)


def slices(name, eps, ports, remote=()):
    """One slice per family over the pods `eps`; pods in `remote` belong to another node."""
    def ep(p, fam):
        return {"ip": getattr(p, fam), "node": REMOTE if p in remote else netlab.NODE_NAME}
    return [endpoint_slice(name, [ep(p, "v4") for p in eps], ports, address_type="IPv4"),
            endpoint_slice(name, [ep(p, "v6") for p in eps], ports, address_type="IPv6")]


def v4s(pods):
    return {p.v4 for p in pods}


def v6s(pods):
    return {p.v6 for p in pods}


def test_no_endpoints_reject(lab):
    """TestNoEndpointsReject: ClusterIP, external IP, NodePort and LB IP of a service without
    endpoints all reject, from a pod and from outside, in both families."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", service(
        "svc1", [("p80", 80, "TCP", 80, 30001)], ["10.96.0.41", "fd00:10:96::41"], type="LoadBalancer",
        external_ips=[EXT_V4, EXT_V6], lb_ingress=[LB_V4, LB_V6]))
    lab.start_daemon()
    ext, cli = lab.agent(client), lab.agent(pod)
    for v4, v6, port in ((EXT_V4, EXT_V6, 80), (LB_V4, LB_V6, 80), (NODE_V4, NODE_V6, 30001)):
        for a, who in ((ext, "external"), (cli, "pod")):
            expect_refused(a, v4, port, what=who)
            expect_refused(a, v6, port, what=who)
    expect_refused(cli, "10.96.0.41", 80, what="pod to ClusterIP")
    expect_refused(cli, "fd00:10:96::41", 80, what="pod to ClusterIP")


def test_load_balancer_source_ranges(lab):
    """TestLoadBalancer: loadBalancerSourceRanges apply to LB IPs (checked before DNAT, also for
    pods), not to the NodePort; a VIP is an allowed source when a range holds a node IP."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    (ep,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [service(
        "svc1", [("p80", 80, "TCP", 80, 30001)], ["10.96.0.41", "fd00:10:96::41"], type="LoadBalancer",
        lb_ingress=[LB_V4, LB_V4_2, LB_V6],
        # " 203.0.113.0/25" with a blank, as in upstream's test; 192.168.100.0/24 holds the node IP
        source_ranges=["192.168.100.0/24", " 203.0.113.0/25", "2001:db8:ff::/120", "fd00:192:168::/64"]),
    ] + slices("svc1", [ep], [("p80", 80, "TCP")], remote=[ep]))
    d = lab.start_daemon()
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")

    expect_answers(cli, "10.96.0.41", 80, {ep.v4}, {pod.v4}, n=3, what="pod to ClusterIP: no masquerade")
    for host in (NODE_V4, NODE_V6):  # ranges do not apply to NodePorts: both clients get in
        expect_answers(ext, host, 30001, {ep.v4 if host == NODE_V4 else ep.v6}, node_addrs, n=3,
                       what="allowed client to NodePort")
    expect_answers(ext, NODE_V4, 30001, {ep.v4}, node_addrs, n=3, bind=client.v4_blocked,
                   what="blocked client to NodePort (ranges are not for NodePorts)")
    expect_answers(ext, NODE_V6, 30001, {ep.v6}, node_addrs, n=3, bind=client.v6_blocked,
                   what="blocked client to NodePort (ranges are not for NodePorts)")
    for vip in (LB_V4, LB_V4_2):
        expect_answers(ext, vip, 80, {ep.v4}, node_addrs, n=3, what="allowed client to LB IP")
        expect_dropped(ext, vip, 80, bind=client.v4_blocked, what="blocked client to LB IP")
    expect_answers(ext, LB_V6, 80, {ep.v6}, node_addrs, n=3, what="allowed client to LB IP")
    expect_dropped(ext, LB_V6, 80, bind=client.v6_blocked, what="blocked client to LB IP")
    expect_dropped(cli, LB_V4, 80, what="pod (outside the ranges) to LB IP")
    expect_answers(node, LB_V4, 80, {ep.v4}, node_addrs, n=3, what="node (inside a range) to LB IP")

    # The node reaching its own VIP with the VIP as source (it holds the address, e.g. on lo).
    netlab.sh(["ip", "-n", lab.node, "addr", "add", f"{LB_V4}/32", "dev", "lo"])
    expect_answers(node, LB_V4, 80, {ep.v4}, lab.node_addresses(), n=3, bind=LB_V4,
                   what="VIP as source, allowed because a range holds the node IP")
    # No chain of the service's own: its LB IPs are in @firewall-ips and each allowed source is an
    # element of @firewall-allow (the service's VIPs too, as upstream: a range holds the node IP in
    # each family).
    def prefix(addr, n):
        return {"prefix": {"addr": addr, "len": n}}
    want = {"ip": [[vip, "tcp", 80, src] for vip in (LB_V4, LB_V4_2)
                   for src in (prefix("192.168.100.0", 24), prefix("203.0.113.0", 25), LB_V4, LB_V4_2)],
            "ip6": [[LB_V6, "tcp", 80, src] for src in (prefix("2001:db8:ff::", 120), prefix("fd00:192:168::", 64), LB_V6)]}
    for fam, keys in want.items():
        got = sorted(json.dumps(e["elem"]["val"]["concat"] if "elem" in e else e["concat"], sort_keys=True)
                     for e in elements(lab, fam, "firewall-allow"))
        assert got == sorted(json.dumps(k, sort_keys=True) for k in keys), (fam, got)
        assert not [c for c in lab.table(fam).splitlines() if c.strip().startswith("chain firewall-default")]

    # Widening a range is element operations alone: per LB IP and family the old range out and the
    # new one in (2 IPv4 LB IPs, 1 IPv6), and the clients outside the old ranges get in.
    synced = len(d.syncs())
    lab.manifests.write("svc.yaml", [service(
        "svc1", [("p80", 80, "TCP", 80, 30001)], ["10.96.0.41", "fd00:10:96::41"], type="LoadBalancer",
        lb_ingress=[LB_V4, LB_V4_2, LB_V6],
        source_ranges=["192.168.100.0/24", "203.0.113.0/24", "2001:db8:ff::/64", "fd00:192:168::/64"]),
    ] + slices("svc1", [ep], [("p80", 80, "TCP")], remote=[ep]))
    change = d.wait_syncs(synced + 1)[synced]
    assert change["ops"] == 6 and not change["full"], change
    node_addrs = lab.node_addresses()  # the VIP on lo above is one now
    for vip in (LB_V4, LB_V4_2):
        expect_answers(ext, vip, 80, {ep.v4}, node_addrs, n=3, bind=client.v4_blocked,
                       what="client inside the widened range to LB IP")
    expect_answers(ext, LB_V6, 80, {ep.v6}, node_addrs, n=3, bind=client.v6_blocked,
                   what="client inside the widened range to LB IP")
    assert not d.failed_syncs()


def test_nodeports_default_and_explicit_addresses(lab):
    """TestNodePorts (IPv4 and IPv6): `primary` serves only the Node's InternalIPs; explicit
    CIDRs serve the matching local addresses; 0.0.0.0/0 all of them; loopback never. TCP, UDP and
    SCTP. A listener on the node itself shows which connections were not DNATed."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    remote, local = lab.add_backends(2, tcp=[80], udp=[53])
    lab.start_echo(lab.node_pod(), tcp=[30001], addrs=[NODE_V4_SECONDARY, NODE_V6_SECONDARY,
                                                       NODE_CLIENT_LINK_V4, "127.0.0.1", "::1"])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [service(
        "svc1", [("p80", 80, "TCP", 80, 30001), ("dns", 53, "UDP", 53, 30053), ("sctp", 9000, "SCTP", 9000, 30090)],
        ["10.96.0.41", "fd00:10:96::41"], type="NodePort"),
    ] + slices("svc1", [remote, local], [("p80", 80, "TCP"), ("dns", 53, "UDP"), ("sctp", 9001, "SCTP")],
               remote=[remote]))
    d = lab.start_daemon()
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")
    both4, both6 = v4s([remote, local]), v6s([remote, local])

    expect_answers(cli, "10.96.0.41", 80, both4, {pod.v4}, what="pod to ClusterIP")
    expect_answers(ext, NODE_V4, 30001, both4, node_addrs, what="external to primary NodePort")
    expect_answers(ext, NODE_V6, 30001, both6, node_addrs, what="external to primary NodePort")
    expect_answers(ext, NODE_V4, 30053, both4, node_addrs, proto="udp", what="UDP NodePort")
    expect_answers(node, NODE_V4, 30001, both4, node_addrs, what="node to its own NodePort")
    # Not a NodePort address under `primary`: the node's own listener answers (not DNATed).
    for host in (NODE_V4_SECONDARY, NODE_V6_SECONDARY, NODE_CLIENT_LINK_V4):
        expect_answers(ext, host, 30001, {host}, {client.v4, client.v6}, n=2, what="non-primary address")
    expect_answers(node, "127.0.0.1", 30001, {"127.0.0.1"}, {"127.0.0.1"}, n=2, what="loopback is never a NodePort")
    expect_answers(node, "::1", 30001, {"::1"}, {"::1"}, n=2, what="loopback is never a NodePort")
    # SCTP: no SCTP stack here; the node's conntrack shows the DNAT of the INIT.
    ext.sctp_init(NODE_V4, 30090, sport=40999)
    deadline, entry = time.monotonic() + 3, None
    while time.monotonic() < deadline and not entry:
        entry = next((e for e in lab.conntrack("sctp") if e[0].get("sport") == "40999"), None)
        time.sleep(0.05)
    assert entry, f"no conntrack entry for the SCTP INIT to the NodePort: {lab.conntrack('sctp')}"
    assert entry[1]["src"] in both4 and entry[1]["sport"] == "9001", f"SCTP NodePort not DNATed: {entry[2]}"

    # A restart with the same flags finds everything in place: nothing to change.
    d.stop()
    d = lab.start_daemon(label="same-flags")
    assert d.syncs()[0]["ops"] == 0, f"restart changed the ruleset: {d.syncs()[0]}\n{d.tail()}"

    d.stop()
    # A CIDR that does not parse is refused, as upstream refuses it: exit 2 naming it, never a
    # silent fall-back to `primary`; the rules in place keep serving.
    bad = lab.daemon(["--nodeport-addresses=192.168.100.0/24,not-a-cidr,fd00:192:168::/64"], label="bad-cidr").start()
    assert bad.proc.wait(timeout=30) == 2, bad.tail()
    assert 'invalid value "not-a-cidr" for --nodeport-addresses' in bad.stderr(), bad.tail()
    expect_answers(ext, NODE_V4, 30001, both4, node_addrs, what="the rules in place after a refused start")
    # Explicit CIDRs: the matching local addresses.
    d = lab.start_daemon(["--nodeport-addresses=192.168.100.0/24,fd00:192:168::/64"], label="cidrs")
    for host, eps in ((NODE_V4, both4), (NODE_V4_SECONDARY, both4), (NODE_V6_SECONDARY, both6)):
        expect_answers(ext, host, 30001, eps, node_addrs, what="explicit CIDRs")
    expect_answers(ext, NODE_CLIENT_LINK_V4, 30001, {NODE_CLIENT_LINK_V4}, {client.v4}, n=2,
                   what="address outside the CIDRs: not a NodePort")

    lab.daemons[-1].stop()
    lab.start_daemon(["--nodeport-addresses=0.0.0.0/0,::/0"], label="all")
    expect_answers(ext, NODE_CLIENT_LINK_V4, 30001, both4, node_addrs, what="0.0.0.0/0: every local address")
    expect_answers(node, "127.0.0.1", 30001, {"127.0.0.1"}, {"127.0.0.1"}, n=2, what="0.0.0.0/0 still not loopback")
    expect_answers(node, "::1", 30001, {"::1"}, {"::1"}, n=2, what="::/0 still not loopback")

    # Without a Node object `primary` falls back to the default route's interface (both addresses).
    lab.daemons[-1].stop()
    lab.manifests.delete("node.yaml")
    d = lab.start_daemon(label="no-node")
    expect_answers(ext, NODE_V4_SECONDARY, 30001, both4, lab.node_addresses(), what="no Node: default-route interface")
    assert "no Node object" in d.stderr(), d.tail()


def test_load_balancer_ingress_ip_mode_proxy(lab):
    """TestLoadBalancerIngressRouteTypeProxy: an ingress IP with ipMode Proxy is not DNATed here
    (the load balancer proxies); VIP or unset is; a hostname-only ingress is skipped, not fatal."""
    client = lab.add_external_client()
    (ep,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.add_upstream_witness([LB_V4_2], tcp=[80])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [service(
        "svc1", [("p80", 80, "TCP", 80)], ["10.96.0.41"], type="LoadBalancer",
        lb_ingress=[{"ip": LB_V4}, {"ip": LB_V4_2, "ipMode": "Proxy"}, {"hostname": "lb.example.com"}]),
        endpoint_slice("svc1", [ep.v4], [("p80", 80, "TCP")])])
    d = lab.start_daemon()
    ext = lab.agent(client)
    expect_answers(ext, LB_V4, 80, {ep.v4}, lab.node_addresses(), n=3, what="ipMode unset")
    expect_answers(ext, LB_V4_2, 80, {LB_V4_2}, {client.v4}, n=2, what="ipMode Proxy: passed on untouched")
    assert LB_V4_2 not in lab.table("ip")
    assert "only hostname" in d.stderr(), d.tail()


def test_nodeport_and_external_ip_conflicts_and_bad_input(lab):
    """Two services claiming one nodePort (and one external IP:port): the older keeps it, the
    other is logged and keeps the rest; deleting the older hands the port over. A bad nodePort and
    a bad external IP are dropped alone; a bad source range closes the LB IP (never opens it)."""
    client = lab.add_external_client()
    old_ep, new_ep, other_ep = lab.add_backends(3, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("a-new.yaml", [service("newer", [("p80", 80, "TCP", 80, 30001)], ["10.96.0.42"], type="NodePort",
                                   external_ips=[EXT_V4], created="2024-06-01T00:00:00Z"),
                           endpoint_slice("newer", [new_ep.v4], [("p80", 80, "TCP")])])
    m.write("b-old.yaml", [service("older", [("p80", 80, "TCP", 80, 30001)], ["10.96.0.41"], type="NodePort",
                                   external_ips=[EXT_V4], created="2024-01-01T00:00:00Z"),
                           endpoint_slice("older", [old_ep.v4], [("p80", 80, "TCP")])])
    bad = service("bad", [("p80", 80, "TCP", 80, 70000)], ["10.96.0.43"], type="LoadBalancer",
                  external_ips=["198.51.100.999", EXT_V4.replace(".20", ".21")], lb_ingress=[LB_V4],
                  source_ranges=["not-a-cidr", "203.0.113.0/25"])
    m.write("c-bad.yaml", [bad, endpoint_slice("bad", [other_ep.v4], [("p80", 80, "TCP")])])
    d = lab.start_daemon()
    ext, node_addrs = lab.agent(client), lab.node_addresses()

    expect_answers(ext, NODE_V4, 30001, {old_ep.v4}, node_addrs, n=6, what="nodePort: the older service keeps it")
    expect_answers(ext, EXT_V4, 80, {old_ep.v4}, node_addrs, n=6, what="external IP: the older service keeps it")
    expect_answers(ext, "10.96.0.42", 80, {new_ep.v4}, node_addrs, n=3, what="the newer service's ClusterIP works")
    log = d.stderr()
    assert "default/newer: nodePort tcp/30001 is already used by Service default/older" in log, d.tail()
    # The bad service: its ClusterIP and its valid external IP work; the unreadable source range
    # keeps its LB IP closed to every source (issue 11 defect 2), the allowed one included.
    expect_answers(ext, "10.96.0.43", 80, {other_ep.v4}, node_addrs, n=3, what="bad nodePort: ClusterIP kept")
    expect_answers(ext, "198.51.100.21", 80, {other_ep.v4}, node_addrs, n=3, what="the valid external IP")
    expect_dropped(ext, LB_V4, 80, what="LB IP with an unreadable range: closed even to a listed source")
    expect_dropped(ext, LB_V4, 80, bind=client.v4_blocked, what="LB IP with an unreadable range: closed")
    for text in ("nodePort 70000 out of range", "\"198.51.100.999\" is not an IP address",
                 "\"not-a-cidr\" is not a CIDR"):
        assert text in log, f"missing warning {text!r}\n{d.tail()}"

    with d.change():
        m.delete("b-old.yaml")
    expect_answers(ext, NODE_V4, 30001, {new_ep.v4}, node_addrs, n=6, what="the older service gone: the newer takes over")
    expect_answers(ext, EXT_V4, 80, {new_ep.v4}, node_addrs, n=6, what="external IP handed over")
    assert not d.failed_syncs()


def test_leading_zero_addresses_are_read_and_an_unreadable_source_range_never_opens_the_lb(lab):
    """Issue 11 defect 2: objects from before Kubernetes 1.20 may spell IPv4 octets with leading
    zeros; upstream reads them as decimal. A source range that cannot be read at all must not
    leave the LoadBalancer open to everyone: its LB IP admits no source until it is fixed."""
    client = lab.add_external_client()
    ep, ep2 = lab.add_backends(2, tcp=[80], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("legacy.yaml", [service("legacy", [("p80", 80, "TCP", 80)], ["10.96.0.044"], type="LoadBalancer",
                                    lb_ingress=[LB_V4], source_ranges=["0203.0.113.0/25"]),
                            endpoint_slice("legacy", [".".join("%03d" % int(o) for o in ep.v4.split("."))],
                                           [("p80", 80, "TCP")])])
    m.write("onebad.yaml", [service("onebad", [("p80", 80, "TCP", 80)], ["10.96.0.45"], type="LoadBalancer",
                                    lb_ingress=[LB_V4_2], source_ranges=["203.0.113.0/33"]),
                            endpoint_slice("onebad", [ep2.v4], [("p80", 80, "TCP")])])
    d = lab.start_daemon()
    ext, node_addrs = lab.agent(client), lab.node_addresses()
    expect_answers(ext, "10.96.0.44", 80, {ep.v4}, node_addrs, n=3, what="ClusterIP 10.96.0.044 read as 10.96.0.44")
    expect_answers(ext, LB_V4, 80, {ep.v4}, node_addrs, n=3, what="range 0203.0.113.0/25: the client is inside")
    expect_dropped(ext, LB_V4, 80, bind=client.v4_blocked, what="range 0203.0.113.0/25: the blocked source")
    expect_answers(ext, "10.96.0.45", 80, {ep2.v4}, node_addrs, n=3, what="onebad: the ClusterIP still works")
    expect_dropped(ext, LB_V4_2, 80, what="onebad: an unreadable range keeps the LB IP closed")
    expect_dropped(ext, LB_V4_2, 80, bind=client.v4_blocked, what="onebad: closed to every source")
    assert '"203.0.113.0/33" is not a CIDR' in d.stderr() and "admits no source" in d.stderr(), d.tail()
    assert not d.failed_syncs()


@pytest.mark.parametrize("flags", [
    [],
    ["--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cni0"],
    ["--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth", "--nodeport-addresses=0.0.0.0/0,::/0"],
])
def test_dry_run_of_external_services_loads_and_matches_the_live_table(lab, flags):
    """--dry-run with every external feature prints nft text that loads into an empty namespace
    and holds the same chains, with the same rules, as the table the daemon installs."""
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("cidr.yaml", netlab.service_cidr("kubernetes", ["10.96.0.0/16", "fd00:10:96::/112"]))
    m.write("svcs.yaml", [
        service("web", [("p80", 80, "TCP", 80, 30001), ("dns", 53, "UDP", 53, 30053)], ["10.96.0.41", "fd00:10:96::41"],
                type="LoadBalancer", external_ips=[EXT_V4], lb_ingress=[LB_V4, LB_V6, {"ip": LB_V4_2, "ipMode": "Proxy"}],
                source_ranges=["203.0.113.0/25", "2001:db8:ff::/120", "192.168.100.0/24"]),
        service("shop", [("p80", 80, "TCP", 80, 30002)], ["10.96.0.42", "fd00:10:96::42"], type="LoadBalancer",
                etp="Local", itp="Local", lb_ingress=["198.51.100.12"]),
        service("empty", [("p80", 80, "TCP", 80, 30003)], ["10.96.0.43"], type="NodePort"),
    ] + slices("web", [lab.add_pod("a"), lab.add_pod("b")], [("p80", 80, "TCP"), ("dns", 53, "UDP")])
      + [endpoint_slice("shop", [{"ip": "10.244.0.50"}, {"ip": "10.244.0.51", "node": REMOTE}], [("p80", 80, "TCP")])])
    args = [f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}"] + flags
    p = netlab.sh([netlab.BIN, f"--manifests={m.path}", "--dry-run"] + args, ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0, p.stderr[-3000:]
    fresh = lab.add_pod("fresh").ns
    load = netlab.sh(["nft", "-f", "-"], ns=fresh, input=p.stdout, check=False)
    assert load.returncode == 0, f"nft -f of the --dry-run output failed:\n{load.stderr[-3000:]}"
    lab.start_daemon(flags)

    def chains(text):
        """chain name -> its rule lines (sorted: a chain's rule order is checked by the e2e paths)."""
        out, cur = {}, None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("chain "):
                cur = out.setdefault(line.split()[1], [])
            elif cur is not None and line and line != "}" and not line.startswith(("type ", "policy ")):
                cur.append(line)
            if line == "}":
                cur = None
        return {k: sorted(v) for k, v in out.items()}
    for fam in ("ip", "ip6"):
        dry = chains(netlab.sh(["nft", "list", "table", fam, "kube-proxy"], ns=fresh).stdout)
        live = chains(lab.table(fam))
        assert dry == live, f"{fam}: --dry-run and the daemon differ:\n{set(dry.items()) ^ set(live.items())}"
        assert elements(lab, fam, "firewall-allow"), f"{fam}: no allowed source for web's LB IPs"
        # shop (eTP=Local) has IPv4 endpoints only: outside traffic to its IPv4 NodePort picks
        # among this node's endpoints; its IPv6 NodePort rejects instead of dispatching
        assert ("nodeport-pick-local-tcp" in live) == (fam == "ip"), sorted(live)
        assert not any("/" in c for c in live), sorted(live)


def elements(lab, family, name):
    """The elements of set or map `name` of our table in `family`, as `nft -j` lists them."""
    for obj in json.loads(lab.nft("-j", "list", "table", family, "kube-proxy"))["nftables"]:
        body = obj.get("map") or obj.get("set")
        if body and body["name"] == name:
            return body.get("elem", [])
    raise AssertionError(f"no set or map {name} in {family} kube-proxy")


def test_external_destinations_take_their_cluster_ips_slots(lab):
    """An LB IP, an external IP and a TCP/UDP NodePort whose endpoints are their ClusterIP's hold
    no slots of their own: the first packet is rewritten to the ClusterIP (and service port), whose
    slots pick the endpoint. Real packets from outside and from a pod reach every endpoint, the
    client talks to the address and port it asked for (its TCP and connected-UDP sockets accept
    nothing else), an endpoint change rewrites only the ClusterIP's slots, and a restart finds the
    table as it left it."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    eps = lab.add_backends(3, tcp=[80], udp=[53])
    lab.manifests.write("node.yaml", node_object())
    svc = service("svc1", [("p80", 80, "TCP", 80, 30001), ("dns", 53, "UDP", 53, 30053)],
                  ["10.96.0.41", "fd00:10:96::41"], type="LoadBalancer",
                  external_ips=[EXT_V4, EXT_V6], lb_ingress=[LB_V4, LB_V6])
    lab.manifests.write("svc.yaml", [svc] + slices("svc1", eps, [("p80", 80, "TCP"), ("dns", 53, "UDP")]))
    d = lab.start_daemon()
    node_addrs = lab.node_addresses()
    ext, cli = lab.agent(client), lab.agent(pod)
    for fam, attr, dests in (("ip", "v4", (LB_V4, EXT_V4, NODE_V4)), ("ip6", "v6", (LB_V6, EXT_V6, NODE_V6))):
        want = {getattr(p, attr) for p in eps}
        for host in dests:
            port_tcp, port_udp = (30001, 30053) if host in (NODE_V4, NODE_V6) else (80, 53)
            expect_answers(ext, host, port_tcp, want, node_addrs, what=f"outside to {host}")
            expect_answers(ext, host, port_udp, want, node_addrs, proto="udp", what=f"outside to {host}")
            expect_answers(cli, host, port_tcp, want, node_addrs | {getattr(pod, attr)}, what=f"pod to {host}")
        # The slots are the ClusterIP's alone: 3 per protocol, none for the other destinations.
        assert len(elements(lab, fam, "backends-tcp")) == 3, lab.table(fam)
        assert len(elements(lab, fam, "backends-udp")) == 3, lab.table(fam)
        assert elements(lab, fam, "nodeport-backends-tcp") == [], lab.table(fam)
        assert elements(lab, fam, "nodeport-backends-udp") == [], lab.table(fam)
        assert len(elements(lab, fam, "external-cluster-ips")) == 4, lab.table(fam)  # 2 addresses x 2 ports
        assert len(elements(lab, fam, "nodeport-cluster-ports")) == 2, lab.table(fam)

    # The last endpoint goes: per family its slot in each protocol's map and its hairpin pair,
    # nothing of the LB IP, external IP or NodePort, which follow at once.
    result = {}
    with d.change(result=result):
        lab.manifests.write("svc.yaml", [svc] + slices("svc1", eps[:2], [("p80", 80, "TCP"), ("dns", 53, "UDP")]))
    assert [s["ops"] for s in result["syncs"]] == [6], result["syncs"]
    for host, port in ((LB_V4, 80), (EXT_V4, 80), (NODE_V4, 30001)):
        expect_answers(ext, host, port, v4s(eps[:2]), node_addrs, what=f"after the change, {host}")
    expect_answers(ext, NODE_V6, 30053, v6s(eps[:2]), node_addrs, proto="udp", what="after the change, UDP")

    d.stop()
    d = lab.start_daemon(label="restart")
    assert d.syncs()[0]["ops"] == 0, f"restart changed the ruleset: {d.syncs()[0]}\n{d.tail()}"


def test_shared_slots_masquerade_by_policy(lab):
    """On their ClusterIP's slots, the rewrite's own rule marks eTP=Cluster destinations for
    masquerade (no element in @masquerade-ips / -nodeports), and eTP=Local ones sit in the local-
    maps, whose rule marks nothing. With real packets: through svc1 (eTP=Cluster) LB IP, external
    IP and TCP/UDP NodePort, outside clients, pods and the node are all masqueraded; through svc2
    (eTP=Local) LB IP and NodePort outside clients reach the local endpoint with their own address,
    pods reach both endpoints with theirs (their packets pass the marking rule's lookup and miss
    it: a mark set on a miss would show here), the node both, masqueraded. svc2 turned to
    eTP=Cluster live moves its elements over and masquerades outside clients at once."""
    client, pod = lab.add_external_client(), lab.add_pod("pod")
    eps = lab.add_backends(4, tcp=[80], udp=[53])
    remote, local = eps[2], eps[3]
    lb2_v6 = "2001:db8:5::11"
    lab.manifests.write("node.yaml", node_object())

    def write(svc2_etp):
        lab.manifests.write("svc.yaml", [
            service("svc1", [("p80", 80, "TCP", 80, 30001), ("dns", 53, "UDP", 53, 30053)],
                    ["10.96.0.41", "fd00:10:96::41"], type="LoadBalancer",
                    external_ips=[EXT_V4, EXT_V6], lb_ingress=[LB_V4, LB_V6]),
            service("svc2", [("p80", 80, "TCP", 80, 30002)], ["10.96.0.42", "fd00:10:96::42"], type="LoadBalancer",
                    etp=svc2_etp, lb_ingress=[LB_V4_2, lb2_v6]),
        ] + slices("svc1", eps[:2], [("p80", 80, "TCP"), ("dns", 53, "UDP")], remote=[eps[0]])
          + slices("svc2", [remote, local], [("p80", 80, "TCP")], remote=[remote]))

    def expect_elements(counts):
        """Each set or map's element count (None: no such set) is the one in `counts`."""
        for fam in ("ip", "ip6"):
            table = json.loads(lab.nft("-j", "list", "table", fam, "kube-proxy"))["nftables"]
            sizes = {b["name"]: len(b.get("elem", [])) for b in (o.get("set") or o.get("map") for o in table) if b}
            got = {name: sizes.get(name) for name in counts}
            assert got == counts, f"{fam}: {got}\n{lab.table(fam)}"

    write("Local")
    d = lab.start_daemon()
    expect_elements({"masquerade-ips": 0, "masquerade-nodeports": 0,
                     "external-cluster-ips": 4,  # svc1: 2 addresses x 2 ports
                     "nodeport-cluster-ips": 2,  # svc1: tcp and udp
                     "local-external-cluster-ips": 1, "local-nodeport-cluster-ips": 1,  # svc2
                     "nodeport-cluster-ports": 3})
    node_addrs = lab.node_addresses()
    ext, cli, node = lab.agent(client), lab.agent(pod), lab.agent("node")
    families = (("v4", LB_V4, EXT_V4, LB_V4_2, NODE_V4), ("v6", LB_V6, EXT_V6, lb2_v6, NODE_V6))
    for fam, lb_v, ext_v, lb2_v, node_v in families:
        svc1_eps = {getattr(p, fam) for p in eps[:2]}
        svc2_eps, svc2_local = {getattr(remote, fam), getattr(local, fam)}, {getattr(local, fam)}
        for host, tcp, udp in ((lb_v, 80, 53), (ext_v, 80, 53), (node_v, 30001, 30053)):
            what = f"svc1 (eTP=Cluster) {host}"
            expect_answers(ext, host, tcp, svc1_eps, node_addrs, what=f"{what}: outside masqueraded")
            expect_answers(ext, host, udp, svc1_eps, node_addrs, proto="udp", what=f"{what}: outside masqueraded")
            expect_answers(cli, host, tcp, svc1_eps, node_addrs, what=f"{what}: pod masqueraded")
            expect_answers(node, host, tcp, svc1_eps, node_addrs, what=f"{what}: node masqueraded")
        for host, port in ((lb2_v, 80), (node_v, 30002)):
            what = f"svc2 (eTP=Local) {host}"
            expect_answers(ext, host, port, svc2_local, {getattr(client, fam)}, n=6,
                           what=f"{what}: outside keeps its source")
            expect_answers(cli, host, port, svc2_eps, {getattr(pod, fam)}, what=f"{what}: pod keeps its source")
            expect_answers(node, host, port, svc2_eps, node_addrs, what=f"{what}: node masqueraded")

    with d.change():
        write("Cluster")
    expect_elements({"masquerade-ips": 0, "masquerade-nodeports": 0, "external-cluster-ips": 5,
                     "nodeport-cluster-ips": 3, "local-external-cluster-ips": 0, "local-nodeport-cluster-ips": 0,
                     "nodeport-cluster-ports": 3})
    for fam, _, _, lb2_v, node_v in families:
        svc2_eps = {getattr(remote, fam), getattr(local, fam)}
        for host, port in ((lb2_v, 80), (node_v, 30002)):
            expect_answers(ext, host, port, svc2_eps, node_addrs, what=f"svc2 now eTP=Cluster {host}: outside masqueraded")
            expect_answers(cli, host, port, svc2_eps, node_addrs, what=f"svc2 now eTP=Cluster {host}: pod masqueraded")
    assert not d.failed_syncs()

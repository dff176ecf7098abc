"""Upstream kube-proxy's nftables-mode tables for a handful of ClusterIP services, as one `nft -f`
script, in the layouts a node may carry when our daemon takes over
(kubernetes/kubernetes pkg/proxy/nftables/proxier.go of each release):

  "v1.33"  proxier.go @ b0f823e: every filter base chain at dstnat-10 plus filter-output-post-dnat,
           a chain per endpoint, `numgen random mod N vmap {...}`, mark-for-masquerade
  "v1.35"  the newest base chains (filter checks at priority filter), still endpoint chains (what
           bench/gen_upstream.py writes)
  "v1.36"  no endpoint chains and no mark-for-masquerade: each service chain is one
           `dnat ip to numgen random mod N map {...}` with an anonymous map, off-cluster masquerade
           in `services`, hairpin through the hairpin-connections set

Chain names hash the way upstream does (bench/gen_upstream.hash_and_truncate)."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from gen_upstream import BASE_CHAINS, FILTER_JUMPS, hash_and_truncate  # noqa: E402

LAYOUTS = ("v1.33", "v1.35", "v1.36")

OLD_BASE = [("filter-prerouting", "filter", "prerouting", -110),
            ("filter-input", "filter", "input", -110),
            ("filter-forward", "filter", "forward", -110),
            ("filter-output", "filter", "output", -110),
            ("filter-output-post-dnat", "filter", "output", -90)]
NEW_BASE = [c for c in BASE_CHAINS if c[1] == "filter"]
NAT_BASE = [c for c in BASE_CHAINS if c[1] == "nat"]

OLD_JUMPS = [("filter-prerouting", "ct state new jump firewall-check"),
             ("filter-input", "ct state new jump nodeport-endpoints-check"),
             ("filter-input", "ct state new jump service-endpoints-check"),
             ("filter-forward", "ct state new jump service-endpoints-check"),
             ("filter-forward", "ct state new jump cluster-ips-check"),
             ("filter-output", "ct state new jump service-endpoints-check"),
             ("filter-output", "ct state new jump firewall-check"),
             ("filter-output-post-dnat", "ct state new jump cluster-ips-check")]
NEW_JUMPS = FILTER_JUMPS


class Svc:
    """One service port of one family: ns/name, protocol tcp, port name, ClusterIP:port and its
    endpoints [(ip, port)]; an empty list means "no endpoints" (reject)."""

    def __init__(self, name, cluster_ip, port, endpoints, port_name="http", ns="default", node_port=None,
                 affinity=False):
        self.ns, self.name, self.port_name = ns, name, port_name
        self.ip, self.port, self.endpoints = cluster_ip, port, list(endpoints)
        self.node_port = node_port
        self.affinity = affinity  # sessionAffinity ClientIP (the endpoint-chain layouts only)

    def key(self):
        return f"{self.ns}/{self.name}/tcp/{self.port_name}"

    def chain(self):
        return "service-" + hash_and_truncate(self.key())

    def external_chain(self):
        return "external-" + hash_and_truncate(self.key())

    def endpoint_chain(self, ip, port):
        return "endpoint-" + hash_and_truncate(f"{self.key()}__{ip.replace(':', '.')}/{port}")

    def affinity_set(self, ip, port):
        return "affinity-" + hash_and_truncate(f"{self.key()}__{ip.replace(':', '.')}/{port}")


def script(family, layout, services, cluster_cidr, service_cidr, node_ip):
    """The whole table `<family> kube-proxy` as an nft script (a transaction of `add` commands)."""
    assert layout in LAYOUTS, layout
    v6 = family == "ip6"
    T = f"{family} kube-proxy"
    A = "ip6" if v6 else "ip"
    addr = "ipv6_addr" if v6 else "ipv4_addr"
    out = [f'add table {T} {{ comment "rules for kube-proxy" ; }}']
    base = (OLD_BASE if layout == "v1.33" else NEW_BASE) + NAT_BASE
    for name, typ, hook, prio in base:
        out.append(f"add chain {T} {name} {{ type {typ} hook {hook} priority {prio} ; }}")
    helpers = ["services", "firewall-check", "service-endpoints-check", "nodeport-endpoints-check",
               "cluster-ips-check", "reject-chain", "masquerading"]
    if layout != "v1.36":
        helpers.append("mark-for-masquerade")
    out += [f"add chain {T} {c}" for c in helpers]
    out += [
        f'add set {T} cluster-ips {{ type {addr} ; comment "Active ClusterIPs" ; }}',
        f'add set {T} nodeport-ips {{ type {addr} ; comment "IPs that accept NodePort traffic" ; }}',
        f'add map {T} service-ips {{ type {addr} . inet_proto . inet_service : verdict ; '
        'comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }',
        f'add map {T} service-nodeports {{ type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }}',
        f'add map {T} no-endpoint-services {{ type {addr} . inet_proto . inet_service : verdict ; '
        'comment "vmap to drop or reject packets to services with no endpoints" ; }',
        f'add map {T} no-endpoint-nodeports {{ type inet_proto . inet_service : verdict ; '
        'comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }',
        f'add map {T} firewall-ips {{ type {addr} . inet_proto . inet_service : verdict ; '
        'comment "destinations that are subject to LoadBalancerSourceRanges" ; }',
    ]
    if layout == "v1.36":
        out.append(f"add set {T} hairpin-connections {{ type {addr} . {addr} . inet_proto . inet_service ; }}")
    loopback = "::1" if v6 else "127.0.0.0/8"
    rules = (OLD_JUMPS if layout == "v1.33" else NEW_JUMPS) + [
        ("nat-prerouting", "jump services"),
        ("nat-output", "jump services"),
        ("nat-postrouting", "jump masquerading"),
        ("firewall-check", f"{A} daddr . meta l4proto . th dport vmap @firewall-ips"),
        ("service-endpoints-check", f"{A} daddr . meta l4proto . th dport vmap @no-endpoint-services"),
        ("nodeport-endpoints-check", f"{A} daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"),
        ("cluster-ips-check", f'{A} daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"'),
        ("cluster-ips-check", f'{A} daddr {{ {service_cidr} }} drop comment "Drop traffic to unallocated ClusterIPs"'),
        ("reject-chain", "reject"),
    ]
    if layout == "v1.36":
        rules.append(("services", f"{A} daddr @cluster-ips {A} saddr != {cluster_cidr} meta mark set meta mark | 0x4000"))
    rules += [
        ("services", f"{A} daddr . meta l4proto . th dport vmap @service-ips"),
        ("services", f"fib daddr type local {A} daddr != {loopback} meta l4proto . th dport vmap @service-nodeports"),
    ]
    if layout == "v1.36":
        rules.append(("masquerading", f"ct status dnat {A} saddr . {A} daddr . meta l4proto . th dport "
                                      "@hairpin-connections masquerade fully-random"))
    else:
        rules.append(("mark-for-masquerade", "meta mark set meta mark | 0x4000"))
    rules += [
        ("masquerading", "meta mark & 0x4000 == 0 return"),
        ("masquerading", "meta mark set meta mark ^ 0x4000"),
        ("masquerading", "masquerade fully-random"),
    ]
    out += [f"add rule {T} {c} {r}" for c, r in rules]
    out.append(f"add element {T} nodeport-ips {{ {node_ip} }}")

    def dnat_target(ip, port):
        return f"[{ip}]:{port}" if v6 else f"{ip}:{port}"

    for s in services:
        out.append(f"add element {T} cluster-ips {{ {s.ip} }}")
        if not s.endpoints:
            out.append(f'add element {T} no-endpoint-services {{ {s.ip} . tcp . {s.port} comment "{s.ns}/{s.name}:'
                       f'{s.port_name}" : goto reject-chain }}')
            continue
        sc = s.chain()
        out.append(f"add chain {T} {sc}")
        if layout == "v1.36":
            m = " , ".join(f"{i} : {ip} . {port}" for i, (ip, port) in enumerate(s.endpoints))
            out.append(f"add rule {T} {sc} meta l4proto tcp dnat {A} to numgen random mod {len(s.endpoints)} "
                       f"map {{ {m} }}")
            for ip, port in s.endpoints:
                out.append(f"add element {T} hairpin-connections {{ {ip} . {ip} . tcp . {port} }}")
        else:
            out.append(f"add rule {T} {sc} {A} daddr {s.ip} {A} saddr != {cluster_cidr} jump mark-for-masquerade")
            vm = []
            for i, (ip, port) in enumerate(s.endpoints):
                ec = s.endpoint_chain(ip, port)
                out.append(f"add chain {T} {ec}")
                out.append(f"add rule {T} {ec} {A} saddr {ip} jump mark-for-masquerade")
                if s.affinity:
                    aff = s.affinity_set(ip, port)
                    out.append(f"add set {T} {aff} {{ type {addr} ; flags dynamic,timeout ; timeout 10800s ; }}")
                    out.append(f"add rule {T} {ec} update @{aff} {{ {A} saddr }}")
                    out.append(f"add rule {T} {sc} {A} saddr @{aff} goto {ec}")
                out.append(f"add rule {T} {ec} meta l4proto tcp dnat to {dnat_target(ip, port)}")
                vm.append(f"{i} : goto {ec}")
            out.append(f"add rule {T} {sc} numgen random mod {len(vm)} vmap {{ {' , '.join(vm)} }}")
        out.append(f"add element {T} service-ips {{ {s.ip} . tcp . {s.port} : goto {sc} }}")
        if s.node_port:  # externalTrafficPolicy Cluster: masquerade, then the service chain
            xc = s.external_chain()
            out.append(f"add chain {T} {xc}")
            mark = "meta mark set meta mark | 0x4000" if layout == "v1.36" else "jump mark-for-masquerade"
            out.append(f'add rule {T} {xc} {mark} comment "masquerade"')
            out.append(f"add rule {T} {xc} goto {sc}")
            out.append(f"add element {T} service-nodeports {{ tcp . {s.node_port} : goto {xc} }}")
    return "\n".join(out) + "\n"


def own_objects(family, layout, services):
    """Names of the chains and sets only upstream's layout has (never ours), to check they are gone."""
    names = {"mark-for-masquerade"} if layout != "v1.36" else {"hairpin-connections"}
    if layout == "v1.33":
        names |= {"filter-prerouting", "filter-output-post-dnat"}
    for s in services:
        if s.endpoints:
            names.add(s.chain())
            if s.node_port:
                names.add(s.external_chain())
            if layout != "v1.36":
                names |= {s.endpoint_chain(ip, port) for ip, port in s.endpoints}
                if s.affinity:
                    names |= {s.affinity_set(ip, port) for ip, port in s.endpoints}
    return names

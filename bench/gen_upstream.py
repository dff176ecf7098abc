#!/usr/bin/env python3
"""Upstream kube-proxy's nftables layout (kubernetes/kubernetes pkg/proxy/nftables/proxier.go) for a State of
bench/gen_state.py, as one `nft -f` transaction of `add` commands the way knftables writes it.

Table `ip kube-proxy-up`: the base chains of the newest layout, the top-level regular chains, the
sets/maps, and per service
  chain service-HASH-ns/name/tcp/p80:
    ip daddr <clusterIP> tcp dport 80 ip saddr != <clusterCIDR> jump mark-for-masquerade
    numgen random mod E vmap { 0 : goto endpoint-..., ... }      (an anonymous set per service)
  chain endpoint-HASH-ns/name/tcp/p80__<ep>/8080 per endpoint:
    ip saddr <ep> jump mark-for-masquerade
    meta l4proto tcp dnat to <ep>:8080
  service-ips element  <clusterIP> . tcp . 80 : goto service-...;  cluster-ips element <clusterIP>

CLI: python3 bench/gen_upstream.py --services 1000 --endpoints 10 --out /tmp/up.nft
"""
import argparse
import base64
import hashlib
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_state  # noqa: E402

TABLE = "kube-proxy-up"
CLUSTER_CIDR = "10.244.0.0/16"


def hash_and_truncate(name):
    h = base64.b32encode(hashlib.sha256(name.encode()).digest()).decode()[:8]
    name = h + "-" + name
    if len(name) > 240:
        name = name[:237] + "..."
    return name


def service_chain(ns, name, proto="tcp", port=gen_state.PORT_NAME):
    return "service-" + hash_and_truncate("%s/%s/%s/%s" % (ns, name, proto, port))


def endpoint_chain(ns, name, ep, ep_port, proto="tcp", port=gen_state.PORT_NAME):
    return "endpoint-" + hash_and_truncate("%s/%s/%s/%s__%s/%d" % (ns, name, proto, port, ep, ep_port))


# The newest layout's base chains (name, type, hook, priority) and the jumps of its filter chains;
# e2e/upstream_nft.py builds the other layouts from these.
BASE_CHAINS = [
    ("filter-prerouting-pre-dnat", "filter", "prerouting", -110),
    ("filter-output-pre-dnat", "filter", "output", -110),
    ("filter-forward", "filter", "forward", 0),
    ("filter-input", "filter", "input", 0),
    ("filter-output", "filter", "output", 0),
    ("nat-prerouting", "nat", "prerouting", -100),
    ("nat-output", "nat", "output", -100),
    ("nat-postrouting", "nat", "postrouting", 100),
]
FILTER_JUMPS = [
    ("filter-prerouting-pre-dnat", "ct state new jump firewall-check"),
    ("filter-output-pre-dnat", "ct state new jump firewall-check"),
    ("filter-forward", "ct state new jump service-endpoints-check"),
    ("filter-forward", "ct state new jump cluster-ips-check"),
    ("filter-input", "ct state new jump nodeport-endpoints-check"),
    ("filter-input", "ct state new jump service-endpoints-check"),
    ("filter-output", "ct state new jump service-endpoints-check"),
    ("filter-output", "ct state new jump cluster-ips-check"),
]


def base_lines(t):
    T = "ip " + t
    out = ['add table %s { comment "rules for kube-proxy" ; }' % T]
    for name, typ, hook, prio in BASE_CHAINS:
        out.append("add chain %s %s { type %s hook %s priority %d ; }" % (T, name, typ, hook, prio))
    for name in ["services", "firewall-check", "service-endpoints-check",
                 "nodeport-endpoints-check", "cluster-ips-check", "reject-chain",
                 "mark-for-masquerade", "masquerading"]:
        out.append("add chain %s %s" % (T, name))
    out += [
        'add set %s cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }' % T,
        'add set %s nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }' % T,
        'add map %s service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; '
        'comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }' % T,
        'add map %s service-nodeports { type inet_proto . inet_service : verdict ; '
        'comment "NodePort traffic" ; }' % T,
        'add map %s no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; '
        'comment "vmap to drop or reject packets to services with no endpoints" ; }' % T,
        'add map %s no-endpoint-nodeports { type inet_proto . inet_service : verdict ; '
        'comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }' % T,
        'add map %s firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; '
        'comment "destinations that are subject to LoadBalancerSourceRanges" ; }' % T,
    ]
    rules = FILTER_JUMPS + [
        ("nat-prerouting", "jump services"),
        ("nat-output", "jump services"),
        ("nat-postrouting", "jump masquerading"),
        ("services", "ip daddr . meta l4proto . th dport vmap @service-ips"),
        ("services", "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"),
        ("firewall-check", "ip daddr . meta l4proto . th dport vmap @firewall-ips"),
        ("service-endpoints-check", "ip daddr . meta l4proto . th dport vmap @no-endpoint-services"),
        ("nodeport-endpoints-check",
         "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"),
        ("cluster-ips-check", 'ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"'),
        ("cluster-ips-check", 'ip daddr { 10.96.0.0/12 } drop comment "Drop traffic to unallocated ClusterIPs"'),
        ("reject-chain", "reject"),
        ("mark-for-masquerade", "mark set mark or 0x4000"),
        ("masquerading", "mark and 0x4000 == 0 return"),
        ("masquerading", "mark set mark xor 0x4000"),
        ("masquerading", "masquerade fully-random"),
    ]
    for chain, rule in rules:
        out.append("add rule %s %s %s" % (T, chain, rule))
    out.append("add element %s nodeport-ips { %s }" % (T, gen_state.NODE_IP))
    return out


def service_lines(state, name, table=TABLE):
    """One service's chains and rules; returns (lines, its service-ips element, its ClusterIP)."""
    T = "ip " + table
    ns = gen_state.NAMESPACE
    s = state.services[name]
    proto = s.get("proto", "TCP").lower()  # bench/datapath_bench.py makes some services UDP
    sc = service_chain(ns, name, proto)
    lines = ["add chain %s %s" % (T, sc)]
    eps = []
    for ep in s["eps"]:
        ec = endpoint_chain(ns, name, ep, gen_state.EP_PORT, proto)
        eps.append(ec)
        lines.append("add chain %s %s" % (T, ec))
        lines.append("add rule %s %s ip saddr %s jump mark-for-masquerade" % (T, ec, ep))
        lines.append("add rule %s %s meta l4proto %s dnat to %s:%d" % (T, ec, proto, ep, gen_state.EP_PORT))
    lines.append("add rule %s %s ip daddr %s %s dport %d ip saddr != %s jump mark-for-masquerade"
                 % (T, sc, s["ip"], proto, gen_state.SVC_PORT, CLUSTER_CIDR))
    if eps:
        vm = " , ".join("%d : goto %s" % (i, ec) for i, ec in enumerate(eps))
        lines.append("add rule %s %s numgen random mod %d vmap { %s }" % (T, sc, len(eps), vm))
    return lines, "%s . %s . %d : goto %s" % (s["ip"], proto, gen_state.SVC_PORT, sc), s["ip"]


def generate_chunks(state, per_chunk=None, table=TABLE):
    """The scripts for all services of the state: the base table, then the services, `per_chunk`
    services per script (None: everything in one script, one transaction)."""
    T = "ip " + table
    names = state.bulk_names + state.probe_names
    per_chunk = per_chunk or max(1, len(names))
    scripts, lines = [], base_lines(table)
    for c in range(0, len(names), per_chunk):
        svc_elems, ip_elems = [], []
        for name in names[c:c + per_chunk]:
            more, elem, ip = service_lines(state, name, table)
            lines += more
            svc_elems.append(elem)
            ip_elems.append(ip)
        lines.append("add element %s service-ips { %s }" % (T, " , ".join(svc_elems)))
        lines.append("add element %s cluster-ips { %s }" % (T, " , ".join(ip_elems)))
        scripts.append("\n".join(lines) + "\n")
        lines = []
    return scripts


def generate(state, table=TABLE):
    """Returns the nft script (str) for all services of the state: one transaction."""
    return generate_chunks(state, None, table)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--services", type=int, required=True)
    ap.add_argument("--endpoints", type=int, required=True)
    ap.add_argument("--probes", type=int, default=30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    text = generate(gen_state.State(a.services, a.endpoints, a.probes))
    with open(a.out, "w") as f:
        f.write(text)
    print("wrote %s (%d lines, %.1f MB)" % (a.out, text.count("\n"), len(text) / 1e6))


if __name__ == "__main__":
    main()

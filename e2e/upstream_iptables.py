"""An `iptables-restore` file shaped like upstream kube-proxy's iptables-mode output
(pkg/proxy/iptables/proxier.go, ~v1.28+) for a handful of ClusterIP services, plus the kubelet's
own chains and an unrelated user chain that must survive our cleanup.

Per service port: KUBE-SERVICES -> KUBE-SVC-<hash> (off-cluster sources marked by KUBE-MARK-MASQ)
-> `-m statistic --mode random --probability 1/n` -> KUBE-SEP-<hash> (hairpin mark, DNAT); a
service without endpoints is rejected from filter KUBE-SERVICES; KUBE-POSTROUTING masquerades
what carries the 0x4000 mark."""
import base64
import hashlib

# The kubelet's and a user's objects: they stay.
KUBELET_CHAINS = {"mangle": ["KUBE-KUBELET-CANARY"], "nat": ["KUBE-KUBELET-CANARY"],
                  "filter": ["KUBE-KUBELET-CANARY", "KUBE-FIREWALL"]}
USER_CHAIN = "USER-AUDIT"
USER_COMMENT = "a-user-rule"
# Another agent (a CNI plugin, say) whose own nat rule jumps to upstream's KUBE-MARK-MASQ: its rule
# stays, and so does the chain it names, with its one MARK rule.
CNI_CHAIN = "CNI-MASQ"
CNI_COMMENT = "a-cni-rule"


def _hash16(text):
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:16]


class Svc:
    def __init__(self, name, cluster_ip, port, endpoints, port_name="http", ns="default", node_port=None):
        self.port_name_str = f"{ns}/{name}:{port_name}"
        self.ip, self.port, self.endpoints = cluster_ip, port, list(endpoints)
        self.node_port = node_port

    def svc_chain(self):
        return "KUBE-SVC-" + _hash16(self.port_name_str + "tcp")

    def ext_chain(self):
        return "KUBE-EXT-" + _hash16(self.port_name_str + "tcp")

    def sep_chain(self, ep):
        return "KUBE-SEP-" + _hash16(self.port_name_str + "tcp" + ep)


def restore_file(v6, services, cluster_cidr):
    """The whole `ip6tables-restore` (v6) or `iptables-restore` input."""
    host = "/128" if v6 else "/32"
    icmp = "icmp6-port-unreachable" if v6 else "icmp-port-unreachable"
    mangle = ["*mangle", ":KUBE-KUBELET-CANARY - [0:0]", ":KUBE-PROXY-CANARY - [0:0]", "COMMIT"]

    f_chains = ["KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL", "KUBE-FORWARD", "KUBE-KUBELET-CANARY", "KUBE-NODEPORTS",
                "KUBE-PROXY-CANARY", "KUBE-PROXY-FIREWALL", "KUBE-SERVICES", USER_CHAIN]
    filt = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"]
    filt += [f":{c} - [0:0]" for c in f_chains]
    new = "-m conntrack --ctstate NEW"
    filt += [
        f'-A INPUT {new} -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
        '-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS',
        f'-A INPUT {new} -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
        "-A INPUT -j KUBE-FIREWALL",
        f'-A INPUT -p tcp -m tcp --dport 2222 -m comment --comment "{USER_COMMENT}" -j {USER_CHAIN}',
        f'-A FORWARD {new} -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
        '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
        f'-A FORWARD {new} -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        f'-A FORWARD {new} -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
        f'-A OUTPUT {new} -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
        f'-A OUTPUT {new} -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        "-A OUTPUT -j KUBE-FIREWALL",
        f"-A {USER_CHAIN} -j ACCEPT",
        '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
        '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" '
        '-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
    ]
    if not v6:
        filt.append('-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet '
                    'connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP')

    n_chains = [CNI_CHAIN, "KUBE-KUBELET-CANARY", "KUBE-MARK-MASQ", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-PROXY-CANARY",
                "KUBE-SERVICES"]
    n_rules = [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
        f'-A POSTROUTING -s {"fd00:99::/64" if v6 else "10.99.0.0/16"} -m comment --comment "{USER_COMMENT}" '
        '-j MASQUERADE',
        f'-A POSTROUTING -m comment --comment "{CNI_COMMENT}" -j {CNI_CHAIN}',
        f'-A {CNI_CHAIN} -s {"fd00:88::/64" if v6 else "10.88.0.0/16"} -m comment --comment "{CNI_COMMENT}" '
        '-j KUBE-MARK-MASQ',
        "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
        "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
    ]
    for s in services:
        if not s.endpoints:
            filt.append(f'-A KUBE-SERVICES -d {s.ip}{host} -p tcp -m comment --comment "{s.port_name_str} has no '
                        f'endpoints" -m tcp --dport {s.port} -j REJECT --reject-with {icmp}')
            continue
        svc = s.svc_chain()
        n_chains.append(svc)
        n_rules.append(f'-A KUBE-SERVICES -d {s.ip}{host} -p tcp -m comment --comment "{s.port_name_str} cluster IP" '
                       f'-m tcp --dport {s.port} -j {svc}')
        n_rules.append(f'-A {svc} ! -s {cluster_cidr} -d {s.ip}{host} -p tcp -m comment --comment '
                       f'"{s.port_name_str} cluster IP" -m tcp --dport {s.port} -j KUBE-MARK-MASQ')
        if s.node_port:  # externalTrafficPolicy Cluster: KUBE-NODEPORTS -> KUBE-EXT (masquerade) -> KUBE-SVC
            ext = s.ext_chain()
            n_chains.append(ext)
            n_rules += [
                f'-A KUBE-NODEPORTS -p tcp -m comment --comment "{s.port_name_str}" -m tcp --dport {s.node_port} -j {ext}',
                f'-A {ext} -m comment --comment "masquerade traffic for {s.port_name_str} external destinations" '
                '-j KUBE-MARK-MASQ',
                f"-A {ext} -j {svc}",
            ]
        for i, (ip, port) in enumerate(s.endpoints):
            ep = f"[{ip}]:{port}" if v6 else f"{ip}:{port}"
            sep = s.sep_chain(ep)
            n_chains.append(sep)
            left = len(s.endpoints) - i
            stat = f" -m statistic --mode random --probability {1.0 / left:.11f}" if left > 1 else ""
            n_rules.append(f'-A {svc} -m comment --comment "{s.port_name_str} -> {ep}"{stat} -j {sep}')
            n_rules.append(f'-A {sep} -s {ip}{host} -m comment --comment "{s.port_name_str}" -j KUBE-MARK-MASQ')
            n_rules.append(f'-A {sep} -p tcp -m comment --comment "{s.port_name_str}" -m tcp '
                           f'-j DNAT --to-destination {ep}')
    n_rules.append('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last '
                   'rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS')
    nat = ["*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
           ":POSTROUTING ACCEPT [0:0]"] + [f":{c} - [0:0]" for c in n_chains] + n_rules + ["COMMIT"]
    filt.append("COMMIT")
    return "\n".join(mangle + nat + filt) + "\n"


def kept_for_the_cni(table, line):
    """The lines of upstream's that stay because the CNI's rule uses them: KUBE-MARK-MASQ and its rule."""
    return table == "nat" and (line.startswith(":KUBE-MARK-MASQ ") or line.startswith("-A KUBE-MARK-MASQ "))


def upstream_chain(name):
    """Is this one of upstream kube-proxy's iptables chains (what must be gone afterwards)?"""
    return name.startswith(("KUBE-SVC-", "KUBE-SEP-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-")) or name in {
        "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
        "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY"}

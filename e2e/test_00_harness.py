"""The harness proves itself first, without the daemon: namespaces, Calico-style routing, echo
servers, the client agent's error names, SCTP INIT + conntrack parsing, and (with a hand-written
nft ruleset standing in for the daemon) that DNAT, reject and masquerade are visible the way the
daemon scenarios check them. When a daemon scenario fails, these passing means the harness is not
the cause."""
import json
import time


import netlab
from netlab import answers


def test_pods_reach_each_other_directly_over_tcp_and_udp_on_both_families(lab):
    a, b = lab.add_pod(), lab.add_pod()
    lab.start_echo(b, tcp=[8080], udp=[5353])
    cli = lab.agent(a)
    assert cli.tcp(b.v4, 8080) == f"{b.v4} {a.v4}"
    assert cli.udp(b.v4, 5353) == f"{b.v4} {a.v4}"
    assert cli.tcp(b.v6, 8080) == f"{b.v6} {a.v6}"
    assert cli.udp(b.v6, 5353) == f"{b.v6} {a.v6}"
    # A closed port on a live pod: the pod's own kernel refuses (RST / ICMP port unreachable).
    assert cli.tcp(b.v4, 9) == "ERR:ECONNREFUSED"
    assert cli.udp(b.v4, 9) == "ERR:ECONNREFUSED"
    assert cli.tcp(b.v6, 9) == "ERR:ECONNREFUSED"


def test_node_namespace_reaches_pods_from_a_chosen_node_address(lab):
    a = lab.add_pod()
    lab.start_echo(a, tcp=[8080], udp=[5353])
    node = lab.agent("node")
    assert node.tcp(a.v4, 8080, bind=netlab.NODE_V4_SECONDARY) == f"{a.v4} {netlab.NODE_V4_SECONDARY}"
    assert node.udp(a.v4, 5353) == f"{a.v4} {netlab.NODE_V4}"
    assert node.tcp(a.v6, 8080).split()[0] == a.v6
    assert {netlab.NODE_V4, netlab.NODE_V4_SECONDARY, netlab.NODE_V6} <= lab.node_addresses()


def test_cluster_ips_go_nowhere_without_rules(lab):
    a = lab.add_pod()
    cli = lab.agent(a)
    # No rules: the packet follows the node's default route to the external namespace, which drops it.
    assert cli.tcp("10.96.0.1", 80, timeout=0.5) == "ERR:ETIMEDOUT"
    assert cli.tcp("fd00:10:96::1", 80, timeout=0.5) == "ERR:ETIMEDOUT"
    assert cli.udp("10.96.0.1", 53, timeout=0.5) == "ERR:ETIMEDOUT"


HANDWRITTEN = """
table ip kpnharness {
  chain hpre {
    type nat hook prerouting priority -100; policy accept;
    ip daddr 10.96.0.1 tcp dport 80 dnat to numgen random mod 2 map { 0 : %(b)s, 1 : %(c)s } : 8080
    ip daddr 10.96.0.3 meta l4proto sctp sctp dport 9000 dnat to %(b)s:9001
    ip daddr 10.96.0.4 tcp dport 80 meta mark set 0x4000 dnat to %(b)s:8080
  }
  chain hout {
    type nat hook output priority -100; policy accept;
    ip daddr 10.96.0.1 tcp dport 80 meta mark set 0x4000 dnat to %(b)s:8080
  }
  chain hpost {
    type nat hook postrouting priority 100; policy accept;
    meta mark 0x4000 masquerade
  }
  chain hfwd {
    type filter hook forward priority 0; policy accept;
    ip daddr 10.96.0.2 reject
  }
}
"""


def test_harness_sees_dnat_reject_masquerade_and_sctp_conntrack_with_handwritten_rules(lab):
    a, b, c = lab.add_pod(), lab.add_pod(), lab.add_pod()
    for p in (b, c):
        lab.start_echo(p, tcp=[8080])
    netlab.sh(["nft", "-f", "-"], ns=lab.node, input=HANDWRITTEN % {"b": b.v4, "c": c.v4})
    cli = lab.agent(a)

    own, peers, errs = answers(cli.many("tcp", "10.96.0.1", 80, 30))
    assert not errs and set(own) == {b.v4, c.v4} and set(peers) == {a.v4}

    assert cli.tcp("10.96.0.2", 80) == "ERR:ECONNREFUSED"
    assert cli.udp("10.96.0.2", 53) == "ERR:ECONNREFUSED"

    # masquerade shows up as a node address other than the client's own
    res = cli.tcp("10.96.0.4", 80)
    own_ip, peer = res.split()
    assert own_ip == b.v4 and peer != a.v4 and peer in lab.node_addresses(), res
    # ... and the node's own traffic to a ClusterIP, bound to the secondary address, is rewritten
    # to the primary one by masquerade.
    node = lab.agent("node")
    assert node.tcp("10.96.0.1", 80, bind=netlab.NODE_V4_SECONDARY) == f"{b.v4} {netlab.NODE_V4}"

    cli.sctp_init("10.96.0.3", 9000, sport=40001)
    entries = [e for e in lab.conntrack("sctp") if e[0].get("dst") == "10.96.0.3"]
    assert entries, lab.conntrack("sctp")
    orig, reply, line = entries[0]
    assert orig == {"src": a.v4, "dst": "10.96.0.3", "sport": "40001", "dport": "9000"}, line
    assert reply["src"] == b.v4 and reply["sport"] == "9001", line


def test_client_loop_counts_every_attempt_and_every_failure(lab):
    a, b = lab.add_pod(), lab.add_pod()
    lab.start_echo(b, tcp=[8080])
    cli = lab.agent(a)
    cli.loop_start(b.v4, 8080)
    time.sleep(1.0)
    st = cli.loop_stop()
    assert st["failures"] == [] and 35 <= st["attempts"] <= 55 and st["ok"] == st["attempts"], st
    cli.loop_start(b.v4, 9)  # nothing listens: every attempt fails and is counted
    time.sleep(0.5)
    st = cli.loop_stop()
    assert st["ok"] == 0 and len(st["failures"]) == st["attempts"] >= 15, st
    assert {f[1] for f in st["failures"]} == {"ERR:ECONNREFUSED"}


def test_manifest_writer_prints_what_kubectl_prints(tmp_path):
    m = netlab.Manifests(str(tmp_path))
    svc = netlab.service("web", [("http", 80, "TCP", 8080)], ["10.96.0.10", "fd00:10:96::10"])
    sl = netlab.endpoint_slice("web", ["10.244.0.11", {"ip": "10.244.0.12", "conditions": {}}],
                               [("http", 8080, "TCP")])
    m.write("web.yaml", [svc, sl])
    m.write("web.json", svc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["web.json", "web.yaml"]  # no temp left
    assert json.loads((tmp_path / "web.json").read_text()) == svc
    text = (tmp_path / "web.yaml").read_text()
    assert "kind: List" in text and "- fd00:10:96::10" in text and "clusterIP: 10.96.0.10" in text
    try:
        import yaml  # optional cross-check: PyYAML reads back exactly the objects we wrote
    except ImportError:
        return
    assert yaml.safe_load(text) == netlab.as_list([svc, sl])

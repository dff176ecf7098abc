"""NodePorts on loopback (issue 29; upstream 1.37's nftables mode, KEP-6032): with a loopback entry
in --nodeport-addresses the node's own clients reach 127.0.0.1:<nodePort> and [::1]:<nodePort>
over TCP (a userspace listener per NodePort relays to an endpoint, local or on another node); UDP
and SCTP there are rejected and counted; eTP=Local takes this node's endpoints only. Without such
an entry loopback is never a NodePort. Every check is a real connection from the node namespace;
the echo servers say which endpoint answered and which source it saw."""
import json
import subprocess
import time

import pytest

import netlab
from netlab import (NODE_V4, NODE_V6, endpoint_slice, expect_answers, expect_refused, http_get,
                    metric_sample, node_object, service)

pytestmark = pytest.mark.usefixtures("daemon_bin")

REMOTE = "node2"
# Another node's pod, really elsewhere: an address in the upstream namespace behind the node's
# default route (add_upstream_witness), reached through the lab's routing.
FAR_V4, FAR_V6 = "10.244.1.7", "fd00:10:244:1::7"
LISTENERS = "kubeproxy_nftables_localhost_nodeport_listeners"
FAILURES = "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total"
REJECTED = "kubeproxy_nftables_localhost_nodeport_rejected_packets_total"


def slices(name, ports, local=(), remote=(), far=False):
    """Both families' slices: pods in `local` on this node, `remote` pods on node2, and with
    `far` the upstream namespace's address (node2)."""
    def eps(fam):
        out = [{"ip": getattr(p, fam), "node": netlab.NODE_NAME} for p in local]
        out += [{"ip": getattr(p, fam), "node": REMOTE} for p in remote]
        if far:
            out.append({"ip": FAR_V4 if fam == "v4" else FAR_V6, "node": REMOTE})
        return out
    return [endpoint_slice(name, eps("v4"), ports, address_type="IPv4"),
            endpoint_slice(name, eps("v6"), ports, address_type="IPv6")]


def trace(lab, dst, port, proto="tcp"):
    """`kube-proxy-nft trace --from=node` of the live table, as JSON (the text form runs too)."""
    host = f"[{dst}]" if ":" in dst else dst
    args = ["ip", "netns", "exec", lab.node, netlab.BIN, "trace", "--from=node", f"--src={dst}",
            f"--dst={host}:{port}", f"--proto={proto}"]
    p = subprocess.run(args + ["--output=json"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"{' '.join(args)}: exit {p.returncode}: {p.stderr}"
    text = subprocess.run(args, capture_output=True, text=True, timeout=30)
    tr = json.loads(p.stdout)
    assert text.returncode == 0 and f"verdict: {tr['verdict']} — {tr['reason']}" in text.stdout, text.stdout
    return tr


def scrape(lab):
    r = http_get(lab.node, "127.0.0.1", 10249, "/metrics")
    assert r.get("status") == 200, r
    return r["body"]


def wait_listeners(lab, timeout=10.0, **want):
    """Until the listeners gauge reads `want` per family (IPv4=2, IPv6=None for "no series"): the
    listeners follow a sync (its `sync done` line comes first), so a test that connects right
    after the line would race them."""
    deadline = time.monotonic() + timeout
    while True:
        body = scrape(lab)
        have = {fam: metric_sample(body, LISTENERS, ip_family=fam) for fam in want}
        if have == want:
            return body
        assert time.monotonic() < deadline, f"listeners {have}, expected {want}:\n{body}"
        time.sleep(0.05)


def cluster(local, remote, far=False):
    """The services of the main scenario: eTP=Cluster (TCP + UDP + SCTP NodePorts; a local pod,
    a remote pod and the far endpoint), eTP=Local with a local and a remote endpoint, eTP=Local
    with a remote one only."""
    tcp_udp = [("http", 80, "TCP", 80, 30001), ("dns", 53, "UDP", 53, 30053), ("sctp", 9000, "SCTP", 9000, 30090)]
    ports = [("http", 80, "TCP"), ("dns", 53, "UDP"), ("sctp", 9000, "SCTP")]
    return ([node_object(),
             service("web", tcp_udp, ["10.96.0.41", "fd00:10:96::41"], type="NodePort"),
             service("mixed", [("http", 80, "TCP", 80, 30002)], ["10.96.0.42", "fd00:10:96::42"],
                     type="NodePort", etp="Local"),
             service("away", [("http", 80, "TCP", 80, 30003)], ["10.96.0.43", "fd00:10:96::43"],
                     type="NodePort", etp="Local")]
            + slices("web", ports, local=[local], remote=[remote], far=far)
            + slices("mixed", [("http", 80, "TCP")], local=[local], remote=[remote])
            + slices("away", [("http", 80, "TCP")], remote=[remote]))


def test_loopback_nodeports_tcp_local_and_remote_endpoints_etp_and_udp_rejected(lab):
    local, remote = lab.add_backends(2, tcp=[80], udp=[53])
    lab.add_upstream_witness([FAR_V4, FAR_V6], tcp=[80], udp=[53])
    lab.manifests.write("all.yaml", cluster(local, remote, far=True))
    d = lab.start_daemon(["--nodeport-addresses=primary,localhost"])
    wait_listeners(lab, IPv4=2, IPv6=2)  # web and mixed (away has no local endpoint)
    node, node_addrs = lab.agent("node"), lab.node_addresses()

    # eTP=Cluster over TCP: every endpoint (this node's pod, node2's pod, the far one), which sees
    # a node address (the listener's own connection), in both families.
    expect_answers(node, "127.0.0.1", 30001, {local.v4, remote.v4, FAR_V4}, node_addrs, what="eTP=Cluster on 127.0.0.1")
    expect_answers(node, "::1", 30001, {local.v6, remote.v6, FAR_V6}, node_addrs, what="eTP=Cluster on ::1")
    # eTP=Local: this node's endpoint only; without one there is no listener: refused.
    expect_answers(node, "127.0.0.1", 30002, {local.v4}, node_addrs, what="eTP=Local on 127.0.0.1")
    expect_answers(node, "::1", 30002, {local.v6}, node_addrs, what="eTP=Local on ::1")
    expect_refused(node, "127.0.0.1", 30003, what="eTP=Local without a local endpoint")
    expect_refused(node, "::1", 30003, what="eTP=Local without a local endpoint")
    # The primary address keeps its kernel path (eTP=Local from the node itself: every endpoint).
    expect_answers(node, NODE_V4, 30001, {local.v4, remote.v4, FAR_V4}, node_addrs, what="primary NodePort")
    expect_answers(node, NODE_V4, 30003, {remote.v4}, node_addrs, what="node to eTP=Local NodePort")

    # The trace says so, with the endpoints that answered and the source they saw.
    for host, eps in (("127.0.0.1", {local.v4, remote.v4, FAR_V4}), ("::1", {local.v6, remote.v6, FAR_V6})):
        tr = trace(lab, host, 30001)
        assert tr["verdict"] == "relay" and tr["service"] == "default/web:http", tr
        assert {c["address"] for c in tr["candidates"]} == eps, tr
        assert {c["source"] for c in tr["candidates"]} <= node_addrs and not any(c["masquerade"] for c in tr["candidates"]), tr
    tr = trace(lab, "127.0.0.1", 30002)
    assert tr["verdict"] == "relay" and [c["address"] for c in tr["candidates"]] == [local.v4], tr
    assert "externalTrafficPolicy Local" in tr["reason"], tr
    tr = trace(lab, "127.0.0.1", 30003)
    assert tr["verdict"] == "reject" and "has no endpoint on this node" in tr["reason"], tr
    tr = trace(lab, "127.0.0.1", 30053, proto="udp")
    assert tr["verdict"] == "reject" and "localhost NodePorts are TCP only" in tr["reason"], tr

    # UDP on loopback: rejected by the table (ICMP port unreachable), and counted per protocol.
    before = scrape(lab)
    assert metric_sample(before, REJECTED, ip_family="IPv4", protocol="UDP") == 0, before
    for host in ("127.0.0.1", "::1"):
        expect_refused(node, host, 30053, proto="udp", what="UDP NodePort on loopback")
    expect_refused(node, "127.0.0.1", 30053, proto="udp", what="UDP NodePort on loopback, again")
    after = scrape(lab)
    assert metric_sample(after, REJECTED, ip_family="IPv4", protocol="UDP") == 2, after
    assert metric_sample(after, REJECTED, ip_family="IPv6", protocol="UDP") == 1, after
    assert metric_sample(after, REJECTED, ip_family="IPv4", protocol="SCTP") == 0, after
    # ... while UDP to the primary address is DNATed as always.
    expect_answers(node, NODE_V4, 30053, {local.v4, remote.v4, FAR_V4}, node_addrs, proto="udp", what="UDP NodePort")
    # Listeners: web and mixed (away has no local endpoint), per family.
    for fam in ("IPv4", "IPv6"):
        assert metric_sample(after, LISTENERS, ip_family=fam) == 2, after
        assert metric_sample(after, FAILURES, ip_family=fam) == 0, after

    # Endpoints change: the listener follows (the remote pod and the far one leave web).
    with d.change():
        lab.manifests.write("all.yaml", cluster(local, remote)[:4]
                            + slices("web", [("http", 80, "TCP")], local=[local])
                            + cluster(local, remote)[6:])
    expect_answers(node, "127.0.0.1", 30001, {local.v4}, node_addrs, what="after the endpoints changed")

    # A restart over the table commits nothing, and the counters keep their counts.
    d.stop()
    d = lab.start_daemon(["--nodeport-addresses=primary,localhost"], label="restart")
    wait_listeners(lab, IPv4=2, IPv6=2)
    assert d.syncs()[0]["ops"] == 0, f"restart changed the ruleset: {d.syncs()[0]}\n{d.tail()}"
    assert metric_sample(scrape(lab), REJECTED, ip_family="IPv4", protocol="UDP") == 2
    expect_answers(node, "127.0.0.1", 30001, {local.v4}, node_addrs, what="after the restart")
    # A repair over the intact table (an outside transaction that changes nothing) neither.
    n = len(d.settle())
    netlab.sh(["nft", "-f", "-"], ns=lab.node,
              input="add element ip kube-proxy localhost-nodeports { udp . 39999 }\n"
                    "delete element ip kube-proxy localhost-nodeports { udp . 39999 }\n")
    repair = d.wait_syncs(n + 1)[n]
    assert repair["ops"] == 0, f"the repair of an intact table: {repair}\n{d.tail()}"
    # Outside damage to the feature's own parts is repaired: a flushed reject chain serves again.
    n = len(d.settle())
    netlab.sh(["nft", "flush", "chain", "ip", "kube-proxy", "localhost-nodeport-reject"], ns=lab.node)
    d.wait_syncs(n + 1)
    expect_refused(node, "127.0.0.1", 30053, proto="udp", what="UDP on loopback after the repair")
    assert metric_sample(scrape(lab), REJECTED, ip_family="IPv4", protocol="UDP") == 3


def test_without_a_loopback_entry_loopback_is_never_a_nodeport(lab):
    """The default (`primary`), and `all` (a /0 reaches loopback by accident, not by choice): the
    node's own listener on loopback answers, nothing is DNATed, relayed or rejected there, and the
    table has nothing of the feature."""
    local, remote = lab.add_backends(2, tcp=[80], udp=[53])
    own = lab.start_echo(lab.node_pod(), tcp=[30001], udp=[30053], addrs=["127.0.0.1", "::1"])
    lab.manifests.write("all.yaml", cluster(local, remote))
    node = lab.agent("node")
    for flags in ([], ["--nodeport-addresses=all"], ["--nodeport-addresses=0.0.0.0/0,::/0"]):
        d = lab.start_daemon(flags, label=f"flags{len(lab.daemons)}")
        for host in ("127.0.0.1", "::1"):
            expect_answers(node, host, 30001, {host}, {host}, n=2, what=f"{flags}: loopback is not a NodePort")
            expect_answers(node, host, 30053, {host}, {host}, n=2, proto="udp", what=f"{flags}: nor UDP")
        assert "localhost-nodeport" not in lab.table("ip") + lab.table("ip6"), lab.table("ip")
        tr = trace(lab, "127.0.0.1", 30001)
        assert tr["verdict"] == "accept" and "is not served on loopback" in tr["reason"], tr
        body = scrape(lab)
        assert LISTENERS not in body and REJECTED not in body, body
        d.stop()
    # Turned on over the table the default left (no counters in it yet): the start-up declares
    # them, and loopback answers at once.
    netlab._kill_group(own)  # the node's own loopback listeners go: the ports are the listeners' now
    d = lab.start_daemon(["--nodeport-addresses=primary,localhost"], label="turned-on")
    wait_listeners(lab, IPv4=2, IPv6=2)
    expect_answers(node, "127.0.0.1", 30001, {local.v4, remote.v4}, lab.node_addresses(), what="turned on")
    expect_refused(node, "127.0.0.1", 30053, proto="udp", what="turned on")
    assert metric_sample(scrape(lab), REJECTED, ip_family="IPv4", protocol="UDP") == 1


def test_a_listener_that_cannot_bind_is_counted_and_retried(lab):
    """A host process holding 127.0.0.1:<nodePort>: that listener fails (counted, logged), the
    others serve, and the next sync after the port is free opens it."""
    local, remote = lab.add_backends(2, tcp=[80], udp=[53])
    lab.manifests.write("all.yaml", cluster(local, remote))
    squatter = lab.start_echo(lab.node_pod(), tcp=[30002], addrs=["127.0.0.1"])
    d = lab.start_daemon(["--nodeport-addresses=127.0.0.1/32"])
    node, node_addrs = lab.agent("node"), lab.node_addresses()
    d.wait_for("localhost nodePort 30002: cannot listen on 127.0.0.1:30002")
    body = scrape(lab)
    assert metric_sample(body, FAILURES, ip_family="IPv4") >= 1, body
    assert metric_sample(body, LISTENERS, ip_family="IPv4") == 1, body
    assert metric_sample(body, LISTENERS, ip_family="IPv6") is None, "127.0.0.1/32 is IPv4 only"
    expect_answers(node, "127.0.0.1", 30001, {local.v4, remote.v4}, node_addrs, what="the other listener")
    expect_answers(node, "127.0.0.1", 30002, {"127.0.0.1"}, {"127.0.0.1"}, n=2, what="the squatter keeps its port")
    netlab._kill_group(squatter)
    with d.change():  # any change syncs, and a sync tries the failed listener again
        lab.manifests.write("all.yaml", cluster(local, remote) + [service(
            "nudge", [("http", 80, "TCP", 80)], ["10.96.0.49", "fd00:10:96::49"])])
    wait_listeners(lab, IPv4=2)
    expect_answers(node, "127.0.0.1", 30002, {local.v4}, node_addrs, what="opened at the next sync")


def test_client_ip_affinity_pins_every_loopback_client_to_one_endpoint(lab):
    """sessionAffinity ClientIP (upstream's KEP-6032 e2e): every loopback client is 127.0.0.1, so
    all connections through the listener go to one endpoint while it keeps being used."""
    eps = lab.add_backends(3, tcp=[80], udp=[])
    sticky = service("sticky", [("http", 80, "TCP", 80, 30004)], ["10.96.0.44", "fd00:10:96::44"], type="NodePort")
    sticky["spec"]["sessionAffinity"] = "ClientIP"
    sticky["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 600}}
    lab.manifests.write("all.yaml", [node_object(), sticky] + slices("sticky", [("http", 80, "TCP")], local=eps))
    lab.start_daemon(["--nodeport-addresses=primary,localhost"])
    wait_listeners(lab, IPv4=1, IPv6=1)
    node = lab.agent("node")
    for host in ("127.0.0.1", "::1"):
        own, _, errs = netlab.answers(node.many("tcp", host, 30004, 24, timeout=2.0))
        assert not errs and len(own) == 1, f"{host}: answered by {own}, errors {errs}"
        assert set(own) <= {p.v4 for p in eps} | {p.v6 for p in eps}

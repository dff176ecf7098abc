"""`kube-proxy-nft trace` against the kernel (issue 15): for real connections, the trace of the live
table predicts the verdict (DNAT, refused, dropped), the endpoint that answered is among its
candidates, and the source address that endpoint saw is the one the trace predicted (masqueraded
or not). And the chains `nft monitor trace` reports for the connection's first packet (marked by
a temporary `meta nftrace set 1` rule in a table of the test's own, deleted afterwards) are the
chains the trace printed, in order."""
import ipaddress
import json
import os
import re
import subprocess
import time

import pytest

import netlab
from netlab import (BIN, NODE_V4, NODE_V6, LabError, endpoint_slice, expect_dropped, expect_refused,
                    node_object, service, sh)
from test_70_external import LB_V4, LB_V6, slices

pytestmark = pytest.mark.usefixtures("daemon_bin")

CIP_V4, CIP_V6 = "10.96.0.10", "fd00:10:96::10"
NOEPS_V4 = "10.96.0.20"


def run_trace(lab, frm, src, dst, port, proto="tcp", extra=()):
    """The trace of the live table, as JSON; the text form must run too and name the same verdict."""
    host = f"[{dst}]" if ":" in dst else dst
    args = ["ip", "netns", "exec", lab.node, BIN, "trace", f"--from={frm}", f"--src={src}",
            f"--dst={host}:{port}", f"--proto={proto}", *extra]
    p = subprocess.run(args + ["--output=json"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"{' '.join(args)}: exit {p.returncode}: {p.stderr}"
    tr = json.loads(p.stdout)
    text = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert text.returncode == 0, text.stderr
    assert f"verdict: {tr['verdict']} — {tr['reason']}" in text.stdout, text.stdout
    return tr, text.stdout


def monitored_chains(lab, agent, family, src, dst, port, proto="tcp", bind=None):
    """Our table's chains that `nft monitor trace` names for the first packet of one connection
    from `agent` (consecutive repeats collapsed), and the destination that packet reached."""
    table = f"{lab.prefix}trace"
    sel = f"{family} saddr {src} {family} daddr {dst} {proto} dport {port}"
    rules = (f"table {family} {table} {{\n"
             f"  chain pre {{\n    type filter hook prerouting priority -300;\n    {sel} meta nftrace set 1\n  }}\n"
             f"  chain out {{\n    type filter hook output priority -300;\n    {sel} meta nftrace set 1\n  }}\n}}\n")
    sh(["nft", "-f", "-"], ns=lab.node, input=rules)
    # Line-buffered: piped, nft's stdio would hand its events over in blocks.
    mon = subprocess.Popen(["ip", "netns", "exec", lab.node, "stdbuf", "-oL", "nft", "monitor", "trace"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    reader = _LineReader(mon.stdout.fileno())
    lab.procs.append(mon)
    try:
        lines, result, deadline = [], None, time.time() + 20
        # The monitor says nothing when it is ready: connect until a traced packet shows up.
        while time.time() < deadline:
            result = (agent.tcp if proto == "tcp" else agent.udp)(dst, port, timeout=0.8, bind=bind)
            got = reader.read(1.0)
            lines += got
            if any(f" {family} kube-proxy " in ln for ln in lines):
                # The packet's last events: read until the monitor has been quiet for 0.5 s.
                while True:
                    more = reader.read(0.5)
                    if not more:
                        break
                    lines += more
                break
        else:
            raise LabError(f"nft monitor trace reported nothing for {sel}: {lines}")
    finally:
        netlab._kill_group(mon)
        mon.wait()
        sh(["nft", "delete", "table", family, table], ns=lab.node)
    assert table not in lab.nft("list", "tables")
    # The first packet's events: from its first line to where another trace id begins (the
    # kernel reuses ids, so a later packet of the connection may carry the same one again).
    first, reached = None, None
    chains = []
    for ln in lines:
        m = re.match(rf"trace id (\w+) {family} (\S+) (\S+) ", ln)
        if not m:
            continue
        tid, tbl, chain = m.groups()
        first = first or tid
        if tid != first:
            break
        if tbl == "kube-proxy" and (not chains or chains[-1] != chain):
            chains.append(chain)
        d = re.search(rf" packet: .* {family} daddr (\S+) ", ln)
        if d:
            reached = d.group(1)  # the destination as the last hook saw it: after DNAT
    return chains, reached, lines


class _LineReader:
    """Lines from a pipe as they come, waiting at most `wait` seconds for the next bytes. Reads the
    raw fd: select() on a buffered file object misses lines already in its buffer."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def read(self, wait):
        import select
        end = time.time() + wait
        while True:
            left = end - time.time()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                break
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]


def cross_check(lab, agent, frm, src, dst, port, expect, proto="tcp", bind=None, what="", n=12):
    """Trace, then real connections: the verdict, the answering endpoints and the sources they saw
    are the trace's; then the monitored chains of one more connection are the trace's chains."""
    tr, text = run_trace(lab, frm, src, dst, port, proto)
    label = f"{what}: trace {frm} {src} -> {dst}:{port}"
    assert tr["verdict"] == expect, f"{label}: {tr['verdict']} ({tr['reason']}), expected {expect}\n{text}"
    family = "ip6" if ":" in dst else "ip"
    assert tr["family"] == family
    if expect == "dnat":
        by_addr = {c["address"]: c for c in tr["candidates"]}
        node_addrs = lab.node_addresses()
        assert abs(sum(c["probability"] for c in tr["candidates"]) - 1) < 1e-9, tr
        n = max(n, netlab.connections_to_see_all(len(by_addr)))
        res = agent.many(proto, dst, port, n, bind=bind, timeout=2.0)
        own, peers, errs = netlab.answers(res)
        assert not errs, f"{label}: {errs}"
        for r in res:
            ep, seen = r.split()[:2]
            assert ep in by_addr, f"{label}: answered by {ep}, not a candidate of {sorted(by_addr)}\n{text}"
            c = by_addr[ep]
            assert seen == c["source"], f"{label}: {ep} saw {seen}, the trace predicted {c['source']}\n{text}"
            # Masqueraded: a node address (the node's own is its source already); else the client's.
            assert (seen in node_addrs) if c["masquerade"] else (seen == src), \
                f"{label}: masquerade {c['masquerade']} but {ep} saw {seen}"
        assert tr["masquerade"] == any(c["masquerade"] for c in tr["candidates"])
    elif expect == "reject":
        expect_refused(agent, dst, port, proto=proto, bind=bind, what=label)
        assert tr["candidates"] == []
    elif expect == "drop":
        expect_dropped(agent, dst, port, bind=bind, what=label)
        assert tr["candidates"] == []
    chains, reached, lines = monitored_chains(lab, agent, family, src, dst, port, proto, bind)
    if expect == "dnat":
        # The candidate that traced packet went to.
        match = [c for c in tr["candidates"] if c["address"] == reached]
        assert match, f"{label}: the traced packet went to {reached}, not a candidate\n" + "\n".join(lines)
        predicted = match[0]["chains"]
    else:
        predicted = tr["chains"]
    assert chains == predicted, (f"{label}: nft monitor trace named {chains}, the trace printed {predicted}\n"
                                 + "\n".join(lines) + "\n" + text)
    return tr, text


def test_trace_cluster_ip_paths(lab):
    """pod -> ClusterIP (v4, v6), node -> ClusterIP, hairpin, no endpoints, unknown port."""
    pod = lab.add_pod("pod")
    ep1, ep2 = lab.add_backends(2, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [
        service("web", [("http", 80, "TCP", 8080)], [CIP_V4, CIP_V6]),
        endpoint_slice("web", [ep1.v4, ep2.v4], [("http", 8080, "TCP")]),
        endpoint_slice("web", [ep1.v6, ep2.v6], [("http", 8080, "TCP")], address_type="IPv6"),
        service("noeps", [("http", 80, "TCP", 8080)], [NOEPS_V4]),
    ])
    lab.start_daemon()
    cli, node, hair = lab.agent(pod), lab.agent("node"), lab.agent(ep1)

    tr, text = cross_check(lab, cli, "pod", pod.v4, CIP_V4, 80, "dnat", what="pod to ClusterIP")
    assert tr["service"] == "default/web:http"
    assert {c["address"] for c in tr["candidates"]} == {ep1.v4, ep2.v4}
    assert not tr["masquerade"]
    assert f'"default/web:http"' in text and "meta length & 2 | 2 != @backends-tcp" in text, text
    tr, _ = cross_check(lab, cli, "pod", pod.v6, CIP_V6, 80, "dnat", what="pod to ClusterIP (IPv6)")
    assert {c["address"] for c in tr["candidates"]} == {ep1.v6, ep2.v6}
    tr, _ = cross_check(lab, node, "node", NODE_V4, CIP_V4, 80, "dnat", what="node to ClusterIP")
    assert tr["masquerade"] and all(c["masquerade"] for c in tr["candidates"])
    tr, _ = cross_check(lab, hair, "pod", ep1.v4, CIP_V4, 80, "dnat", what="hairpin")
    masq = {c["address"]: c["masquerade"] for c in tr["candidates"]}
    assert masq == {ep1.v4: True, ep2.v4: False}, tr
    tr, _ = cross_check(lab, cli, "pod", pod.v4, NOEPS_V4, 80, "reject", what="no endpoints")
    assert tr["service"] == "default/noeps:http" and tr["reason"].startswith("no endpoints"), tr
    tr, _ = cross_check(lab, cli, "pod", pod.v4, CIP_V4, 81, "reject", what="unknown port")
    assert tr["reason"].startswith("unknown port"), tr


@pytest.mark.parametrize("etp", ["Cluster", "Local"])
def test_trace_external_paths(lab, etp):
    """external -> NodePort and LoadBalancer IP (v4, v6) with both traffic policies, one endpoint
    here and one on another node; and a blocked source range."""
    client = lab.add_external_client()
    local, remote = lab.add_backends(2, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    objs = [service("lb", [("p80", 80, "TCP", 80, 30080)], ["10.96.0.40", "fd00:10:96::40"], type="LoadBalancer",
                    etp=etp, lb_ingress=[LB_V4, LB_V6])]
    objs += slices("lb", [local, remote], [("p80", 80, "TCP")], remote=[remote])
    objs += [service("fw", [("p80", 80, "TCP", 80, 30081)], ["10.96.0.41"], type="LoadBalancer",
                     lb_ingress=["198.51.100.11"], source_ranges=["203.0.113.0/25"]),
             endpoint_slice("fw", [local.v4], [("p80", 80, "TCP")])]
    lab.manifests.write("svc.yaml", objs)
    lab.start_daemon()
    ext = lab.agent(client)
    for src, dst, port in ((client.v4, LB_V4, 80), (client.v4, NODE_V4, 30080), (client.v6, LB_V6, 80),
                           (client.v6, NODE_V6, 30080)):
        tr, text = cross_check(lab, ext, "external", src, dst, port, "dnat", what=f"eTP={etp}")
        assert tr["service"] == "default/lb:p80", tr
        fam = "v6" if ":" in dst else "v4"
        if etp == "Local":
            assert [c["address"] for c in tr["candidates"]] == [getattr(local, fam)], text
            assert not tr["masquerade"], text
        else:
            assert {c["address"] for c in tr["candidates"]} == {getattr(local, fam), getattr(remote, fam)}, text
            assert tr["masquerade"], text
    tr, _ = cross_check(lab, ext, "external", client.v4, "198.51.100.11", 80, "dnat", what="source range: allowed")
    tr, _ = cross_check(lab, ext, "external", client.v4_blocked, "198.51.100.11", 80, "drop",
                        bind=client.v4_blocked, what="source range: blocked")
    assert tr["reason"].startswith("source range"), tr


def test_trace_etp_local_without_local_endpoint_and_bad_arguments(lab):
    """eTP=Local with the only endpoint on another node: the trace predicts the drop. Bad
    arguments exit 2 with one line; a trace from a manifest folder renders without the kernel."""
    client = lab.add_external_client()
    (remote,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [service("far", [("p80", 80, "TCP", 80, 30082)], ["10.96.0.42"],
                                             type="LoadBalancer", etp="Local", lb_ingress=[LB_V4])]
                        + slices("far", [remote], [("p80", 80, "TCP")], remote=[remote])[:1])
    # Before the daemon: no table of ours, and the trace says so (the packet passes untouched).
    tr, _ = run_trace(lab, "external", client.v4, LB_V4, 80)
    assert tr["verdict"] == "accept" and tr["reason"].startswith("no table ip kube-proxy on this node"), tr
    lab.start_daemon()
    ext = lab.agent(client)
    tr, _ = cross_check(lab, ext, "external", client.v4, LB_V4, 80, "drop", what="eTP=Local, no local endpoint")
    assert tr["reason"].startswith("traffic policy Local"), tr
    for args, word in ((["--from=moon"], "--from"), (["--proto=icmp"], "--proto"), (["--bogus=1"], "--bogus"),
                       (["--dst=10.96.0.42"], "--dst")):
        base = {"--from": "--from=pod", "--src": "--src=10.244.0.11", "--dst": "--dst=10.96.0.42:80",
                "--proto": "--proto=tcp"}
        for a in args:
            base[a.split("=")[0]] = a
        p = subprocess.run(["ip", "netns", "exec", lab.node, BIN, "trace", *base.values()], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1 and word in p.stderr, (args, p.stderr)
    p = subprocess.run([BIN, "trace", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "--from=pod|node|external" in p.stdout, (p.returncode, p.stdout, p.stderr)
    # The desired ruleset from the manifests (--manifests): the same prediction, the kernel untouched.
    before = lab.table("ip")
    tr, _ = run_trace(lab, "external", client.v4, LB_V4, 80,
                      extra=[f"--manifests={lab.manifests.path}", f"--hostname-override={netlab.NODE_NAME}",
                             f"--cluster-cidr={netlab.CLUSTER_CIDRS}"])
    assert tr["verdict"] == "drop" and tr["reason"].startswith("traffic policy Local"), tr
    assert lab.table("ip") == before


def test_trace_from_kubeconfig_renders_what_the_daemon_then_programs(lab):
    """--kubeconfig: the trace renders the API server's state for this node without touching the
    kernel (no table appears); once the daemon programs that state, the live trace says the same
    (verdict, candidates, masquerade, chains)."""
    from apiserver_lab import ApiServer
    pod = lab.add_pod("pod")
    ep1, ep2 = lab.add_backends(2, tcp=[8080], udp=[])
    api = ApiServer(lab)
    api.put([node_object(), service("web", [("http", 80, "TCP", 8080)], [CIP_V4]),
             endpoint_slice("web", [ep1.v4, ep2.v4], [("http", 8080, "TCP")])])
    kc = api.kubeconfig_token(lab.tmp + "/kc")
    flags = [f"--kubeconfig={kc}", f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}"]
    desired, _ = run_trace(lab, "pod", pod.v4, CIP_V4, 80, extra=flags)
    assert desired["verdict"] == "dnat" and {c["address"] for c in desired["candidates"]} == {ep1.v4, ep2.v4}, desired
    assert lab.table("ip") == "", "the rendered trace touched the kernel"
    lab.start_daemon([f"--kubeconfig={kc}"], manifests=False)
    live, _ = run_trace(lab, "pod", pod.v4, CIP_V4, 80)
    for key in ("verdict", "service", "masquerade", "chains"):
        assert live[key] == desired[key], (key, live[key], desired[key])
    assert [(c["address"], c["probability"], c["source"], c["chains"]) for c in live["candidates"]] == \
        [(c["address"], c["probability"], c["source"], c["chains"]) for c in desired["candidates"]]


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_trace_shows_the_sticky_entry_of_a_client_and_the_random_pick_of_another(lab, family):
    """ClientIP affinity, three endpoints: after a real connection, the live trace for that client
    reads its entry from the kernel's dynamic set and predicts exactly the endpoint that answered,
    with probability 1; a client that never connected gets all three, and no entry."""
    from test_73_affinity import V4, V6, stuck_to, write
    clients = [lab.add_pod("client1"), lab.add_pod("client2")]
    eps = lab.add_backends(3, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    write(lab, eps, 600)
    lab.start_daemon()
    host = V4 if family == "v4" else V6
    addr = (lambda p: p.v4) if family == "v4" else (lambda p: p.v6)
    answered = stuck_to(lab.agent(clients[0]), host, n=5, what="client1")

    held, text = run_trace(lab, "pod", addr(clients[0]), host, 80)
    assert held["verdict"] == "dnat", text
    assert [(c["address"], c["probability"]) for c in held["candidates"]] == [(answered, 1)], text
    sticky = held["sticky"]
    sticky_set = "sticky-tcp" if family == "v4" else "sticky6-tcp"
    assert sticky["set"] == sticky_set and sticky["kernelEntries"] is True, sticky
    # client . scope . port 80 << 16 | slot; the scope is the ClusterIP as a number (IPv4), or the
    # two 32-bit halves of the FNV-1a hash of its 16 bytes (IPv6)
    if family == "v4":
        scope = str(int(ipaddress.ip_address(host)))
    else:
        h = 14695981039346656037
        for byte in ipaddress.ip_address(host).packed:
            h = ((h ^ byte) * 1099511628211) & (2 ** 64 - 1)
        scope = f"{h >> 32} . {h & 0xFFFFFFFF}"
    assert sticky["entry"] in {f"{addr(clients[0])} . {scope} . {(80 << 16) | slot}" for slot in range(3)}, sticky
    assert sticky["timeout"] == 600 and 0 < sticky["expiresIn"] <= 600, sticky
    assert f"sticky: @{sticky_set} holds {sticky['entry']}, expires in " in text, text
    assert "with probability 1" in text, text

    fresh, text = run_trace(lab, "pod", addr(clients[1]), host, 80)
    assert fresh["verdict"] == "dnat", text
    assert sorted(c["address"] for c in fresh["candidates"]) == sorted(addr(p) for p in eps), text
    assert fresh["sticky"]["entry"] is None and fresh["sticky"]["expiresIn"] is None, fresh["sticky"]
    assert "holds no entry for this client: the first pick is random among the 3 candidates" in text, text


def test_trace_from_master_renders_the_api_servers_state(lab):
    """--master alone (a plain-HTTP API server URL, no kubeconfig): the trace renders what that
    server serves for this node, without touching the kernel."""
    from apiserver_lab import ApiServer
    pod = lab.add_pod("pod")
    ep1, ep2 = lab.add_backends(2, tcp=[8080], udp=[])
    api = ApiServer(lab, tls=False)
    api.put([node_object(), service("web", [("http", 80, "TCP", 8080)], [CIP_V4]),
             endpoint_slice("web", [ep1.v4, ep2.v4], [("http", 8080, "TCP")])])
    flags = [f"--master={api.url}", f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}"]
    desired, text = run_trace(lab, "pod", pod.v4, CIP_V4, 80, extra=flags)
    assert desired["verdict"] == "dnat", text
    assert desired["service"] == "default/web:http", text
    assert sorted(c["address"] for c in desired["candidates"]) == sorted([ep1.v4, ep2.v4]), text
    assert desired["sticky"] is None, desired
    assert lab.table("ip") == "", "the rendered trace touched the kernel"
    missing, _ = run_trace(lab, "pod", pod.v4, NOEPS_V4, 80, extra=flags)
    assert missing["verdict"] == "accept", missing

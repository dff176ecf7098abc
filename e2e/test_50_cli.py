"""The command line contract: --dry-run, --cleanup, missing source flag."""
import os
import re

import pytest

import netlab
from netlab import endpoint_slice, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

BASE = [f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}",
        "--v=2", "--logtostderr"]


def chain_names(text):
    return set(re.findall(r"^\s*chain (\S+) \{", text, re.M))


def write_dry_manifests(lab):
    a, b = "10.244.0.11", "10.244.0.12"
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("dryweb.yaml", [
        service("dryweb", [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
                ["10.96.3.1", "fd00:10:96::3:1"]),
        endpoint_slice("dryweb", [a, b], [("http", 8080, "TCP"), ("dns", 5353, "UDP")]),
        endpoint_slice("dryweb", ["fd00:10:244::11"], [("http", 8080, "TCP"), ("dns", 5353, "UDP")],
                       address_type="IPv6"),
    ])
    lab.manifests.write("drysctp.json", [
        service("drysctp", [("assoc", 9000, "SCTP", 9000)], ["10.96.3.2"]),
        endpoint_slice("drysctp", [a], [("assoc", 9001, "SCTP")]),
        service("drynoeps", [("http", 80, "TCP", 80)], ["10.96.3.3"]),
    ])


def test_dry_run_prints_a_ruleset_that_loads_into_an_empty_namespace(lab):
    write_dry_manifests(lab)
    # Run inside a namespace of our own only so that a buggy --dry-run cannot touch the host;
    # it must leave that namespace's (empty) ruleset alone.
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + BASE, ns=lab.node,
           check=False, timeout=30)
    assert p.returncode == 0, f"--dry-run exit {p.returncode}\nstderr:\n{p.stderr[-3000:]}"
    assert lab.nft("list", "ruleset").strip() == "", "--dry-run changed the kernel ruleset"
    out = p.stdout
    assert "table ip kube-proxy" in out and "table ip6 kube-proxy" in out, out[:2000]

    fresh = lab.add_pod("fresh").ns  # a brand-new namespace with an empty ruleset
    assert lab.nft("list", "ruleset", ns=fresh).strip() == ""
    path = os.path.join(lab.tmp, "dry-run.nft")
    with open(path, "w") as f:
        f.write(out)
    load = sh(["nft", "-f", path], ns=fresh, check=False)
    assert load.returncode == 0, f"nft -f of the --dry-run output failed:\n{load.stderr[-3000:]}"

    v4 = sh(["nft", "list", "table", "ip", "kube-proxy"], ns=fresh).stdout
    v6 = sh(["nft", "list", "table", "ip6", "kube-proxy"], ns=fresh).stdout
    # Shared dispatch: the services are elements (with their comments) of the shared maps.
    assert '10.96.3.1 . 80 . 0 comment "default/dryweb:http"' in v4, v4
    assert '10.96.3.2 . 9000 . 0 comment "default/drysctp:assoc"' in v4, v4
    assert 'fd00:10:96::3:1 . 53 . 0 comment "default/dryweb:dns"' in v6, v6
    assert not any("dryweb" in c for c in chain_names(v4) | chain_names(v6)), "a chain per service"
    for ip in ("10.96.3.1", "10.96.3.2", "10.96.3.3"):
        assert ip in v4, f"{ip} missing from the loaded table"
    assert "fd00:10:96::3:1" in v6
    print(sorted(chain_names(v4)))


def test_dry_run_output_has_the_chains_the_daemon_installs(lab):
    write_dry_manifests(lab)
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + BASE, check=False,
           ns=lab.node, timeout=30)
    assert p.returncode == 0, p.stderr[-3000:]
    fresh = lab.add_pod("fresh").ns
    sh(["nft", "-f", "-"], ns=fresh, input=p.stdout)
    lab.start_daemon()
    for fam in ("ip", "ip6"):
        dry = chain_names(sh(["nft", "list", "table", fam, "kube-proxy"], ns=fresh).stdout)
        live = chain_names(lab.table(fam))
        assert dry == live, f"{fam}: only in --dry-run {sorted(dry - live)}, only live {sorted(live - dry)}"


def test_cleanup_removes_both_tables_and_succeeds_when_they_are_absent(lab):
    sh(["nft", "-f", "-"], ns=lab.node, input="""
table ip kube-proxy {
  chain services {
  }
}
table ip6 kube-proxy {
  set cluster-ips {
    type ipv6_addr
    elements = { fd00:10:96::1 }
  }
}
table ip unrelated {
  chain keepme {
  }
}
""")
    p = sh([netlab.BIN, "--cleanup"], ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0, f"--cleanup exit {p.returncode}: {p.stderr[-2000:]}"
    tables = lab.nft("list", "tables")
    assert "kube-proxy" not in tables, tables
    assert "table ip unrelated" in tables, "--cleanup removed a table that is not its own"
    p = sh([netlab.BIN, "--cleanup"], ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0, f"--cleanup with nothing to clean: exit {p.returncode}: {p.stderr[-2000:]}"
    # also after a real daemon run
    write_dry_manifests(lab)
    d = lab.start_daemon()
    d.stop()
    assert "kube-proxy" in lab.nft("list", "tables")
    p = sh([netlab.BIN, "--cleanup"], ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0 and "kube-proxy" not in lab.nft("list", "tables"), p.stderr[-2000:]


def test_missing_source_flag_exits_2_with_one_line_naming_manifests(lab):
    p = sh([netlab.BIN] + BASE, ns=lab.node, check=False, timeout=15)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    print(repr(p.stderr))
    assert p.returncode == 2, f"exit {p.returncode}, stderr: {p.stderr[-2000:]}"
    assert len(lines) == 1 and "--manifests" in lines[0], f"want one line naming --manifests: {lines}"
    assert lab.nft("list", "ruleset").strip() == "", "a refused start must not touch nftables"


def test_maximal_names_serve_traffic_and_every_ruleset_text_loads_with_nft_f(lab):
    """Issue 11 defects 1 and 3: a 63-character namespace, name and port name (a DNS-1123 label
    port name, longer than the 15 of an IANA name) is served, and the comments it makes stay within
    nft's 128 bytes: the --dry-run output and an operator's `nft list ruleset > f; nft -f f` load."""
    ns, name = "n" * 63, "s" * 63
    ports = [("p" * 63, 80, "TCP", 8080), ("p" * 62 + "q", 81, "TCP", 8080), ("http-metrics-port", 82, "TCP", 8080)]
    pod = lab.add_pod("client")
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("max.yaml", [
        service(name, ports, ["10.96.4.1"], namespace=ns, type="LoadBalancer",
                lb_ingress=["192.0.2.41"], source_ranges=["10.0.0.0/8"]),
        endpoint_slice(name, [ep.v4], [(p[0], 8080, "TCP") for p in ports], namespace=ns),
    ])
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + BASE, ns=lab.node,
           check=False, timeout=30)
    assert p.returncode == 0, p.stderr[-3000:]
    assert ns + "/" + name + ":" + "p" * 63 not in p.stdout  # 191 bytes: shortened
    dry_ns = lab.add_pod("dry").ns
    load = sh(["nft", "-f", "-"], ns=dry_ns, input=p.stdout, check=False)
    assert load.returncode == 0, f"nft -f of the --dry-run output failed:\n{load.stderr[-3000:]}"

    lab.start_daemon()
    cli = lab.agent(pod)
    for port in (80, 81, 82):
        netlab.expect_answers(cli, "10.96.4.1", port, {ep.v4}, {pod.v4}, n=2, what=f"port {port}")
    saved = os.path.join(lab.tmp, "saved.nft")
    with open(saved, "w") as f:
        f.write(lab.nft("list", "ruleset"))
    fresh = lab.add_pod("fresh").ns
    load = sh(["nft", "-f", saved], ns=fresh, check=False)
    assert load.returncode == 0, f"nft -f of `nft list ruleset` failed:\n{load.stderr[-3000:]}"
    comments = re.findall(r'comment "([^"]*)"', sh(["nft", "list", "ruleset"], ns=fresh).stdout)
    assert comments and max(len(c) for c in comments) <= 128, comments
    assert len({c for c in comments if c.startswith(ns)}) >= 4, comments

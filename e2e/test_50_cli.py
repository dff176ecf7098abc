"""The command line contract: --dry-run, --cleanup, missing source flag, upstream's flags accepted,
bad values refused naming them, --help and --version."""
import os
import re
import subprocess

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
    # What it removed, at the default verbosity.
    assert "cleanup: deleted table ip kube-proxy (1 chains, 0 sets and maps)" in p.stderr, p.stderr
    assert "cleanup: deleted table ip6 kube-proxy (0 chains, 1 sets and maps)" in p.stderr, p.stderr
    assert "cleanup: none of upstream kube-proxy's iptables-mode chains found" in p.stderr, p.stderr
    p = sh([netlab.BIN, "--cleanup"], ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0, f"--cleanup with nothing to clean: exit {p.returncode}: {p.stderr[-2000:]}"
    assert "cleanup: no table ip kube-proxy" in p.stderr and "cleanup: no table ip6 kube-proxy" in p.stderr, p.stderr
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


# Upstream kube-proxy's flags that kube-proxy-nft used to refuse (exit 1, a crash-looping pod):
# component-base's logging flags, klog's own (the kube-proxy reference still lists them), verflag's
# and cobra's, cadvisor's two. Each with a value upstream takes.
UPSTREAM_FLAGS = [
    ["--logging-format=text"], ["--logging-format=json"], ["--log-flush-frequency=1s"], ["-v", "3"],
    ["--vmodule=loop=3"], ["--log-json-split-stream=false"], ["--log-json-info-buffer-size=64Ki"],
    ["--log-text-split-stream=false"], ["--log-text-info-buffer-size=0"], ["--one-output"], ["--skip-headers"],
    ["--skip-log-headers"], ["--add-dir-header"], ["--log-file=/dev/null"], ["--log_file=/dev/null"],
    ["--log-dir=/tmp"], ["--log-file-max-size=100"], ["--alsologtostderr"], ["--stderrthreshold=INFO"],
    ["--log-backtrace-at=nowhere.cc:1"], ["--boot-id-file=/proc/sys/kernel/random/boot_id"],
    ["--machine-id-file=/etc/machine-id"], ["--feature-gates=LoggingAlphaOptions=true"],
]


def test_every_upstream_flag_is_accepted(lab):
    write_dry_manifests(lab)
    for flags in UPSTREAM_FLAGS:
        p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + BASE + flags, ns=lab.node,
               check=False, timeout=30)
        assert p.returncode == 0, f"{flags}: exit {p.returncode}: {p.stderr[-1000:]}"
        assert "table ip kube-proxy" in p.stdout, flags


@pytest.mark.parametrize("flags,named", [
    (["--logging-format=xml"], 'logging.format: "xml"'),
    (["--log-flush-frequency=soon"], "--log-flush-frequency"),
    (["--logging-format=json", "--log-file=/tmp/x"], "--log-file"),
    (["--version=maybe"], "--version"),
    (["--log-xml"], "--log-xml"),
])
def test_a_bad_flag_or_value_exits_2_with_one_line_naming_it(lab, flags, named):
    write_dry_manifests(lab)
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + flags, ns=lab.node, check=False,
           timeout=30)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 1 and named in lines[0], (p.returncode, lines)
    assert p.stdout == ""


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_exits_0_with_our_dashed_flags_and_subcommands_and_no_library_internals(flag):
    p = subprocess.run([netlab.BIN, flag], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for want in ("--metrics-bind-address IP:port", "--nodeport-addresses", "--logging-format", "--log-file",
                 "-h, --help", "kube-proxy-nft trace [flags]", "--cleanup", "--kubeconfig"):
        assert want in out, want
    # What gflags' --help showed: glog's and gflags' flags, underscored names, source paths.
    for internal in ("metrics_bind_address", "-minloglevel", "-logbuflevel", "-flagfile", "-helpxml",
                     "Flags from", "flags.cc", "/build/", "gflags"):
        assert internal not in out, internal
    assert max(len(l) for l in out.splitlines()) <= 100
    trace = subprocess.run([netlab.BIN, "trace", "--help"], capture_output=True, text=True, timeout=10)
    assert trace.returncode == 0 and "--from=pod|node|external" in trace.stdout, trace


def test_version_raw_prints_every_field_as_upstream_and_exits_0():
    p = subprocess.run([netlab.BIN, "--version=raw"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r'version\.Info\{Major:"\d+", Minor:"\d+", GitVersion:"v[^"]+", GitCommit:"(?:[0-9a-f]{12}|unknown)", '
                        r'Compiler:"gcc [^"]+", Platform:"linux/\w+"\}\n', p.stdout), p.stdout


def test_a_bad_nodeport_address_is_refused_naming_it_never_replaced_by_primary(lab):
    """Before: `--nodeport-addresses=10.0.0.0/33` logged a warning, skipped the entry and served
    NodePorts on the primary address instead, exit 0. Upstream refuses it, as --config does."""
    write_dry_manifests(lab)
    for args in (["--nodeport-addresses=10.0.0.0/33"], ["--nodeport-addresses=10.0.0.0/8,bogus"]):
        p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + BASE + args, ns=lab.node,
               check=False, timeout=30)
        lines = p.stderr.splitlines()
        assert p.returncode == 2 and len(lines) == 1, (args, p.returncode, lines)
        assert "--nodeport-addresses" in lines[0] and ("10.0.0.0/33" in lines[0] or "bogus" in lines[0]), lines
    cfg = os.path.join(lab.tmp, "bad-nodeport.yaml")
    with open(cfg, "w") as f:
        f.write("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                "nodePortAddresses: [10.0.0.0/33]\n")
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run", f"--config={cfg}"], ns=lab.node,
           check=False, timeout=30)
    assert p.returncode == 2 and 'nodePortAddresses[0]: "10.0.0.0/33"' in p.stderr, p.stderr

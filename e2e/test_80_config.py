"""--config with a KubeProxyConfiguration (the issue's ConfigMap, verbatim), upstream's flags beside
it, --write-config-to, --version, bad configurations, the start-up kernel probe and the conntrack
sysctls it sets in the node's network namespace."""
import os
import re
import subprocess

import pytest

import netlab
from apiserver_lab import ApiServer
from netlab import NODE_NAME, endpoint_slice, expect_answers, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

# The issue's ConfigMap (a typical kubeadm/tutorial one), verbatim.
ISSUE_CONFIGMAP = """apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: "ipvs"
clusterCIDR: "10.244.0.0/16"
ipvs:
  scheduler: "rr"
  excludeCIDRs: ["10.96.0.10/32"]
conntrack:
  maxPerCore: 32768
metricsBindAddress: "0.0.0.0:10249"
"""

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def write(lab, name, text):
    path = os.path.join(lab.tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def netfilter_sysctl(lab, name):
    return int(sh(["cat", f"/proc/sys/net/netfilter/{name}"], ns=lab.node).stdout)


def config_daemon(lab, config_path, extra=(), manifests=False):
    """The daemon as a DaemonSet runs it: --config plus --hostname-override (netlab adds that one,
    and --cluster-cidr and --v, which --config makes it ignore except --v)."""
    return lab.daemon([f"--config={config_path}", *extra], sync_flags=(), manifests=manifests)


def test_issue_configmap_verbatim_with_hostname_override_serves_traffic(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object(), service("web", HTTP, ["10.96.0.20"]), endpoint_slice("web", [a.v4], HTTP_SLICE)])
    kubeconfig = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"), token_file=True)
    # Upstream ignores --kubeconfig beside --config (the file replaces every flag that maps to a
    # field; only --hostname-override and the logging flags survive), and the issue's ConfigMap has
    # no clientConnection.kubeconfig: so this copy adds that one field, as a DaemonSet's ConfigMap
    # does (deploy/configmap.yaml), and is otherwise the ConfigMap verbatim.
    path = write(lab, "config.conf", ISSUE_CONFIGMAP + f"clientConnection:\n  kubeconfig: {kubeconfig}\n")
    d = config_daemon(lab, path, extra=[f"--kubeconfig={kubeconfig}"])
    # Started by the name kubeadm's DaemonSet uses (the image links /usr/local/bin/kube-proxy to
    # the binary), so swapping only the image is enough.
    kube_proxy = os.path.join(lab.tmp, "kube-proxy")
    os.symlink(netlab.BIN, kube_proxy)
    d.args[0] = kube_proxy
    d.start().wait_syncs(1, timeout=30)
    expect_answers(lab.agent(client), "10.96.0.20", 80, [a.v4], [client.v4], what="ClusterIP under --config")

    err = d.stderr()
    assert err.count('mode: "ipvs" is not implemented by kube-proxy-nft; running in nftables mode') == 1, d.tail()
    assert 'ipvs.scheduler: "rr": new connections are balanced round-robin' in err and "ipvs.excludeCIDRs: [10.96.0.10/32] accepted" in err, d.tail()
    # Upstream's precedence, said out loud: what --config made it ignore.
    m = re.search(r"ignored because --config is given \(upstream's rule; set the fields in the file\): (.*)", err)
    assert m and set(m.group(1).split(", ")) == {"--cluster-cidr", "--kubeconfig"}, d.tail()
    # conntrack.maxPerCore from the file: nf_conntrack_max is read-only outside the initial network
    # namespace, so that is a warning and the daemon runs on; the timeouts are per namespace and set.
    assert re.search(r"cannot set net\.netfilter\.nf_conntrack_max to \d+ \(Permission denied\)", err), d.tail()
    assert netfilter_sysctl(lab, "nf_conntrack_tcp_timeout_established") == 86400
    assert netfilter_sysctl(lab, "nf_conntrack_tcp_timeout_close_wait") == 3600
    # The probe's scratch tables are gone; ours are there.
    tables = lab.nft("list", "tables")
    assert "probe" not in tables and "table ip kube-proxy" in tables, tables
    assert d.alive()


def test_a_written_config_file_ends_the_daemon_with_exit_1_as_upstream(lab):
    lab.manifests.write("node.yaml", node_object())
    header = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
    path = write(lab, "watched.conf", header)
    d = config_daemon(lab, path, manifests=True).start()
    d.wait_syncs(1, timeout=30)
    with open(path, "a") as f:
        f.write("mode: nftables\n")
    assert d.proc.wait(timeout=20) == 1, d.tail()
    assert "content of the configuration file was updated (written)" in d.stderr(), d.tail()
    assert "table ip kube-proxy" in lab.nft("list", "tables"), "the ruleset stays in place"


def test_flags_without_config_set_conntrack_sysctls_and_oom_score_in_the_namespace(lab):
    lab.manifests.write("node.yaml", node_object())
    before = netfilter_sysctl(lab, "nf_conntrack_tcp_be_liberal")
    assert before == 0
    d = lab.start_daemon(["--conntrack-tcp-be-liberal", "--conntrack-udp-timeout=45s",
                          "--conntrack-udp-timeout-stream=150s", "--conntrack-tcp-timeout-established=2h",
                          "--conntrack-tcp-timeout-close-wait=0s", "--oom-score-adj=500"])
    assert netfilter_sysctl(lab, "nf_conntrack_tcp_be_liberal") == 1
    assert netfilter_sysctl(lab, "nf_conntrack_udp_timeout") == 45
    assert netfilter_sysctl(lab, "nf_conntrack_udp_timeout_stream") == 150
    assert netfilter_sysctl(lab, "nf_conntrack_tcp_timeout_established") == 7200
    assert netfilter_sysctl(lab, "nf_conntrack_tcp_timeout_close_wait") == 60  # 0s: left as it was
    # Raising one's OOM score needs no privilege (lowering to upstream's -999 needs
    # CAP_SYS_RESOURCE: a warning where it is missing).
    with open(f"/proc/{d.proc.pid}/oom_score_adj") as f:
        assert int(f.read()) == 500
    assert d.alive()


def test_init_only_applies_the_start_up_steps_and_exits_without_a_source(lab):
    p = sh([netlab.BIN, "--init-only", "--conntrack-udp-timeout=33s"], ns=lab.node, check=False, timeout=30)
    assert p.returncode == 0, p.stderr
    assert netfilter_sysctl(lab, "nf_conntrack_udp_timeout") == 33
    assert lab.nft("list", "tables").strip() == "", "--init-only must not sync"


@pytest.mark.parametrize("body,field", [
    ("conntrack:\n  maxPerCore: 32768\n  max: 5\n", 'unknown field "conntrack.max"'),
    ("conntrack:\n  maxPerCore: lots\n", 'conntrack.maxPerCore: want an integer, got string "lots"'),
    ("nftables:\n  syncPeriod: 30\n", "nftables.syncPeriod: want a duration string"),
    ("mode: kernelspace\n", 'mode: "kernelspace": must be nftables, iptables, ipvs or empty'),
    ("metricsBindAddress: localhost:10249\n", 'metricsBindAddress: "localhost:10249": must be IP:port'),
])
def test_bad_config_exits_2_with_one_line_naming_the_field(lab, body, field):
    header = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
    path = write(lab, "bad.conf", header + body)
    p = sh([netlab.BIN, f"--config={path}", f"--hostname-override={NODE_NAME}", "--manifests=/nonexistent"],
           ns=lab.node, check=False, timeout=15)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 2, f"exit {p.returncode}: {p.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith(f"--config={path}: ") and field in lines[0], lines
    assert lab.nft("list", "ruleset").strip() == "", "a refused start must not touch nftables"


def test_unreadable_config_exits_2_naming_the_file(lab):
    path = os.path.join(lab.tmp, "absent.conf")
    p = sh([netlab.BIN, f"--config={path}"], ns=lab.node, check=False, timeout=15)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == f"--config={path}: cannot read: No such file or directory", p.stderr


def test_write_config_to_round_trips(lab):
    first = os.path.join(lab.tmp, "written.yaml")
    flags = ["--proxy-mode=ipvs", "--ipvs-scheduler=rr", "--cluster-cidr=10.244.0.0/16,fd00:10:244::/48",
             "--conntrack-max-per-core=0", "--conntrack-udp-timeout=1m30s", "--kube-api-qps=7.5",
             "--metrics-bind-address=0.0.0.0:10249", "--hostname-override=Node-A", "--min-sync-period=2s",
             "--nodeport-addresses=10.0.0.0/8", "--feature-gates=Foo=true", "--v=3"]
    p = sh([netlab.BIN, f"--write-config-to={first}", *flags], check=False, timeout=15)
    assert p.returncode == 0, p.stderr
    text = open(first).read()
    for line in ['mode: "ipvs"', 'clusterCIDR: "10.244.0.0/16,fd00:10:244::/48"', "maxPerCore: 0",
                 'udpTimeout: "1m30s"', "qps: 7.5", 'hostnameOverride: "node-a"', 'minSyncPeriod: "2s"',
                 'nodePortAddresses: ["10.0.0.0/8"]', "Foo: true", "verbosity: 3",
                 'apiVersion: "kubeproxy.config.k8s.io/v1alpha1"', 'kind: "KubeProxyConfiguration"']:
        assert line in text, f"{line!r} not in:\n{text}"
    # Read back and written again: the same configuration, byte for byte.
    second = os.path.join(lab.tmp, "rewritten.yaml")
    p = sh([netlab.BIN, f"--config={first}", f"--write-config-to={second}"], check=False, timeout=15)
    assert p.returncode == 0, p.stderr
    assert open(second).read() == text


def test_version_names_the_release_and_a_commit_of_this_repository():
    p = subprocess.run([netlab.BIN, "--version"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    m = re.fullmatch(r"kube-proxy-nft version (\S+) \(commit ([0-9a-f]{12}|unknown)\)\n", p.stdout)
    assert m, p.stdout
    if m.group(2) != "unknown":
        known = subprocess.run(["git", "-C", netlab.REPO, "cat-file", "-e", m.group(2) + "^{commit}"])
        assert known.returncode == 0, f"commit {m.group(2)} is not in {netlab.REPO}"


def test_probe_names_a_missing_requirement_on_one_line_and_exits_1_leaving_nothing(lab):
    lab.manifests.write("node.yaml", node_object())
    d = lab.daemon(["--probe-fake-requirement=frobnicate"]).start()
    d.proc.wait(timeout=30)
    assert d.proc.returncode == 1, d.tail()
    lines = [l for l in d.stderr().splitlines() if "start-up probe" in l]
    assert lines == [l for l in lines if l.startswith("start-up probe: the kernel lacks what the ruleset needs: "
                                                      "frobnicate (test only: no kernel has it)")] and len(lines) == 1, d.tail()
    assert "Unknown statement object 'frobnicate'" in lines[0], lines
    # Before the first sync and in a transaction of its own: no table at all is left behind.
    assert lab.nft("list", "tables").strip() == "", lab.nft("list", "tables")

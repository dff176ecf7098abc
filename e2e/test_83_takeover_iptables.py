"""Taking over from upstream kube-proxy in iptables mode (iptables-nft backend), and the way back.

Upstream's chains are loaded with iptables-nft-restore (e2e/upstream_iptables.py: statistic-mode
random, comments, the 0x4000 masquerade mark), next to the kubelet's chains and a user's chain and
rules. Our daemon starts under a NEW TCP connection every 20 ms per family and a long-lived
connection per family: nothing may fail, upstream's chains and the jumps to them go, every other
line of `iptables-nft-save` stays exactly as it was. `--cleanup` removes our tables and upstream's
leftovers; iptables-legacy is reported, never touched."""
import os
import re

import pytest

import netlab
import upstream_iptables
import upstream_nft
from netlab import sh
from takeover_lab import NODE_PORT, V4, V6, assert_serves, outside, take_over, write_manifests

pytestmark = pytest.mark.usefixtures("daemon_bin")

BASE = [f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}", "--v=2",
        "--logtostderr"]


def load_upstream_iptables(lab, eps):
    for fam, tool in ((V4, "iptables-nft-restore"), (V6, "ip6tables-nft-restore")):
        addr = fam["addr"]
        svcs = [upstream_iptables.Svc("web", fam["web"], 80, [(addr(p), 8080) for p in eps], node_port=NODE_PORT),
                upstream_iptables.Svc("web", fam["web"], 7000, [(addr(p), 7070) for p in eps], port_name="chat"),
                upstream_iptables.Svc("none", fam["none"], 80, [])]
        text = upstream_iptables.restore_file(fam is V6, svcs, fam["cidr"])
        with open(os.path.join(lab.tmp, f"upstream-iptables-{fam['family']}.rules"), "w") as f:
            f.write(text)
        sh([tool, "--noflush"], ns=lab.node, input=text)


def saved(lab, family):
    """`iptables-nft-save` lines without comments and counters: [(table, line)]."""
    tool = "iptables-nft-save" if family == "ip" else "ip6tables-nft-save"
    out, table = [], None
    for line in sh([tool], ns=lab.node).stdout.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("*"):
            table = line[1:]
        out.append((table, re.sub(r"\[\d+:\d+\]", "", line)))
    return out


def chains_of(lines):
    return {(t, l[1:].split()[0]) for t, l in lines if l.startswith(":")}


def mentions_upstream(line):
    return any(upstream_iptables.upstream_chain(w) for w in re.split(r"[\s:]+", line))


def assert_only_upstreams_removed(before, after, what):
    left = [c for t, c in chains_of(after) if upstream_iptables.upstream_chain(c)]
    # Upstream's own clean-up leaves KUBE-MARK-MASQ to a rule that is not its own (the CNI's); we
    # used to delete that rule along with upstream's jumps.
    assert left == ["KUBE-MARK-MASQ"], f"{what}: upstream's iptables chains left: {sorted(left)}"
    kept = [(t, l) for t, l in before
            if not mentions_upstream(l) or upstream_iptables.CNI_COMMENT in l or upstream_iptables.kept_for_the_cni(t, l)]
    assert after == kept, f"{what}: the rest of iptables-nft-save changed:\n" + "\n".join(
        [f"- {x}" for x in kept if x not in after] + [f"+ {x}" for x in after if x not in kept])
    for table, chains in upstream_iptables.KUBELET_CHAINS.items():
        for c in chains:
            assert (table, c) in chains_of(after), f"{what}: the kubelet's {table} {c} is gone"
    assert ("filter", upstream_iptables.USER_CHAIN) in chains_of(after)
    assert sum(upstream_iptables.USER_COMMENT in l for _, l in after) == 2, \
        f"{what}: the user's rules (filter jump, nat MASQUERADE) are not both there"
    cni = [l for t, l in after if t == "nat" and upstream_iptables.CNI_COMMENT in l]
    assert len(cni) == 2 and any("-j KUBE-MARK-MASQ" in l for l in cni), f"{what}: the CNI's rules: {cni}"


def test_takeover_from_upstream_iptables_mode_drops_nothing_and_removes_only_upstreams_chains(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(2, tcp=[8080], udp=[], stream=[7070], name="web")
    write_manifests(lab, eps)
    load_upstream_iptables(lab, eps)
    before = {f: saved(lab, f) for f in ("ip", "ip6")}
    assert any("statistic" in l or "random" in l for _, l in before["ip"]), before["ip"]
    assert {c.split("-")[1] for _, c in chains_of(before["ip"]) if c.startswith("KUBE-")} >= {"SVC", "SEP", "EXT"}
    probe, ext = lab.agent(client), outside(lab)
    assert_serves(probe, client, eps, "upstream iptables mode before the takeover", ext)

    d = take_over(lab, client, eps, wait_log="removed upstream kube-proxy's iptables leftovers")
    print([l for l in d.stderr().splitlines() if "iptables" in l])
    for f in ("ip", "ip6"):
        assert_only_upstreams_removed(before[f], saved(lab, f), f"{f} after the takeover")
    assert_serves(probe, client, eps, "our daemon after the takeover", ext)


def test_cleanup_iptables_false_keeps_them_and_cleanup_removes_ours_and_upstreams(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(1, tcp=[8080], udp=[], name="web")
    write_manifests(lab, eps)
    load_upstream_iptables(lab, eps)
    # iptables-legacy: invisible to nftables, reported, left alone
    sh(["iptables-legacy", "-t", "nat", "-N", "KUBE-SERVICES"], ns=lab.node)
    before = {f: saved(lab, f) for f in ("ip", "ip6")}
    d = lab.start_daemon(["--cleanup-iptables=false"])
    d.settle()
    assert {f: saved(lab, f) for f in ("ip", "ip6")} == before, "--cleanup-iptables=false touched iptables"
    assert "iptables leftovers" not in d.stderr()
    ext = outside(lab)
    assert_serves(lab.agent(client), client, eps, "both proxies' rules in place", ext)
    d.stop()

    p = sh([netlab.BIN, "--cleanup"] + BASE, ns=lab.node, check=False)
    print(p.stderr)
    assert p.returncode == 0, p.stderr
    assert lab.table("ip") == "" and lab.table("ip6") == "", "--cleanup left a table of ours"
    for f in ("ip", "ip6"):
        assert_only_upstreams_removed(before[f], saved(lab, f), f"{f} after --cleanup")
    assert "(iptables-legacy: nat)" in p.stderr, "iptables-legacy was not reported"
    legacy = sh(["iptables-legacy-save", "-t", "nat"], ns=lab.node).stdout
    assert ":KUBE-SERVICES" in legacy, f"--cleanup touched iptables-legacy:\n{legacy}"
    # Nothing of any proxy answers now; upstream's nftables table loads cleanly again.
    probe = lab.agent(client)
    r = probe.tcp(V4["web"], 80, timeout=0.5)
    assert r.startswith("ERR:"), f"after --cleanup something still serves {V4['web']}: {r}"
    for fam in (V4, V6):
        addr = fam["addr"]
        svcs = [upstream_nft.Svc("web", fam["web"], 80, [(addr(p), 8080) for p in eps], node_port=NODE_PORT),
                upstream_nft.Svc("none", fam["none"], 80, [])]
        sh(["nft", "-f", "-"], ns=lab.node, input=upstream_nft.script(
            fam["family"], "v1.36", svcs, fam["cidr"], fam["service_cidr"], fam["node"]))
    assert_serves(probe, client, eps, "upstream's nftables table loaded after --cleanup", ext)

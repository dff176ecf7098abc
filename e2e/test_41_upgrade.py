"""Upgrade: a daemon of this version started on a node whose table an earlier layout wrote takes
it over in one transaction, with zero failed connections under the 20 ms loop, and ends with
exactly the table it would have written on an empty node. The earlier layouts:
  - chain-per-service.nft: a chain per Service port over sharded backends maps (main before issue 9);
  - shared-dispatch-goto.nft: the shared dispatch whose verdict map sent every destination to a
    `pick-<proto>-<N>` chain (main at a526f49, before the count sets of pick_chains.h);
  - slot-walk.nft: the shared pick chain that walked the slots, one rule per count 1..16 (main at
    7a3d4a5, before the search over the count of pick_chains.h);
  - slot-search.nft: the search over the slots whose probes keyed `tcp dport` (with its `meta
    l4proto` test in every probe), before they keyed `th dport` (main at 8798376);
  - numgen-probes.nft: the same search whose probes spelled their slot `numgen random mod 1 offset
    N` (a random draw per probe), before `meta length & N | N` (main at 4ce866d);
  - firewall-chains.nft: loadBalancerSourceRanges as a `firewall-<ns>/<name>` chain per service
    behind the verdict map @firewall-ips (main at 8f0bc76, before the @firewall-allow interval set).

Each old table is a fixture: what that binary printed with --dry-run for the manifests below (pod
addresses are deterministic in the lab). To write one again from its binary:
    python3 e2e/test_41_upgrade.py /path/to/old/kube-proxy-nft > e2e/fixtures/<name>.nft
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import pytest

import netlab
from netlab import endpoint_slice, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# fixture -> what shows that the old layout is loaded
OLD_LAYOUTS = {
    "chain-per-service.nft": ["chain service-default/steady/tcp/http", "map backends-tcp-"],
    "shared-dispatch-goto.nft": ["chain pick-tcp-2 {", ' : goto pick-tcp-2,'],
    "slot-walk.nft": ["chain pick-tcp {", "offset 16 != @backends-tcp"],
    "slot-search.nft": ["chain cluster-ip-services {", "ip daddr . tcp dport . numgen random mod 1 offset 1 != @backends-tcp"],
    "numgen-probes.nft": ["chain cluster-ip-services {", "ip daddr . th dport . numgen random mod 1 offset 1 != @backends-tcp"],
    "firewall-chains.nft": ["chain firewall-default/fw {", ": goto firewall-default/fw"],
}
CLIENT, EP1, EP2, EP3 = "10.244.0.11", "10.244.0.12", "10.244.0.13", "10.244.0.14"
REMOTE_EP = "10.244.1.5"  # on another node
HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]
DRY_FLAGS = [f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}",
             "--v=1", "--logtostderr"]


def upgrade_manifests():
    """filename -> objects: ClusterIP (both families), NodePort, an eTP=Local LoadBalancer with a
    remote endpoint, a LoadBalancer with source ranges, UDP, and a service without endpoints."""
    return {
        "node.yaml": node_object(),
        "steady.yaml": [service("steady", HTTP, ["10.96.1.10", "fd00:10:96::1:10"]),
                        endpoint_slice("steady", [EP1, EP2], HTTP_SLICE),
                        endpoint_slice("steady", ["fd00:10:244::12"], HTTP_SLICE, address_type="IPv6")],
        "web.yaml": [service("web", [("http", 80, "TCP", 8080, 30080)], ["10.96.1.11"], type="NodePort"),
                     endpoint_slice("web", [EP1, EP2, EP3], HTTP_SLICE)],
        "shop.yaml": [service("shop", [("http", 80, "TCP", 8080, 30081)], ["10.96.1.12"], type="LoadBalancer",
                              lb_ingress=["198.51.100.12"], etp="Local"),
                      endpoint_slice("shop", [EP3, {"ip": REMOTE_EP, "node": "node2"}], HTTP_SLICE)],
        "fw.yaml": [service("fw", [("http", 80, "TCP", 8080, 30082)], ["10.96.1.15"], type="LoadBalancer",
                            lb_ingress=["198.51.100.15"], source_ranges=["203.0.113.0/25", "192.168.100.0/24"]),
                    endpoint_slice("fw", [EP2], HTTP_SLICE)],
        "dns.yaml": [service("dns", [("dns", 53, "UDP", 5353)], ["10.96.1.13"]),
                     endpoint_slice("dns", [EP1], [("dns", 5353, "UDP")])],
        "noeps.yaml": service("noeps", HTTP, ["10.96.1.14"]),
    }


def listing(text_ns):
    """The table as comparable values: chains -> rule expressions, sets -> elements."""
    out = {}
    for fam in ("ip", "ip6"):
        data = json.loads(sh(["nft", "-j", "list", "table", fam, "kube-proxy"], ns=text_ns).stdout)
        for item in data["nftables"]:
            for kind in ("chain", "rule", "set", "map"):
                if kind not in item:
                    continue
                o = item[kind]
                if kind == "chain":
                    out.setdefault((fam, "chain", o["name"]), [])
                elif kind == "rule":
                    out.setdefault((fam, "chain", o["chain"]), []).append(
                        json.dumps([o["expr"], o.get("comment")], sort_keys=True))
                else:
                    out[(fam, kind, o["name"])] = sorted(json.dumps(e, sort_keys=True) for e in o.get("elem", []))
    return out


@pytest.mark.parametrize("fixture", sorted(OLD_LAYOUTS))
def test_an_earlier_layouts_table_is_taken_over_in_one_transaction_without_a_failed_connection(lab, fixture):
    client = lab.add_pod("client")
    lab.add_backends(3, tcp=[8080], udp=[5353])
    assert client.v4 == CLIENT
    for name, objs in upgrade_manifests().items():
        lab.manifests.write(name, objs)
    # The node as the previous daemon left it.
    load = sh(["nft", "-f", os.path.join(FIXTURES, fixture)], ns=lab.node, check=False)
    assert load.returncode == 0, load.stderr[-2000:]
    old = lab.table("ip")
    assert all(marker in old for marker in OLD_LAYOUTS[fixture]), old[:3000]
    cli = lab.agent(client)
    assert cli.tcp("10.96.1.10", 80).split()[0] in (EP1, EP2), "the old table does not serve"

    t0 = time.monotonic()
    cli.loop_start("10.96.1.10", 80)
    try:
        time.sleep(0.5)
        d = lab.start_daemon()
        time.sleep(1.0)
    finally:
        st = cli.loop_stop()
    elapsed = time.monotonic() - t0
    print(f"20 ms loop: {st['attempts']} attempts, failures {st['failures'][:10]}, takeover: {d.syncs()[0]}")
    assert st["failures"] == [], f"{len(st['failures'])} connections failed during the takeover: {st['failures'][:20]}"
    assert st["attempts"] >= int(elapsed / 0.02 * 0.5), f"loop too slow: {st['attempts']} attempts"
    assert set(st["answers"]) == {EP1, EP2}
    first = d.syncs()[0]
    assert first["ops"] > 0 and not d.failed_syncs(), (first, d.failed_syncs())

    # Exactly the new layout: what this version writes on an empty node.
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run"] + DRY_FLAGS, ns=lab.node,
           check=False, timeout=30)
    assert p.returncode == 0, p.stderr[-3000:]
    fresh = lab.add_pod("fresh").ns
    sh(["nft", "-f", "-"], ns=fresh, input=p.stdout)
    want, got = listing(fresh), listing(lab.node)
    assert got == want, "after the takeover the table differs from a fresh one:\n" + "\n".join(
        f"{k}: kernel {got.get(k)} / fresh {want.get(k)}" for k in sorted(set(got) | set(want))
        if got.get(k) != want.get(k))
    assert not any("/" in k[2] or re.fullmatch(r"backends-\w+-\d+", k[2]) for k in got), sorted(got)

    # Every path still behaves, and a restart now changes nothing.
    assert set(netlab.answers(cli.many("tcp", "10.96.1.11", 80, 20))[0]) == {EP1, EP2, EP3}
    assert cli.tcp(netlab.NODE_V4, 30080).split()[0] in (EP1, EP2, EP3)
    assert cli.tcp("10.96.1.14", 80) == "ERR:ECONNREFUSED"
    d.stop()
    d = lab.start_daemon(label="restarted")
    assert d.syncs()[0]["ops"] == 0, f"a restart after the takeover changed the ruleset: {d.syncs()[0]}"


if __name__ == "__main__":
    # Regenerate the fixture from the previous binary (see the module docstring).
    with tempfile.TemporaryDirectory() as tmp:
        m = netlab.Manifests(tmp)
        for name, objs in upgrade_manifests().items():
            m.write(name, objs)
        sys.stdout.write(subprocess.run([sys.argv[1], f"--manifests={tmp}", "--dry-run"] + DRY_FLAGS,
                                        check=True, capture_output=True, text=True).stdout)

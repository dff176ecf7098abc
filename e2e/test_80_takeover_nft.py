"""Taking over a node from upstream kube-proxy in nftables mode: upstream's tables `ip/ip6
kube-proxy` (each layout of e2e/upstream_nft.py) serve the services, then our daemon starts under
a NEW TCP connection every 20 ms per family and one long-lived connection per family exchanging a
line every 20 ms (takeover_lab.take_over). Nothing may fail; the long-lived connections keep their
endpoint (their conntrack NAT binding outlives the rule change); afterwards the tables hold exactly
what our daemon writes on a clean node (its --dry-run), none of upstream's own objects, and our
daemon follows changes. Then --cleanup leaves no table of ours and upstream's table loads again.

The assertions are about behaviour and about upstream's objects, never about our chain names."""
import json
import os

import pytest

import netlab
import upstream_nft
from netlab import sh
from takeover_lab import FAMILIES, NODE_PORT, V4, assert_serves, outside, take_over, write_manifests

pytestmark = pytest.mark.usefixtures("daemon_bin")


def upstream_services(fam, eps):
    """web and none as in our manifests, and `gone`: a service with session affinity deleted while
    no proxy ran, so that only upstream's table still has it."""
    addr = fam["addr"]
    return [upstream_nft.Svc("web", fam["web"], 80, [(addr(p), 8080) for p in eps], node_port=NODE_PORT),
            upstream_nft.Svc("web", fam["web"], 7000, [(addr(p), 7070) for p in eps], port_name="chat"),
            upstream_nft.Svc("none", fam["none"], 80, []),
            upstream_nft.Svc("gone", fam["gone"], 80, [(addr(p), 8080) for p in eps], affinity=True)]


def load_upstream(lab, layout, eps):
    for fam in FAMILIES:
        text = upstream_nft.script(fam["family"], layout, upstream_services(fam, eps), fam["cidr"],
                                   fam["service_cidr"], fam["node"])
        path = os.path.join(lab.tmp, f"upstream-{layout}-{fam['family']}.nft")
        with open(path, "w") as f:
            f.write(text)
        sh(["nft", "-f", path], ns=lab.node)


def uncommented(elem):
    """An element without its comment: a start-up keeps an element that matches by key and value
    whatever its comment says (comments are for people), as the kernel compares them."""
    if isinstance(elem, list):
        return [uncommented(elem[0])] + elem[1:]
    if isinstance(elem, dict) and "elem" in elem:
        return elem["elem"]["val"]
    return elem


def table_objects(ns, family):
    """`<family> kube-proxy` by meaning: chains (hook, rules without handles), sets (type, flags,
    sorted elements without comments); None when the table does not exist."""
    p = sh(["nft", "-j", "list", "table", family, "kube-proxy"], ns=ns, check=False)
    if p.returncode != 0:
        return None
    chains, sets = {}, {}
    for item in json.loads(p.stdout)["nftables"]:
        if "chain" in item:
            c = item["chain"]
            chains.setdefault(c["name"], {"rules": []})["hook"] = (c.get("type"), c.get("hook"), c.get("prio"))
        elif "rule" in item:
            r = item["rule"]
            chains.setdefault(r["chain"], {"rules": []})["rules"].append(
                json.dumps([r["expr"], r.get("comment")], sort_keys=True))
        else:
            for kind in ("set", "map"):
                if kind in item:
                    s = item[kind]
                    sets[s["name"]] = (kind, json.dumps(s.get("type")), s.get("map"), s.get("flags"),
                                       sorted(json.dumps(uncommented(e), sort_keys=True) for e in s.get("elem", [])))
    return {"chains": chains, "sets": sets}


def clean_node_tables(lab):
    """What our daemon writes on a node without any table: its --dry-run, loaded into a fresh
    namespace."""
    p = sh([netlab.BIN, f"--manifests={lab.manifests.path}", "--dry-run",
            f"--hostname-override={netlab.NODE_NAME}", f"--cluster-cidr={netlab.CLUSTER_CIDRS}"],
           ns=lab.node, timeout=30)
    path = os.path.join(lab.tmp, "dry-run.nft")
    with open(path, "w") as f:
        f.write(p.stdout)
    fresh = lab.add_pod("fresh").ns
    sh(["nft", "-f", path], ns=fresh)
    return {fam: table_objects(fresh, fam) for fam in ("ip", "ip6")}


@pytest.mark.parametrize("layout", upstream_nft.LAYOUTS)
def test_takeover_from_upstream_nftables_mode_drops_nothing_and_leaves_none_of_upstream(lab, layout):
    client = lab.add_pod("client")
    eps = lab.add_backends(2, tcp=[8080], udp=[], stream=[7070], name="web")
    write_manifests(lab, eps)
    load_upstream(lab, layout, eps)
    up = {fam["family"]: table_objects(lab.node, fam["family"]) for fam in FAMILIES}
    probe, ext = lab.agent(client), outside(lab)
    assert_serves(probe, client, eps, f"upstream {layout} before the takeover", ext)
    for fam in FAMILIES:
        assert probe.tcp(fam["gone"], 80).split()[0] in {fam["addr"](p) for p in eps}, "upstream serves `gone`"

    d = take_over(lab, client, eps)

    # Upstream's own objects are gone; the tables are exactly what we write on a clean node.
    want = clean_node_tables(lab)
    for fam in FAMILIES:
        f = fam["family"]
        have = table_objects(lab.node, f)
        upstream_only = upstream_nft.own_objects(f, layout, upstream_services(fam, eps))
        assert upstream_only <= set(up[f]["chains"]) | set(up[f]["sets"]), "the helper names what it loaded"
        left = upstream_only & (set(have["chains"]) | set(have["sets"]))
        assert not left, f"{f} {layout}: upstream's objects left after the takeover: {sorted(left)}"
        assert sorted(have["chains"]) == sorted(want[f]["chains"]), \
            f"{f}: chains differ from a clean node's: extra {sorted(set(have['chains']) - set(want[f]['chains']))}, " \
            f"missing {sorted(set(want[f]['chains']) - set(have['chains']))}"
        for name, c in want[f]["chains"].items():
            assert have["chains"][name] == c, f"{f}: chain {name} differs from a clean node's:\n{have['chains'][name]}\n{c}"
        assert have["sets"] == want[f]["sets"], \
            f"{f}: sets differ from a clean node's: {sorted(set(have['sets']) ^ set(want[f]['sets']))}"

    # ...and it is our daemon that serves: it follows a change.
    assert_serves(probe, client, eps, "after the takeover", ext)
    for fam in FAMILIES:
        r = probe.tcp(fam["gone"], 80, timeout=0.5)
        assert r.startswith("ERR:"), f"{fam['family']}: the service only upstream's table had still answers: {r}"
    with d.change():
        write_manifests(lab, eps[1:])
    assert_serves(probe, client, eps[1:], "our daemon after an endpoint change", ext)

    # The way back: --cleanup leaves no table of ours, and upstream's layout loads and serves again.
    d.stop()
    p = sh([netlab.BIN, "--cleanup", "--v=2", "--logtostderr"], ns=lab.node, check=False)
    assert p.returncode == 0, p.stderr
    assert table_objects(lab.node, "ip") is None and table_objects(lab.node, "ip6") is None, \
        "--cleanup left a table of ours"
    r = probe.tcp(V4["web"], 80, timeout=0.5)
    assert r.startswith("ERR:"), f"after --cleanup something still serves {V4['web']}: {r}"
    load_upstream(lab, layout, eps)
    assert_serves(probe, client, eps, f"upstream {layout} loaded again after --cleanup", ext)

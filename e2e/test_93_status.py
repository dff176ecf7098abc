"""`kube-proxy-nft status` (issue 28): what the running daemon says about itself over its status
socket (version, source and each resource's state, the last successful and failed sync and why,
services known, programmed and refused, families, repairs, events), and the node checks an
operator would run by hand, each one turned on for real in the lab's node namespace (forwarding
off, another firewall's forward chain dropping, IPVS, iptables-nft and iptables-legacy leftovers).
Who may ask: root in the node's network namespace only."""
import json
import os
import stat
import subprocess

import pytest

from apiserver_lab import ApiServer
from netlab import BIN, endpoint_slice, node_object, service, sh
from prometheus_lab import wait_for

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def status(lab, *args, ns=None, prefix=()):
    p = subprocess.run([*prefix, "ip", "netns", "exec", ns or lab.node, BIN, "status", *args], capture_output=True,
                       text=True, timeout=30) if not prefix else \
        subprocess.run(["ip", "netns", "exec", ns or lab.node, *prefix, BIN, "status", *args], capture_output=True,
                       text=True, timeout=30)
    return p


def status_json(lab, *args, ns=None, prefix=()):
    p = status(lab, "--output=json", *args, ns=ns, prefix=prefix)
    return p.returncode, json.loads(p.stdout), p


def checks(doc):
    out = {}
    for c in doc["node"]:
        out.setdefault(c["name"], []).append(c)
    return out


def test_status_of_a_daemon_on_a_manifest_folder_its_repairs_and_the_node_checks(lab):
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [service("web", HTTP, ["10.96.6.10"]), endpoint_slice("web", [ep.v4], HTTP_SLICE),
                                     service("hl", HTTP, headless=True)])
    d = lab.start_daemon()
    rc, doc, p = status_json(lab)
    assert rc == 0, p.stderr
    s = doc["daemon"]
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout
    assert f"kube-proxy-nft version {s['version']} (commit {s['commit']})" in version, (version, s)
    assert s["pid"] == d.proc.pid  # ip netns exec execs the daemon
    assert s["node"] == "node1"
    assert s["source"]["kind"] == "manifests" and s["source"]["synced"] and s["source"]["connected"], s["source"]
    assert s["source"]["resources"] == [{"name": "folder", "listed": True, "lastError": ""}]
    assert s["services"] == {"known": 2, "programmed": 1, "refused": []}, s["services"]
    assert s["families"] == ["ip", "ip6"]
    assert s["sync"]["lastSuccess"]["plan"] == "reconcile" and s["sync"]["lastFailure"] is None, s["sync"]
    assert s["events"] is None and doc["daemonError"] is None
    text = status(lab).stdout
    assert "services: 2 known, 1 programmed, 0 refused by the kernel" in text, text
    assert "last failed sync: none" in text and "families: ip, ip6" in text, text

    # Outside damage, repaired: counted.
    lab.nft("flush", "table", "ip", "kube-proxy")
    wait_for(lambda: status_json(lab)[1]["daemon"]["repairs"]["count"] >= 1, 20, "the repair counted")

    # The node checks, each made true in the node namespace (and undone).
    c = checks(doc)
    assert [x["level"] for x in c["ip_forward"]] == ["ok"], c["ip_forward"]
    assert [x["level"] for x in c["forward-drop"]] == ["ok"]
    sh(["sysctl", "-qw", "net.ipv4.ip_forward=0"], ns=lab.node)
    sh(["nft", "-f", "-"], ns=lab.node, input="table inet fw28 {\n chain forward_drop {\n  type filter hook forward "
                                              "priority 10; policy drop;\n }\n}\n")
    sh(["nft", "-f", "-"], ns=lab.node, input="table ip nat {\n chain KUBE-SERVICES {\n }\n}\n")
    sh(["ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "kipvs-peer"], ns=lab.node)  # (upstream: a dummy)
    sh(["iptables-legacy", "-t", "filter", "-N", "KUBE-FORWARD"], ns=lab.node)
    try:
        rc, doc, _ = status_json(lab)
        c = checks(doc)
        assert [x["level"] for x in c["ip_forward"]] == ["warning"], c["ip_forward"]
        assert "net.ipv4.ip_forward = 0" in c["ip_forward"][0]["message"]
        (drop,) = c["forward-drop"]
        assert drop["level"] == "warning" and drop["message"].startswith("table inet fw28 chain forward_drop (priority 10)"), drop
        assert c["iptables-nft"][0]["level"] == "warning" and "1 in table ip nat" in c["iptables-nft"][0]["message"]
        assert c["ipvs"][0]["level"] == "warning" and "kube-ipvs0" in c["ipvs"][0]["message"]
        assert c["iptables-legacy"][0]["level"] == "warning" and "iptables-legacy: filter" in \
            c["iptables-legacy"][0]["message"], c["iptables-legacy"]
        text = status(lab).stdout
        assert "[warning] forward-drop: table inet fw28 chain forward_drop" in text, text
    finally:
        sh(["sysctl", "-qw", "net.ipv4.ip_forward=1"], ns=lab.node)
        sh(["nft", "delete", "table", "inet", "fw28"], ns=lab.node, check=False)


def test_status_through_the_api_source_not_synced_refused_services_failed_syncs_and_events(lab):
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[])
    api = ApiServer(lab)
    api.put([node_object(), service("web", HTTP, ["10.96.6.20"]), endpoint_slice("web", [ep.v4], HTTP_SLICE),
             service("bad", HTTP, ["10.96.6.21"]), endpoint_slice("bad", [ep.v4], HTTP_SLICE)])
    api.fail(500, count=100000, match="endpointslices")
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "kc"))
    d = lab.daemon([f"--kubeconfig={kc}"], manifests=False, env={"KPN_FAULT_REFUSE_TEXT": '"default/bad:http"'}).start()
    # Before EndpointSlices list: not synced, and the resource's last error says why.
    def unlisted():
        rc, doc, _ = status_json(lab)
        res = {r["name"]: r for r in doc["daemon"]["source"]["resources"]} if rc == 0 else {}
        ready = res.get("EndpointSlices", {}).get("lastError") and doc["daemon"]["source"]["pending"] == "EndpointSlices"
        return doc if ready else None
    doc = wait_for(unlisted, 20, "the EndpointSlice list's error in the status")
    s = doc["daemon"]
    assert s["source"]["kind"] == "api" and not s["source"]["synced"] and not s["source"]["connected"], s["source"]
    assert s["source"]["pending"] == "EndpointSlices" and s["sync"]["lastSuccess"] is None, s
    res = {r["name"]: r for r in s["source"]["resources"]}
    assert res["EndpointSlices"]["lastError"] == "list: HTTP 500" and not res["EndpointSlices"]["listed"], res
    assert res["Services"] == {"name": "Services", "listed": True, "lastError": ""}, res
    text = status(lab).stdout
    assert "NOT connected, not synced yet (waiting for EndpointSlices)" in text, text

    api.fail(500, count=0)
    d.wait_syncs(1, timeout=30)
    wait_for(lambda: status_json(lab)[1]["daemon"]["services"]["refused"], 20, "the refused service in the status")
    s = status_json(lab)[1]["daemon"]
    assert s["source"]["synced"] and s["source"]["connected"], s["source"]
    assert s["services"]["known"] == 2 and s["services"]["programmed"] == 1, s["services"]
    (ref,) = s["services"]["refused"]
    assert ref["service"] == "default/bad" and "failpoint KPN_FAULT_REFUSE_TEXT" in ref["error"], ref
    wait_for(lambda: status_json(lab)[1]["daemon"]["events"]["created"] >= 2, 20, "Starting and the Warning sent")

    # Every commit refused: the last failed sync and why, failures in a row, no success yet.
    d.stop()
    d = lab.daemon([f"--kubeconfig={kc}"], manifests=False, env={"KPN_FAULT_REFUSE_TEXT": '"table":"kube-proxy"'}).start()
    wait_for(lambda: (status_json(lab)[1].get("daemon") or {}).get("sync", {}).get("consecutiveFailures", 0) >= 2, 30,
             "two failed syncs in the status")
    s = status_json(lab)[1]["daemon"]
    assert s["sync"]["lastSuccess"] is None, s["sync"]
    assert "Operation not permitted (failpoint KPN_FAULT_REFUSE_TEXT)" in s["sync"]["lastFailure"]["error"], s["sync"]
    text = status(lab).stdout
    assert "no successful sync yet" in text and "in a row now): " in text, text


def test_only_root_in_the_nodes_network_namespace_may_ask(lab):
    lab.manifests.write("node.yaml", node_object())
    d = lab.start_daemon()
    assert status(lab).returncode == 0
    # Another user: closed unanswered (the node checks still print).
    p = status(lab, prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert p.returncode == 1 and "daemon: no answer: " in p.stdout and "node checks:" in p.stdout, (p.stdout, p.stderr)
    # Another network namespace (a pod's): the abstract socket is not there.
    pod = lab.add_pod("pod")
    rc, doc, _ = status_json(lab, ns=pod.ns)
    assert rc == 1 and doc["daemon"] is None and doc["daemonError"].startswith("no daemon answers on "), doc
    # A path instead: created for its user only.
    d.stop()
    path = os.path.join(lab.tmp, "status.sock")
    d = lab.start_daemon([f"--status-socket={path}"])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert status(lab, f"--status-socket={path}").returncode == 0
    d.stop()
    assert not os.path.exists(path)
    # Empty: no socket at all.
    lab.start_daemon(["--status-socket="])
    assert status(lab).returncode == 1
    p = status(lab, "--bogus")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--bogus" in p.stderr

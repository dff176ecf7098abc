"""`kube-proxy-nft trace` names the real cause (issue 28), from the running daemon's cluster state
(asked over its status socket), and each prediction is checked against real connections: what
the trace says the kernel does (DNAT to these endpoints, refuse, drop, pass untouched) is what
the connection gets. Untouched packets are made visible by a witness behind the node's default
route that answers as the address itself (netlab.add_upstream_witness).

Causes: no EndpointSlice; endpoints present but none ready (with counts); the slices' port name
does not match the Service's; an unknown port of a ClusterIP; no Service has the address (with
how many the daemon knows); an unallocated ServiceCIDR address; another proxy's Service (its
service-proxy-name label); headless; ExternalName; topology hints; traffic policy Local (external
and internal) without a local endpoint; source ranges; the daemon has not synced; the kernel
refuses the Service; the table drifted from the state (the daemon's syncs fail); no table at all.
And trace by name: --service=NS/NAME[:PORT] (every address), --dst=NAME.NS.svc.cluster.local:PORT
(what DNS gives)."""
import json
import os
import subprocess

import pytest

import netlab
from apiserver_lab import ApiServer
from netlab import (BIN, CLIENT_V4, NODE_V4, endpoint_slice, expect_answers, expect_dropped, expect_refused,
                    node_object, service, service_cidr)
from test_60_kube_api import wait_for
from test_70_external import slices

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]
WITNESS = ["10.96.1.40", "10.96.1.99", "198.51.100.77", "10.96.3.10", "10.96.4.12"]


def trace(lab, *args):
    """The trace as JSON; the text form must run too and carry the same verdict and cause. The two
    are two runs: a cause that counts something live (failed syncs) may move between them, so a
    pair that differs is asked again, and the last pair must agree."""
    cmd = ["ip", "netns", "exec", lab.node, BIN, "trace", *args]
    for attempt in range(3):
        p = subprocess.run(cmd + ["--output=json"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr}"
        tr = json.loads(p.stdout)
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert text.returncode == 0, text.stderr
        wanted = []
        if tr.get("verdict"):
            wanted.append(f"verdict: {tr['verdict']} — {tr['reason']}")
        if tr.get("cause"):
            wanted.append("cause: " + tr["cause"]["message"])
        if all(w in text.stdout for w in wanted):
            break
    for w in wanted:
        assert w in text.stdout, text.stdout
    return tr, text.stdout


def trace_to(lab, src, dst, port, frm="pod", proto="tcp"):
    host = f"[{dst}]" if ":" in dst else dst
    return trace(lab, f"--from={frm}", f"--src={src}", f"--dst={host}:{port}", f"--proto={proto}")


def kernel_does(agent, tr, src, bind=None, what=""):
    """Real connections get what the trace predicted for them."""
    p = tr["_packet"]
    if tr["verdict"] == "dnat":
        eps = {c["address"] for c in tr["candidates"]}
        sources = {c["source"] for c in tr["candidates"]}
        expect_answers(agent, p["dst"], p["port"], eps, sources, bind=bind, what=what)
    elif tr["verdict"] == "reject":
        expect_refused(agent, p["dst"], p["port"], bind=bind, what=what)
    elif tr["verdict"] == "drop":
        expect_dropped(agent, p["dst"], p["port"], bind=bind, what=what)
    elif tr["verdict"] == "accept":
        # Untouched: the address itself answers (a witness behind the default route, or an endpoint
        # reached directly), and sees the client's own address.
        expect_answers(agent, p["dst"], p["port"], {p["dst"]}, {src}, n=2, bind=bind, what=what)
    else:
        raise AssertionError(f"{what}: verdict {tr['verdict']}")


def checked(lab, agent, src, dst, port, verdict, code, bind=None, frm="pod", what=""):
    tr, text = trace_to(lab, src, dst, port, frm=frm)
    label = what or code
    assert tr["verdict"] == verdict, f"{label}: {tr['verdict']} ({tr['reason']})\n{text}"
    assert (tr["cause"] or {}).get("code") == code, f"{label}: cause {tr['cause']}\n{text}"
    assert tr["state"]["origin"] == "daemon" and tr["state"]["synced"] is True, tr["state"]
    tr["_packet"] = {"dst": dst, "port": port}
    kernel_does(agent, tr, src, bind=bind, what=label)
    return tr, text


def test_no_endpoints_is_explained_by_the_state_slices_readiness_port_names_and_unknown_addresses(lab):
    """Four ways to the same "no endpoints" refusal, each its own cause with the counts; an
    unknown port; an address no Service has (passes untouched), and one inside a ServiceCIDR
    (dropped)."""
    pod = lab.add_pod("pod")
    ep1, ep2 = lab.add_backends(2, tcp=[8080], udp=[])
    lab.add_upstream_witness(WITNESS, tcp=[80])
    lab.manifests.write("node.yaml", node_object())
    not_ready = [{"ip": ep1.v4, "conditions": {"ready": False, "serving": False, "terminating": False}},
                 {"ip": ep2.v4, "conditions": {"ready": False, "serving": False, "terminating": True}}]
    lab.manifests.write("svc.yaml", [
        service("web", HTTP, ["10.96.1.10"]), endpoint_slice("web", [ep1.v4], HTTP_SLICE),
        service("noslice", HTTP, ["10.96.1.11"]),
        service("notready", HTTP, ["10.96.1.12"]), endpoint_slice("notready", not_ready, HTTP_SLICE),
        service("mismatch", HTTP, ["10.96.1.13"]), endpoint_slice("mismatch", [ep1.v4], [("web", 8080, "TCP")]),
        service_cidr("kubernetes", ["10.97.0.0/16"]),
    ])
    lab.start_daemon()
    cli = lab.agent(pod)

    tr, _ = checked(lab, cli, pod.v4, "10.96.1.11", 80, "reject", "no-endpoint-slice")
    assert "none is labelled kubernetes.io/service-name=noslice" in tr["cause"]["message"], tr["cause"]
    assert tr["cause"]["counts"]["slices"] == 0
    tr, _ = checked(lab, cli, pod.v4, "10.96.1.12", 80, "reject", "no-ready-endpoints")
    c = tr["cause"]["counts"]
    assert (c["endpoints"], c["ready"], c["notReady"], c["terminating"], c["servingTerminating"]) == (2, 0, 1, 1, 0), c
    tr, _ = checked(lab, cli, pod.v4, "10.96.1.13", 80, "reject", "port-mismatch")
    assert tr["cause"]["objects"] == ["web 8080/tcp"] and 'no port named "http"' in tr["cause"]["message"], tr["cause"]
    tr, _ = checked(lab, cli, pod.v4, "10.96.1.10", 81, "reject", "unknown-port")
    assert "ports are http 80/TCP" in tr["cause"]["message"], tr["cause"]
    tr, _ = checked(lab, cli, pod.v4, "10.96.1.99", 80, "accept", "no-service")
    assert tr["cause"]["counts"]["servicesKnown"] == 4 and "none of the 4 Services the daemon knows" in \
        tr["cause"]["message"], tr["cause"]
    tr, _ = checked(lab, cli, pod.v4, "10.97.0.5", 80, "drop", "unallocated-service-cidr")
    assert "inside ServiceCIDR kubernetes (10.97.0.0/16)" in tr["cause"]["message"], tr["cause"]
    # The working one has no cause.
    tr, _ = checked(lab, cli, pod.v4, "10.96.1.10", 80, "dnat", None)


def test_services_that_are_not_ours_headless_external_name_and_topology(lab):
    """--service and DNS names: another proxy's Service (its ClusterIP passes untouched), a
    headless one (DNS gives the endpoints, reached directly), an ExternalName (an address alias is
    traced as the address; a DNS name has nothing to trace), and topology hints that keep this
    zone's endpoints only."""
    pod = lab.add_pod("pod")
    ep1, ep2, ep3 = lab.add_backends(3, tcp=[8080], udp=[])
    lab.add_upstream_witness(WITNESS, tcp=[80])
    node = node_object()
    node["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-a"
    lab.manifests.write("node.yaml", node)
    topo = endpoint_slice("topo", [ep1.v4, ep2.v4, ep3.v4], HTTP_SLICE)
    for ep, zone in zip(topo["endpoints"], ["zone-a", "zone-a", "zone-b"]):
        ep["zone"] = zone
        ep["hints"] = {"forZones": [{"name": zone}]}
    lab.manifests.write("svc.yaml", [
        service("other", HTTP, ["10.96.1.40"], labels={"service.kubernetes.io/service-proxy-name": "other-proxy"}),
        endpoint_slice("other", [ep1.v4], HTTP_SLICE),
        service("hl", HTTP, headless=True), endpoint_slice("hl", [ep2.v4], HTTP_SLICE),
        service("alias", [("http", 80, "TCP", 80)], type="ExternalName", external_name="198.51.100.77"),
        service("dns", [("http", 80, "TCP", 80)], type="ExternalName", external_name="example.com"),
        service("topo", HTTP, ["10.96.1.50"]), topo,
    ])
    lab.start_daemon()
    cli = lab.agent(pod)

    tr, text = trace(lab, "--service=default/other", "--from=pod", f"--src={pod.v4}")
    assert [(f["frontend"]["kind"], f["verdict"], f["cause"]["code"]) for f in tr["frontends"]] == \
        [("ClusterIP", "accept", "excluded")], text
    assert "service.kubernetes.io/service-proxy-name=other-proxy" in tr["cause"]["message"], tr["cause"]
    tr["_packet"] = {"dst": "10.96.1.40", "port": 80}
    kernel_does(cli, tr, pod.v4, what="another proxy's ClusterIP")

    for args in (["--service=default/hl"], ["--dst=hl.default.svc.cluster.local:8080"]):
        tr, text = trace(lab, *args, "--from=pod", f"--src={pod.v4}")
        assert [(f["frontend"]["kind"], f["cause"]["code"]) for f in tr["frontends"]] == [("endpoint", "headless")], text
        assert f"{ep2.v4}:8080/tcp" in text
        tr["_packet"] = {"dst": ep2.v4, "port": 8080}
        kernel_does(cli, tr, pod.v4, what="headless: the endpoint directly")

    tr, text = trace(lab, "--service=default/alias", "--from=pod", f"--src={pod.v4}")
    assert tr["verdict"] == "accept" and tr["cause"]["code"] == "external-name", text
    assert "DNS alias (CNAME) of 198.51.100.77" in tr["cause"]["message"]
    tr["_packet"] = {"dst": "198.51.100.77", "port": 80}
    kernel_does(cli, tr, pod.v4, what="ExternalName's address")
    tr, text = trace(lab, "--service=default/dns")
    assert tr["frontends"] == [] and tr["cause"]["code"] == "external-name", text
    assert "nothing to trace" in text and "CNAME) of example.com" in text, text

    tr, text = trace(lab, "--dst=topo.default:80", "--from=pod", f"--src={pod.v4}")
    assert tr["cause"]["code"] == "topology" and tr["cause"]["counts"] == {"used": 2, "ready": 3}, tr["cause"]
    assert {c["address"] for c in tr["candidates"]} == {ep1.v4, ep2.v4}, text
    tr["_packet"] = {"dst": "10.96.1.50", "port": 80}
    kernel_does(cli, tr, pod.v4, what="zone hints")

    tr, text = trace(lab, "--service=default/nothere")
    assert tr["frontends"] == [] and tr["cause"]["code"] == "no-such-service", text


def test_local_traffic_policies_and_source_ranges_every_address_of_a_service(lab):
    """--service traces every address: the ClusterIP, the LoadBalancer IP and the NodePort; with
    externalTrafficPolicy Local and the only endpoint elsewhere, outside traffic is dropped (the
    cause counts where the endpoints are), pods still reach it. internalTrafficPolicy Local
    without a local endpoint drops pods' traffic. A source range drops a source outside it."""
    client = lab.add_external_client()
    pod = lab.add_pod("pod")
    (remote,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("svc.yaml", [
        service("far", [("p80", 80, "TCP", 80, 30082)], ["10.96.2.42"], type="LoadBalancer", etp="Local",
                lb_ingress=["198.51.100.42"], health_check_node_port=32082),
        *slices("far", [remote], [("p80", 80, "TCP")], remote=[remote])[:1],
        service("inner", [("p80", 80, "TCP", 80)], ["10.96.2.43"], itp="Local"),
        *slices("inner", [remote], [("p80", 80, "TCP")], remote=[remote])[:1],
        service("fw", [("p80", 80, "TCP", 80, 30083)], ["10.96.2.44"], type="LoadBalancer",
                lb_ingress=["198.51.100.44"], source_ranges=["203.0.113.0/25"]),
        endpoint_slice("fw", [remote.v4], [("p80", 80, "TCP")]),
    ])
    lab.start_daemon()
    ext, cli = lab.agent(client), lab.agent(pod)

    tr, text = trace(lab, "--service=default/far", "--from=external", f"--src={client.v4}")
    by = {(f["frontend"]["kind"]): f for f in tr["frontends"]}
    assert set(by) == {"ClusterIP", "LoadBalancer", "NodePort"}, text
    for kind, dst, port in (("LoadBalancer", "198.51.100.42", 80), ("NodePort", NODE_V4, 30082)):
        f = by[kind]
        assert f["verdict"] == "drop" and f["cause"]["code"] == "no-local-endpoint", f["cause"]
        assert "externalTrafficPolicy Local" in f["cause"]["message"] and "on node2" in f["cause"]["message"], f["cause"]
        assert "health check node port 32082" in f["cause"]["message"]
        f["_packet"] = {"dst": dst, "port": port}
        kernel_does(ext, f, client.v4, what=f"eTP=Local {kind} from outside")
    tr, _ = checked(lab, cli, pod.v4, "198.51.100.42", 80, "dnat", None, what="a pod reaches it")

    tr, _ = checked(lab, cli, pod.v4, "10.96.2.43", 80, "drop", "no-local-endpoint", what="iTP=Local from a pod")
    assert tr["cause"]["message"].startswith("internalTrafficPolicy Local: default/inner has 1 ready endpoint, on node2")

    checked(lab, ext, client.v4, "198.51.100.44", 80, "dnat", None, frm="external", what="a source in range")
    tr, _ = checked(lab, ext, client.v4_blocked, "198.51.100.44", 80, "drop", "source-range", frm="external",
                    bind=client.v4_blocked, what="a source out of range")
    assert tr["cause"]["objects"] == ["203.0.113.0/25"], tr["cause"]


def test_not_synced_yet_then_refused_by_the_kernel_then_drifted_after_failing_syncs(lab):
    """The API source: before EndpointSlices have listed the daemon has not synced (the trace
    says what it waits for; the ClusterIP passes untouched, as the kernel has no table). A Service
    the kernel refuses (the helper's failpoint, as in test_42) is named with the kernel's error,
    and its ClusterIP passes untouched. When every sync fails (a ServiceCIDR whose rule the kernel
    refuses), a new endpoint is in the state but not in the kernel: drift, with the missing
    element, and connections reach only the endpoint the kernel has."""
    pod = lab.add_pod("pod")
    ep1, ep2 = lab.add_backends(2, tcp=[8080], udp=[])
    lab.add_upstream_witness(WITNESS, tcp=[80])
    api = ApiServer(lab)
    api.put([node_object(), service("web", HTTP, ["10.96.3.11"]), endpoint_slice("web", [ep1.v4], HTTP_SLICE),
             service("bad", HTTP, ["10.96.3.10"]), endpoint_slice("bad", [ep1.v4], HTTP_SLICE)])
    # The first EndpointSlice list is answered only after 10 s.
    api.hang(10, match="endpointslices")
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "kc"))
    d = lab.daemon([f"--kubeconfig={kc}"], manifests=False, env={"KPN_FAULT_REFUSE_TEXT": '"default/bad:http"'}).start()
    cli = lab.agent(pod)
    wait_for(lambda: "waiting for API server" in d.stderr(), 20, "the daemon waiting for its first list")
    tr, text = trace(lab, "--service=default/bad", "--from=pod", f"--src={pod.v4}")
    f = tr["frontends"][0]
    assert f["verdict"] == "accept" and f["cause"]["code"] == "not-synced", text
    assert "has not listed EndpointSlices" in f["cause"]["message"] and "(here: there is none)" in f["cause"]["message"]
    assert tr["state"] == {"origin": "daemon", "synced": False, "servicesKnown": 2, "note": ""}, tr["state"]
    f["_packet"] = {"dst": "10.96.3.10", "port": 80}
    kernel_does(cli, f, pod.v4, what="no table yet")

    d.wait_syncs(1, timeout=30)
    wait_for(lambda: "Service default/bad: nft refuses its rules" in d.stderr(), 20, "the refusal")
    tr, text = checked(lab, cli, pod.v4, "10.96.3.10", 80, "accept", "refused")
    assert "the kernel refuses the rules of default/bad" in tr["cause"]["message"], tr["cause"]
    # The kernel's own error, as the syncer got it (here the failpoint's stand-in for it).
    assert "): Operation not permitted (failpoint KPN_FAULT_REFUSE_TEXT); they are left out" in tr["cause"]["message"]

    # A "kernel" that refuses the rule of a ServiceCIDR still to come: once it comes, every
    # transaction carries it and every sync fails.
    d.stop()
    d = lab.start_daemon([f"--kubeconfig={kc}"], manifests=False, env={"KPN_FAULT_REFUSE_TEXT": '"10.99.0.0"'})
    api.put([service_cidr("kubernetes", ["10.99.0.0/16"])])
    wait_for(lambda: len(d.failed_syncs()) >= 1, 20, "a failed sync")
    failed = len(d.failed_syncs())
    api.put([endpoint_slice("web", [ep1.v4, ep2.v4], HTTP_SLICE)])
    wait_for(lambda: len(d.failed_syncs()) > failed, 20, "the endpoint's sync failing")
    # The daemon has the new endpoint once a failing sync has tried it.
    wait_for(lambda: (trace_to(lab, pod.v4, "10.96.3.11", 80)[0]["cause"] or {}).get("code") == "drift", 20,
             "the daemon's state with the endpoint the kernel lacks")
    tr, text = checked(lab, cli, pod.v4, "10.96.3.11", 80, "dnat", "drift")
    assert [c["address"] for c in tr["candidates"]] == [ep1.v4], text
    assert tr["cause"]["counts"]["missing"] == 1, tr["cause"]
    assert any(o.startswith("missing in the kernel: @backends-tcp 10.96.3.11 . 80 . 1 : " + ep2.v4 + " . 8080")
               for o in tr["cause"]["objects"]), tr["cause"]
    assert "syncs failed" in tr["cause"]["message"], tr["cause"]


def test_without_a_daemon_the_table_alone_speaks_and_with_no_table_it_says_so(lab):
    pod = lab.add_pod("pod")
    lab.add_upstream_witness(WITNESS, tcp=[80])
    cli = lab.agent(pod)
    tr, text = trace_to(lab, pod.v4, "10.96.1.99", 80)
    assert tr["verdict"] == "accept" and tr["cause"]["code"] == "no-table", text
    assert tr["state"]["origin"] == "none" and tr["state"]["note"].startswith("the daemon did not answer ("), tr["state"]
    assert "state: the daemon did not answer" in text
    tr["_packet"] = {"dst": "10.96.1.99", "port": 80}
    kernel_does(cli, tr, pod.v4, what="no table")
    p = subprocess.run(["ip", "netns", "exec", lab.node, BIN, "trace", "--service=default/web"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "cause: no cluster state to resolve default/web" in p.stdout, (p.stdout, p.stderr)
    for bad in ("--dst=web:80", "--dst=web.default", "--service=web", "--service=default/Web"):
        p = subprocess.run(["ip", "netns", "exec", lab.node, BIN, "trace", bad], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (bad, p.stderr)

"""ClusterIP data path with the daemon: load balancing, ports/protocols, SCTP, rejects, endpoint
conditions. Real packets between pod namespaces through the node namespace's nftables."""
import re
import time

import pytest

from netlab import answers, endpoint_slice, node_object, service

pytestmark = pytest.mark.usefixtures("daemon_bin")


def chain_names(table_text):
    return re.findall(r"^\s*chain (\S+) \{", table_text, re.M)


def test_tcp_and_udp_connections_spread_over_all_endpoints_without_masquerade(lab):
    client = lab.add_pod("client")
    eps = lab.add_backends(3, tcp=[8080], udp=[5353])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", [
        service("web", [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)], ["10.96.0.10"]),
        endpoint_slice("web", [p.v4 for p in eps], [("http", 8080, "TCP"), ("dns", 5353, "UDP")]),
    ])
    lab.start_daemon()
    cli = lab.agent(client)
    want = {p.v4 for p in eps}

    for proto, port in (("tcp", 80), ("udp", 53)):
        res = cli.many(proto, "10.96.0.10", port, 60)
        own, peers, errs = answers(res)
        print(f"{proto}: answers per endpoint {own}, errors {errs}")
        assert errs == [], f"{proto}: {len(errs)} of 60 connections failed: {sorted(set(errs))}"
        assert set(own) == want, f"{proto}: endpoints that answered {own}, expected all of {want}"
        assert set(peers) == {client.v4}, f"{proto}: pod->ClusterIP was masqueraded: {set(peers)}"


def test_each_service_port_uses_the_endpoint_port_of_the_slice_port_with_same_name_and_protocol(lab):
    client = lab.add_pod("client")
    # Decoy listeners on the Service's targetPorts (9999/9998): answering there would mean the
    # daemon took targetPort instead of the slice's port.
    eps = lab.add_backends(2, tcp=[8080, 5354, 9999], udp=[5353, 9998], show_port=True)
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("multi.yaml", [
        service("multi", [("http", 80, "TCP", 9999), ("dns", 53, "UDP", 9998),
                          ("dns-tcp", 53, "TCP", 9999)], ["10.96.0.20"]),
        endpoint_slice("multi", [p.v4 for p in eps],
                       [("dns-tcp", 5354, "TCP"), ("http", 8080, "TCP"), ("dns", 5353, "UDP")]),
        # the common single unnamed port: service port without a name, slice port name ""
        service("single", [("", 80, "TCP", 9999)], ["10.96.0.21"]),
        endpoint_slice("single", [p.v4 for p in eps], [("", 8080, "TCP")]),
    ])
    lab.start_daemon()
    cli = lab.agent(client)
    want = {p.v4 for p in eps}
    for proto, port, ep_port in (("tcp", 80, "8080"), ("udp", 53, "5353"), ("tcp", 53, "5354")):
        res = cli.many(proto, "10.96.0.20", port, 20)
        own, _, errs = answers(res)
        ports = {r.split()[2] for r in res if not r.startswith("ERR:")}
        print(f"{proto}/{port}: endpoints {own} endpoint ports {ports} errors {set(errs)}")
        assert errs == [], f"{proto}/{port}: failures {sorted(set(errs))}"
        assert ports == {ep_port}, f"{proto}/{port} reached endpoint port(s) {ports}, want {ep_port}"
        assert set(own) <= want
    res = cli.many("tcp", "10.96.0.21", 80, 10)
    assert {r.split()[2] if not r.startswith("ERR:") else r for r in res} == {"8080"}, \
        f"single unnamed port: {set(res)}"


def test_endpoints_are_the_union_of_all_slices_labelled_for_the_service(lab):
    client = lab.add_pod("client")
    e1, e2, e3, other = lab.add_backends(4, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("svc.yaml", service("union", [("http", 80, "TCP", 8080)], ["10.96.0.25"]))
    # three slices in two files; the slice of another service must not contribute
    m.write("slices-a.yaml", endpoint_slice("union", [e1.v4], [("http", 8080, "TCP")],
                                            name="union-abcde"))
    m.write("slices-b.json", [
        endpoint_slice("union", [e2.v4], [("http", 8080, "TCP")], name="union-fghij"),
        endpoint_slice("union", [e3.v4], [("http", 8080, "TCP")], name="union-klmno"),
        service("unrelated", [("http", 80, "TCP", 8080)], ["10.96.0.26"]),
        endpoint_slice("unrelated", [other.v4], [("http", 8080, "TCP")], name="union-pqrst"),
    ])
    d = lab.start_daemon()
    cli = lab.agent(client)
    own, _, errs = answers(cli.many("tcp", "10.96.0.25", 80, 45))
    print(own, errs)
    assert not errs and set(own) == {e1.v4, e2.v4, e3.v4}, f"union of 3 slices: {own} {errs}"
    # dropping one slice (its file) removes exactly its endpoint
    with d.change():
        m.delete("slices-a.yaml")
    own, _, errs = answers(cli.many("tcp", "10.96.0.25", 80, 30))
    assert not errs and set(own) == {e2.v4, e3.v4}, f"after deleting slice a: {own} {errs}"


def test_sctp_init_to_cluster_ip_is_dnatted_to_the_slice_endpoint(lab):
    client = lab.add_pod("client")
    ep = lab.add_pod("ep1")  # no SCTP in this kernel: the node's conntrack is the witness
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("sctp.yaml", [
        service("sctpsvc", [("assoc", 9000, "SCTP", 9000)], ["10.96.0.30"]),
        endpoint_slice("sctpsvc", [ep.v4], [("assoc", 9001, "SCTP")]),
    ])
    lab.start_daemon()
    table = lab.table("ip")
    assert "sctp" in table and "10.96.0.30" in table, "no SCTP rule/element for 10.96.0.30"
    # The shared SCTP pick chain, and the service's slot in the SCTP backends map.
    assert "pick-sctp" in chain_names(table), chain_names(table)
    assert re.search(r'10\.96\.0\.30 \. 9000 \. 0 comment "default/sctpsvc:\S*" : ', table), table

    cli = lab.agent(client)
    cli.sctp_init("10.96.0.30", 9000, sport=40123)
    deadline = time.monotonic() + 3
    entries = []
    while time.monotonic() < deadline and not entries:
        entries = [e for e in lab.conntrack("sctp")
                   if e[0].get("dst") == "10.96.0.30" and e[0].get("sport") == "40123"]
        time.sleep(0.05)
    assert entries, f"no conntrack entry for the SCTP INIT: {lab.conntrack('sctp')}"
    orig, reply, line = entries[0]
    print(line)
    assert orig["src"] == client.v4 and orig["dport"] == "9000", line
    assert reply["src"] == ep.v4 and reply["sport"] == "9001", f"not DNATed to {ep.v4}:9001: {line}"


def test_no_endpoints_and_unknown_ports_are_refused_and_ignored_services_get_no_rules(lab):
    client = lab.add_pod("client")
    (ep,) = lab.add_backends(1, tcp=[8080], udp=[5353])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("noeps.yaml", service("noeps", [("http", 80, "TCP", 80), ("dns", 53, "UDP", 53)],
                                  ["10.96.0.40"]))
    m.write("emptyeps.yaml", [
        service("emptyeps", [("http", 80, "TCP", 80)], ["10.96.0.41"]),
        endpoint_slice("emptyeps", [], [("http", 8080, "TCP")]),
    ])
    m.write("live.yaml", [
        service("live", [("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)], ["10.96.0.42"]),
        endpoint_slice("live", [ep.v4], [("http", 8080, "TCP"), ("dns", 5353, "UDP")]),
    ])
    m.write("ignored.yaml", [
        service("headless-svc", [("http", 80, "TCP", 8080)], headless=True),
        endpoint_slice("headless-svc", [ep.v4], [("http", 8080, "TCP")]),
        service("extname-svc", [("http", 80, "TCP", 80)], type="ExternalName",
                external_name="db.example.com"),
        service("otherproxy-svc", [("http", 80, "TCP", 8080)], ["10.96.0.43"],
                labels={"service.kubernetes.io/service-proxy-name": "someone-else"}),
        endpoint_slice("otherproxy-svc", [ep.v4], [("http", 8080, "TCP")]),
        # Issue 11 defect 4: an empty value is still the label (upstream's `!label` selector).
        service("emptyproxy-svc", [("http", 80, "TCP", 8080)], ["10.96.0.44"],
                labels={"service.kubernetes.io/service-proxy-name": ""}),
        endpoint_slice("emptyproxy-svc", [ep.v4], [("http", 8080, "TCP")]),
    ])
    lab.start_daemon()
    cli = lab.agent(client)

    assert cli.tcp("10.96.0.42", 80) == f"{ep.v4} {client.v4}", "the live service must work"
    assert cli.udp("10.96.0.42", 53) == f"{ep.v4} {client.v4}", "the live service must work"
    results = {
        "TCP to service without slices": cli.tcp("10.96.0.40", 80),
        "UDP to service without slices": cli.udp("10.96.0.40", 53),
        "TCP to service with empty slice": cli.tcp("10.96.0.41", 80),
        "TCP to unknown port 81 of live ClusterIP": cli.tcp("10.96.0.42", 81),
        "UDP to unknown port 81 of live ClusterIP": cli.udp("10.96.0.42", 81),
        "UDP to port 80 (TCP-only) of live ClusterIP": cli.udp("10.96.0.42", 80),
    }
    print(results)
    bad = {k: v for k, v in results.items() if v != "ERR:ECONNREFUSED"}
    assert not bad, f"expected ECONNREFUSED, got {bad}"

    for fam in ("ip", "ip6"):
        table = lab.table(fam)
        assert table, f"table {fam} kube-proxy missing"
        for name in ("headless-svc", "extname-svc", "otherproxy-svc", "emptyproxy-svc"):
            assert name not in table, f"{name} must get no rules, but table {fam} mentions it"
    assert "10.96.0.43" not in lab.table("ip") and "10.96.0.44" not in lab.table("ip")
    # the other proxy's service is not ours: no rule answers it, nothing forwards it anywhere
    assert cli.tcp("10.96.0.43", 80, timeout=0.5).startswith("ERR:")
    assert cli.tcp("10.96.0.44", 80, timeout=0.5).startswith("ERR:")


def test_endpoint_conditions_choose_ready_then_serving_terminating_endpoints(lab):
    client = lab.add_pod("client")
    e1, e2, e3, e4 = lab.add_backends(4, tcp=[8080], udp=[])
    term = {"ready": False, "serving": True, "terminating": True}
    m = lab.manifests
    m.write("node.yaml", node_object())
    objs = []
    for name, ip, eps in (
            ("term-only", "10.96.0.50", [{"ip": e1.v4, "conditions": term},
                                         {"ip": e2.v4, "conditions": term}]),
            ("mixed", "10.96.0.51", [{"ip": e1.v4, "conditions": term},
                                     {"ip": e2.v4, "conditions": term}, e3.v4]),
            ("ready-missing", "10.96.0.52", [{"ip": e4.v4, "conditions": {}}]),
            ("not-serving", "10.96.0.53",
             [{"ip": e1.v4, "conditions": {"ready": False, "serving": False, "terminating": True}}]),
    ):
        objs += [service(name, [("http", 80, "TCP", 8080)], [ip]),
                 endpoint_slice(name, eps, [("http", 8080, "TCP")])]
    m.write("conditions.yaml", objs)
    lab.start_daemon()
    cli = lab.agent(client)

    own, _, errs = answers(cli.many("tcp", "10.96.0.50", 80, 30))
    print("term-only:", own, errs)
    assert not errs and set(own) == {e1.v4, e2.v4}, \
        f"only serving+terminating endpoints: both must be used as fallback, got {own} {errs}"

    own, _, errs = answers(cli.many("tcp", "10.96.0.51", 80, 30))
    print("mixed:", own, errs)
    assert not errs and set(own) == {e3.v4}, \
        f"a ready endpoint exists: only it may get traffic, got {own} {errs}"

    own, _, errs = answers(cli.many("tcp", "10.96.0.52", 80, 5))
    assert not errs and set(own) == {e4.v4}, f"conditions without `ready` mean ready: {own} {errs}"

    assert cli.tcp("10.96.0.53", 80) == "ERR:ECONNREFUSED", \
        "ready=false serving=false endpoints are not usable: the service has no endpoints"

"""Failure isolation with the real kernel (issue 11 defect 5): only the families the kernel runs
nftables for are programmed (a dry-run check at start, an op of the libnftables helper), and an
outside element holding one service's key in our dispatch map never holds up the others.

With the table monitor (defect 6) every outside write to our tables is repaired by a sync planned
against a listing of the kernel, so a conflict inside our tables never reaches the kernel as a
refused transaction here: the refusal path itself (bisection over services, the refused one left
out and retried with backoff) runs against the fake kernel in unit/syncer_test.cc, and against
the real one under a fighting agent in e2e/chaos_scenarios.py."""
import pytest

from netlab import endpoint_slice, expect_answers, node_object, service, sh
from test_60_kube_api import wait_for
from test_75_metrics_health import scrape

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def test_both_families_pass_the_start_up_check_through_the_helper(lab):
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("web.yaml", [service("web", HTTP, ["10.96.5.9"]), endpoint_slice("web", ["10.244.1.9"], HTTP_SLICE)])
    d = lab.start_daemon(["--v=2"])
    d.wait_syncs(1)
    err = d.stderr()
    assert "is not available on this node" not in err and "no nftables family passed" not in err, d.tail()
    assert "10.96.5.9" in lab.table("ip") and "service-ips" in lab.table("ip6")
    # The probe was a dry run: nothing of it is left in the kernel.
    assert "kube-proxy-probe" not in sh(["nft", "list", "tables"], ns=lab.node).stdout
    # What an operator alerts on: services the kernel refuses, and refused transactions.
    text = scrape(lab)
    assert "kubeproxy_nftables_rejected_services 0" in text
    assert "kubeproxy_nftables_service_rejections_total 0" in text
    assert 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"} 0' in text


def test_an_outside_element_on_one_service_key_never_holds_up_the_others(lab):
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [a.v4], HTTP_SLICE)])
    d = lab.start_daemon(["--v=2"])
    cli = lab.agent(client)
    expect_answers(cli, "10.96.5.1", 80, {a.v4}, {client.v4}, n=2, what="keep before")

    # Someone else puts a verdict for the next service's address into our dispatch map: our
    # element for that key would be refused (File exists) if the repair did not remove it.
    sh(["nft", "add", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.5.2 . tcp . 80 : drop }"], ns=lab.node)
    with d.change():
        m.write("bad.yaml", [service("bad", HTTP, ["10.96.5.2"]), endpoint_slice("bad", [b.v4], HTTP_SLICE)])
        m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [b.v4], HTTP_SLICE)])
    expect_answers(cli, "10.96.5.1", 80, {b.v4}, {client.v4}, n=2, what="keep, changed beside the contested key")
    wait_for(lambda: cli.tcp("10.96.5.2", 80, timeout=0.5) == f"{b.v4} {client.v4}", 30, "bad programmed")
    assert "10.96.5.2 . tcp . 80 : drop" not in lab.table("ip"), "the outside element was not repaired away"
    assert not d.failed_syncs(), d.failed_syncs()

    # Later changes keep landing.
    with d.change():
        m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [a.v4], HTTP_SLICE)])
    expect_answers(cli, "10.96.5.1", 80, {a.v4}, {client.v4}, n=2, what="keep, changed again")


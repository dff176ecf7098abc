"""Failure isolation with the real kernel (issue 11 defect 5): when the kernel refuses one
service's rules, the daemon finds that service by bisection (kernel checks that apply nothing),
programs everything else at once, and retries the refused one with backoff."""
import pytest

from netlab import endpoint_slice, expect_answers, expect_dropped, node_object, service, sh
from test_60_kube_api import wait_for

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def test_a_service_the_kernel_refuses_is_left_out_and_the_others_keep_updating(lab):
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [a.v4], HTTP_SLICE)])
    d = lab.start_daemon(["--v=2"])
    cli = lab.agent(client)
    expect_answers(cli, "10.96.5.1", 80, {a.v4}, {client.v4}, n=2, what="keep before")

    # Someone else puts a verdict for the next service's address into our dispatch map: the
    # kernel refuses our element for that key ("File exists"), and only that one.
    sh(["nft", "add", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.5.2 . tcp . 80 : drop }"], ns=lab.node)
    with d.change():
        m.write("bad.yaml", [service("bad", HTTP, ["10.96.5.2"]), endpoint_slice("bad", [b.v4], HTTP_SLICE)])
        m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [b.v4], HTTP_SLICE)])
    expect_answers(cli, "10.96.5.1", 80, {b.v4}, {client.v4}, n=2, what="keep, changed beside the refused service")
    # The outside element is also outside damage: the table monitor (defect 6) has the next
    # sync verify against the kernel, which removes it, and the refused service's retry lands.
    wait_for(lambda: cli.tcp("10.96.5.2", 80, timeout=0.5) == f"{b.v4} {client.v4}", 30, "bad programmed")
    assert not d.failed_syncs(), d.failed_syncs()

    # Later changes keep landing.
    with d.change():
        m.write("keep.yaml", [service("keep", HTTP, ["10.96.5.1"]), endpoint_slice("keep", [a.v4], HTTP_SLICE)])
    expect_answers(cli, "10.96.5.1", 80, {a.v4}, {client.v4}, n=2, what="keep, changed again")

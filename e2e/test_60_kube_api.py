"""The daemon against a real (test) Kubernetes API server over HTTPS: objects created, replaced and
deleted with kubectl become rules; the API server restarts, expires history (410), rotates tokens,
fails and presents a certificate from the wrong CA. Real packets from a client pod decide every
outcome; the server's request log shows what the daemon asked for."""
import os
import re
import time

import pytest

from apiserver_lab import ApiServer, CLIENT_CN
from netlab import (LabError, NODE_NAME, answers, endpoint_slice, expect_answers, expect_dropped, node_object,
                    service, service_cidr, trigger_time)

pytestmark = pytest.mark.usefixtures("daemon_bin")

HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def web(name, ip, eps):
    return [service(name, HTTP, [ip]), endpoint_slice(name, [p.v4 for p in eps], HTTP_SLICE)]


def start_with_kubeconfig(lab, api, kubeconfig=None, extra=()):
    kc = kubeconfig or api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"), token_file=True)
    return lab.start_daemon([f"--kubeconfig={kc}", *extra], manifests=False)


def who_answers(agent, ip, n=24):
    own, peers, errs = answers(agent.many("tcp", ip, 80, n, timeout=1.0))
    return set(own), errs


def daemon_requests(api, since=0):
    """The daemon's requests (kubectl uses the admin token and is left out)."""
    return [r for r in api.requests(since) if r.get("ua", "").startswith("kube-proxy-nft")]


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def test_kubectl_created_service_is_reachable_and_endpoint_changes_follow(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    api.create([node_object()])
    d = start_with_kubeconfig(lab, api)
    cli = lab.agent(client)

    with d.change():
        api.create(web("web", "10.96.0.10", [a]))
    assert who_answers(cli, "10.96.0.10") == ({a.v4}, [])

    # The EndpointSlice controller stamps when the change that triggered it happened; the daemon
    # reports the latency from there to the commit (upstream's network programming latency).
    both = endpoint_slice("web", [a.v4, b.v4], HTTP_SLICE)
    both["metadata"]["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time": trigger_time(time.time())}
    with d.change():
        api.replace([both])
    assert who_answers(cli, "10.96.0.10") == ({a.v4, b.v4}, [])
    m = re.search(r"network programming: 1 services, max latency ([0-9.]+) ms since trigger", d.stderr())
    assert m and float(m.group(1)) < 60_000, d.stderr()[-2000:]

    with d.change():
        api.replace([endpoint_slice("web", [b.v4], HTTP_SLICE)])
    assert who_answers(cli, "10.96.0.10") == ({b.v4}, [])

    # Restarted: it lists, reconciles with its own table and finds nothing to change.
    first = d
    first.stop()
    assert first.proc.returncode == 0, first.tail()
    d = start_with_kubeconfig(lab, api)
    assert d.syncs()[0]["ops"] == 0, d.syncs()
    assert who_answers(cli, "10.96.0.10") == ({b.v4}, [])

    with d.change():
        api.delete(web("web", "10.96.0.10", []))
    assert "10.96.0.10" not in lab.table()
    assert all(s["full"] == 0 for s in d.syncs()[1:]), d.syncs()

    # What it asked: the informers' requests, with upstream's selectors, a user agent and the token.
    reqs = daemon_requests(api)
    lists = [r for r in reqs if not r["watch"] and r["method"] == "GET"]
    by_path = {r["path"].split("?")[0]: r["path"] for r in lists}
    # Besides the informers' requests, upstream's Starting event on the Node, once per start (issue 28).
    assert {(r["method"], r["path"]) for r in reqs if r["method"] != "GET"} == \
        {("POST", "/apis/events.k8s.io/v1/namespaces/default/events")}, reqs
    assert {e["reason"] for e in api.events()} == {"Starting"}, api.events()
    assert set(by_path) == {"/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices", "/api/v1/nodes",
                            "/apis/networking.k8s.io/v1/servicecidrs"}, lists
    for path in ("/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices"):
        q = by_path[path]
        assert "resourceVersion=0" in q and "limit=500" in q, q
        assert "labelSelector=%21service.kubernetes.io%2Fservice-proxy-name%2C%21service.kubernetes.io%2Fheadless" in q, q
    assert f"fieldSelector=metadata.name%3D{NODE_NAME}" in by_path["/api/v1/nodes"]
    watches = [r for r in reqs if r["watch"]]
    assert len(watches) >= 4 and all("allowWatchBookmarks=true" in r["path"] for r in watches), watches
    assert all(r["auth"] == "token" and r["token"] == api.token for r in reqs), reqs[:3]

    # SIGTERM with four watches open: a clean exit, the table left in place.
    table = lab.table()
    d.stop()
    assert d.proc.returncode == 0, d.tail()
    assert "exiting with the ruleset in place" in d.stderr()
    assert lab.table() == table


def test_apiserver_restarts_mid_watch_the_daemon_resumes_without_relist_failures_or_full_sync(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    s1, s2 = lab.add_backends(2, tcp=[8080], udp=[], name="steady")
    c1, c2 = lab.add_backends(2, tcp=[8080], udp=[], name="churn")
    api.create([node_object()] + web("steady", "10.96.1.1", [s1, s2]) + web("churn", "10.96.1.2", [c1]))
    d = start_with_kubeconfig(lab, api)
    cli = lab.agent(client)
    probe = lab.agent(client)
    assert who_answers(probe, "10.96.1.2") == ({c1.v4}, [])
    api.wait_watches(4)

    cli.loop_start("10.96.1.1", 80)
    try:
        for kill, eps in ((False, [c1, c2]), (True, [c2])):
            mark = api.mark()
            before = len(d.syncs())
            api.restart(kill=kill)  # SIGTERM ends watches cleanly; SIGKILL resets them
            api.wait_watches(4, timeout=20)
            with d.change():
                api.replace([endpoint_slice("churn", [p.v4 for p in eps], HTTP_SLICE)])
            assert who_answers(probe, "10.96.1.2") == ({p.v4 for p in eps}, [])
            reqs = daemon_requests(api, mark)
            assert not [r for r in reqs if not r["watch"]], f"relisted after a restart (kill={kill}): {reqs}"
            resumed = [re.search(r"resourceVersion=(\d+)", r["path"]) for r in reqs if r["watch"]]
            assert resumed and all(m and int(m.group(1)) > 100 for m in resumed), reqs
            after = d.syncs()[before:]
            assert after and all(s["full"] == 0 for s in after), f"kill={kill}: {after}"
    finally:
        st = cli.loop_stop()
    print(f"20 ms loop through two restarts: {st['attempts']} attempts, failures {st['failures'][:5]}")
    assert st["failures"] == [], st["failures"][:20]
    assert st["attempts"] > 50


def test_forced_410_relists_and_a_service_deleted_meanwhile_is_gone(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    a, b, c = lab.add_backends(3, tcp=[8080], udp=[])
    api.create([node_object()] + web("keep", "10.96.2.1", [a]) + web("doomed", "10.96.2.2", [b]))
    d = start_with_kubeconfig(lab, api)
    cli = lab.agent(client)
    assert who_answers(cli, "10.96.2.2") == ({b.v4}, [])
    api.wait_watches(4)

    # Outage: the daemon's watches fail (503) while the cluster changes, then history expires.
    mark = api.mark()
    api.fail(503, count=100000, match="allowWatchBookmarks=true")
    api.disconnect()
    api.delete(web("doomed", "10.96.2.2", []), wait=False)
    api.replace([endpoint_slice("keep", [c.v4], HTTP_SLICE)])
    api.expire()
    before = len(d.syncs())
    api.fail(503, count=0)

    # It tries to resume, learns 410, relists with a consistent read, and applies the difference.
    # Each reflector learns it on its own retry schedule: wait for both relists.
    for path in ("/api/v1/services?", "/apis/discovery.k8s.io/v1/endpointslices?"):
        api.wait_request(lambda r: r.get("ua", "").startswith("kube-proxy-nft") and not r["watch"] and r["status"] == 200
                         and r["path"].startswith(path) and "resourceVersion=0" not in r["path"],
                         since=mark, timeout=30)
    d.wait_syncs(before + 1, timeout=20)
    d.settle(quiet=0.5)
    assert who_answers(cli, "10.96.2.1") == ({c.v4}, [])
    own, errs = who_answers(cli, "10.96.2.2", n=4)
    assert own == set() and len(errs) == 4, (own, errs)
    assert "10.96.2.2" not in lab.table() and "doomed" not in lab.table()
    gone = [r for r in daemon_requests(api, mark) if r["status"] == 410 or "410" in str(r.get("note", ""))]
    assert "too old" in d.stderr() or gone, api.summary(mark)
    assert all(s["full"] == 0 for s in d.syncs()[1:])


def test_rotated_token_old_one_rejected_the_daemon_recovers_on_its_own(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.3.1", [a]))
    d = start_with_kubeconfig(lab, api)  # tokenFile: the file rotate_token rewrites
    cli = lab.agent(client)
    api.wait_watches(4)
    old = api.token
    mark = api.mark()
    new = api.rotate_token()
    api.disconnect()  # new requests must authenticate again; the old token is revoked
    api.wait_request(lambda r: r["watch"] and r["status"] == 200 and r.get("token") == new, since=mark, timeout=20)
    reqs = daemon_requests(api, mark)
    assert any(r["status"] == 401 and r.get("token") == old for r in reqs), api.summary(mark)
    with d.change():
        api.replace([endpoint_slice("web", [b.v4], HTTP_SLICE)])
    assert who_answers(cli, "10.96.3.1") == ({b.v4}, [])
    assert "reading the credentials again" in d.stderr()


def test_wrong_ca_the_daemon_refuses_says_why_and_keeps_the_existing_table(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.4.1", [a]))
    d = start_with_kubeconfig(lab, api)
    cli = lab.agent(client)
    assert who_answers(cli, "10.96.4.1") == ({a.v4}, [])
    d.stop()
    before = lab.table()

    bad = lab.daemon([f"--kubeconfig={api.kubeconfig_wrong_ca(os.path.join(lab.tmp, 'wrong-ca.kubeconfig'))}"],
                     manifests=False, label="wrong-ca").start()
    wait_for(lambda: "is not trusted by the CA in file" in bad.stderr(), 20, "the TLS diagnosis in the log")
    time.sleep(1.5)  # a retry or two later
    assert bad.alive()
    line = next(l for l in bad.stderr().splitlines() if "is not trusted by the CA in file" in l)
    print(line)
    assert "wrong-ca.crt" in line and "TLS handshake failed" in line
    assert bad.syncs() == []
    assert lab.table() == before
    assert who_answers(cli, "10.96.4.1") == ({a.v4}, [])


@pytest.mark.parametrize("inline", [False, True], ids=["files", "inline-data"])
def test_kubeconfig_with_client_certificate_works(lab, inline):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.5.1", [a]))
    kc = api.kubeconfig_client_cert(os.path.join(lab.tmp, "cert.kubeconfig"), inline_data=inline)
    start_with_kubeconfig(lab, api, kubeconfig=kc)
    assert who_answers(lab.agent(client), "10.96.5.1") == ({a.v4}, [])
    reqs = daemon_requests(api)
    assert reqs and all(r["auth"] == "cert" and r.get("cn") == CLIENT_CN and not r.get("token") for r in reqs), reqs[:3]


@pytest.mark.parametrize("bind", ["127.0.0.1", "::1"], ids=["ipv4", "ipv6-bracketed"])
def test_in_cluster_environment_works(lab, bind):
    api = ApiServer(lab, bind=bind)  # KUBERNETES_SERVICE_HOST=::1 must become https://[::1]:port
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.6.1", [a]))
    env, sa_dir = api.incluster_env()
    lab.start_daemon([f"--service-account-dir={sa_dir}"], manifests=False, env=env)
    assert who_answers(lab.agent(client), "10.96.6.1") == ({a.v4}, [])
    reqs = daemon_requests(api)
    assert reqs and all(r["auth"] == "token" and r["token"] == api.token for r in reqs)


def test_bad_input_invalid_objects_skipped_errors_backed_off_nothing_synced_half_known(lab):
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    bad = service("bad", [("http", 80, "TCP", 8080)], ["10.96.7.2"])
    bad["spec"]["ports"][0]["protocol"] = "ICMP"
    api.create([node_object()] + web("good", "10.96.7.1", [a]) + [bad])
    # The first lists fail: 500s, then a 429 with Retry-After; the slices list works at once.
    api.fail(500, count=2, match="/api/v1/services?")
    d = lab.daemon([f"--kubeconfig={api.kubeconfig_token(os.path.join(lab.tmp, 'kc'))}"], manifests=False).start()
    wait_for(lambda: any(r["status"] == 500 for r in daemon_requests(api)), 15, "the first failed list")
    assert d.syncs() == [] and lab.table() == ""  # nothing synced while Services are unknown
    d.wait_syncs(1, timeout=30)
    assert who_answers(lab.agent(client), "10.96.7.1") == ({a.v4}, [])
    err = d.stderr()
    assert re.search(r"skipping invalid object.*Service default/bad", err), err[-3000:]
    assert "HTTP 500" in err
    assert "10.96.7.2" not in lab.table()
    statuses = [r["status"] for r in daemon_requests(api) if r["path"].startswith("/api/v1/services?") and not r["watch"]]
    assert statuses == [500, 500, 200], statuses


def test_service_cidrs_from_the_api_server_drop_unallocated_addresses(lab):
    """The fourth reflector: a ServiceCIDR created with kubectl makes its unallocated addresses
    drop; deleting it passes them on again (a witness behind the node answers what passes)."""
    api = ApiServer(lab)
    pod = lab.add_pod("pod")
    (ep,) = lab.add_backends(1, tcp=[80], udp=[])
    lab.add_upstream_witness(["10.96.200.99"], tcp=[80])
    api.create([node_object(), service("svc1", [("p80", 80, "TCP", 80)], ["10.96.0.41"]),
                endpoint_slice("svc1", [ep.v4], [("p80", 80, "TCP")])])
    d = start_with_kubeconfig(lab, api)
    cli = lab.agent(pod)
    expect_answers(cli, "10.96.200.99", 80, {"10.96.200.99"}, {pod.v4}, n=2, what="no ServiceCIDR yet")
    cidr = service_cidr("kubernetes", ["10.96.0.0/16"])
    with d.change():
        api.create([cidr])
    expect_dropped(cli, "10.96.200.99", 80, what="unallocated, inside the ServiceCIDR")
    expect_answers(cli, "10.96.0.41", 80, {ep.v4}, {pod.v4}, n=2, what="an allocated ClusterIP")
    with d.change():
        api.delete([cidr])
    expect_answers(cli, "10.96.200.99", 80, {"10.96.200.99"}, {pod.v4}, n=2, what="ServiceCIDR deleted")
    lists = [r["path"] for r in daemon_requests(api) if not r["watch"]]
    assert any(p.startswith("/apis/networking.k8s.io/v1/servicecidrs?") for p in lists), lists


def test_403_on_nodes_still_programs_services_and_the_node_refines_later(lab):
    """Issue 11 defect 7: custom RBAC without nodes access. Upstream's first sync waits for
    Services and EndpointSlices only; the Node arrives when the server lets it."""
    api = ApiServer(lab)
    client = lab.add_pod("client")
    (a,) = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object()] + web("web", "10.96.3.1", [a]))
    api.fail(403, count=100000, match="/api/v1/nodes")
    d = start_with_kubeconfig(lab, api)
    wait_for(lambda: any(r["status"] == 403 and r["path"].startswith("/api/v1/nodes")
                         for r in daemon_requests(api)), 15, "a 403 on the nodes list")
    assert who_answers(lab.agent(client), "10.96.3.1") == ({a.v4}, [])
    err = d.stderr()
    assert "403 Forbidden" in err, err[-3000:]
    assert re.search(r"syncing before Nodes(, ServiceCIDRs)? listed", err), err[-3000:]
    # The permission is granted: the Node lists and refines the ruleset; the service keeps working.
    api.fail(403, count=0)
    wait_for(lambda: "Nodes listed from" in d.stderr(), 45, "the Node listed once allowed")
    assert who_answers(lab.agent(client), "10.96.3.1") == ({a.v4}, [])

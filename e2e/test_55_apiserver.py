"""Self-tests of the test Kubernetes API server (kube_apiserver.py + apiserver_lab.py): raw
HTTPS requests, watches read chunk by chunk, and kubectl. No daemon needed."""
import gzip
import json
import os
import ssl
import time

import pytest

from apiserver_lab import ApiServer, RawWatch
from netlab import endpoint_slice, node_object, service

SVC = "/api/v1/services"
SEL = "labelSelector=!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"


@pytest.fixture
def api():
    a = ApiServer(None, bookmark_interval=30)
    try:
        yield a
    finally:
        a.close()


def svc(name, ip, labels=None, ns="default"):
    return service(name, [("http", 80, "TCP", 8080)], [ip], namespace=ns, labels=labels)


def names(items):
    return [o["metadata"]["name"] for o in items]


def evs(events):
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_discovery_auth_tokens_and_certificates(api):
    st, _, body = api.http("GET", "/version")
    assert st == 200 and body["major"] == "1"
    assert api.http("GET", "/api")[2]["versions"] == ["v1"]
    groups = {g["name"] for g in api.http("GET", "/apis")[2]["groups"]}
    assert {"discovery.k8s.io", "networking.k8s.io"} <= groups
    res = {r["name"] for r in api.http("GET", "/apis/discovery.k8s.io/v1")[2]["resources"]}
    assert "endpointslices" in res
    assert "servicecidrs" in {r["name"] for r in
                              api.http("GET", "/apis/networking.k8s.io/v1")[2]["resources"]}

    st, _, body = api.http("GET", SVC, token=False)
    assert st == 401 and body["kind"] == "Status" and body["code"] == 401
    assert api.http("GET", SVC, token="nope")[0] == 401
    assert api.http("GET", SVC)[0] == 200

    # rotation: the tokens file is re-read on every request
    old = api.token
    new = api.rotate_token()
    assert api.http("GET", SVC, token=old)[0] == 401
    assert api.http("GET", SVC, token=new)[0] == 200
    with open(api.token_file) as f:
        assert f.read().strip() == new

    # a verified client certificate authenticates without a token
    assert api.http("GET", SVC, token=False, client_cert=True)[0] == 200
    log = api.requests()
    assert [(r["auth"], r.get("token"), r["status"]) for r in log[:7]] == [
        ("token", old, 200), ("token", old, 200), ("token", old, 200), ("token", old, 200),
        ("token", old, 200), ("none", None, 401), ("none", "nope", 401)]
    assert [(r["auth"], r.get("token"), r["status"]) for r in log[-4:-1]] == [
        ("token", old, 200), ("none", old, 401), ("token", new, 200)]
    cert_req = log[-1]
    assert (cert_req["auth"], cert_req["cn"], cert_req["groups"]) == \
           ("cert", "system:kube-proxy", ["system:node-proxier"])

    # a client trusting another CA refuses the server; the server refuses a foreign client cert
    wrong = ssl.create_default_context(cafile=os.path.join(api.pki, "wrong-ca.crt"))
    with pytest.raises(ssl.SSLCertVerificationError):
        api.http("GET", SVC, ctx=wrong)
    foreign = api.ssl_context()
    foreign.load_cert_chain(os.path.join(api.pki, "wrong-client.crt"),
                            os.path.join(api.pki, "wrong-client.key"))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        api.http("GET", SVC, ctx=foreign, token=False)


def test_crud_conflicts_and_defaults(api):
    body = svc("web", "10.96.0.5")
    st, _, created = api.http("POST", "/api/v1/namespaces/default/services", body)
    assert st == 201
    md = created["metadata"]
    assert md["resourceVersion"] != "4711" and md["uid"] and md["creationTimestamp"].endswith("Z")
    st, _, err = api.http("POST", "/api/v1/namespaces/default/services", body)
    assert (st, err["reason"]) == (409, "AlreadyExists")

    path = "/api/v1/namespaces/default/services/web"
    stale = dict(created, metadata=dict(md, resourceVersion="1"))
    st, _, err = api.http("PUT", path, stale)
    assert (st, err["reason"]) == (409, "Conflict")
    st, _, same = api.http("PUT", path, created)  # a no-op update keeps the resourceVersion
    assert st == 200 and same["metadata"]["resourceVersion"] == md["resourceVersion"]
    changed = dict(created, spec=dict(created["spec"], sessionAffinity="ClientIP"))
    st, _, upd = api.http("PUT", path, changed)
    assert st == 200 and int(upd["metadata"]["resourceVersion"]) > int(md["resourceVersion"])
    assert upd["metadata"]["uid"] == md["uid"] and upd["metadata"]["generation"] == 2
    assert api.http("PUT", "/api/v1/namespaces/default/services/nope",
                    svc("nope", "10.96.0.9"))[0] == 404
    assert api.http("GET", path)[2]["spec"]["sessionAffinity"] == "ClientIP"

    st, _, gone = api.http("DELETE", path)
    assert st == 200 and int(gone["metadata"]["resourceVersion"]) > \
        int(upd["metadata"]["resourceVersion"])
    assert api.http("GET", path)[0] == 404
    assert api.http("DELETE", path)[0] == 404

    # a Service without a clusterIP gets one (and defaults)
    bare = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bare"},
            "spec": {"ports": [{"port": 53, "protocol": "UDP"}]}}
    st, _, b = api.http("POST", "/api/v1/namespaces/default/services", bare)
    assert st == 201 and b["spec"]["clusterIP"].startswith("10.96.") and \
        b["spec"]["ports"][0]["targetPort"] == 53


def test_list_paging_and_rv0(api):
    api.put([svc(f"s{i}", f"10.96.1.{i}") for i in range(7)])
    st, _, p1 = api.http("GET", SVC + "?limit=3")
    assert names(p1["items"]) == ["s0", "s1", "s2"] and p1["metadata"]["continue"]
    assert p1["metadata"]["remainingItemCount"] == 4
    api.remove([svc("s5", "")])  # the pages stay a snapshot at the first page's RV
    st, _, p2 = api.http("GET", SVC + f"?limit=3&continue={p1['metadata']['continue']}")
    st, _, p3 = api.http("GET", SVC + f"?limit=3&continue={p2['metadata']['continue']}")
    assert names(p2["items"] + p3["items"]) == ["s3", "s4", "s5", "s6"]
    assert "continue" not in p3["metadata"]
    assert p3["metadata"]["resourceVersion"] == p1["metadata"]["resourceVersion"]

    # a large response is gzipped for a client that accepts it
    api.put([svc(f"big{i}", f"10.96.3.{i}") for i in range(250)])
    st, hdr, raw = api.http("GET", SVC, headers={"Accept-Encoding": "gzip"})
    assert st == 200 and hdr.get("content-encoding") == "gzip"
    assert len(json.loads(gzip.decompress(raw))["items"]) == 256
    assert "content-encoding" not in api.http("GET", SVC)[1]
    api.remove([svc(f"big{i}", "") for i in range(250)])

    # resourceVersion=0 is served from the "watch cache": no paging unless page_rv0
    st, _, all0 = api.http("GET", SVC + "?limit=2&resourceVersion=0")
    assert len(all0["items"]) == 6 and "continue" not in all0["metadata"]
    api.page_rv0(True)
    assert len(api.http("GET", SVC + "?limit=2&resourceVersion=0")[2]["items"]) == 2
    api.page_rv0(False)
    api.set_page_size(4)  # pages even without limit
    st, _, q = api.http("GET", SVC)
    assert len(q["items"]) == 4 and q["metadata"]["continue"]

    # an expired snapshot: 410 for the continue token
    api.expire()
    st, _, err = api.http("GET", SVC + f"?continue={q['metadata']['continue']}")
    assert (st, err["code"], err["reason"]) == (410, 410, "Expired")


def test_watch_resume_after_restart_and_kill9(api):
    api.put([svc("a", "10.96.0.1"), svc("b", "10.96.0.2")])
    st, _, lst = api.http("GET", SVC + "?resourceVersion=0&" + SEL)
    rv = lst["metadata"]["resourceVersion"]
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&{SEL}")
    assert w.status == 200 and w.headers["transfer-encoding"] == "chunked"
    api.put([svc("c", "10.96.0.3")])
    api.remove([svc("a", "")])
    got = w.events(2)
    assert evs(got) == [("ADDED", "c"), ("DELETED", "a")]
    last = got[-1]["object"]["metadata"]["resourceVersion"]

    api.restart()  # SIGTERM: the watch ends with its terminating chunk
    assert w.next_event(timeout=5) is None and w.ended
    w.close()
    st, _, lst2 = api.http("GET", SVC)
    assert lst2["metadata"]["resourceVersion"] == last and names(lst2["items"]) == ["b", "c"]

    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={last}&allowWatchBookmarks=true&{SEL}")
    api.put([svc("d", "10.96.0.4")])
    got = w.events(1)
    assert evs(got) == [("ADDED", "d")]  # nothing replayed from before `last`, no 410
    w.close()

    # after SIGKILL too (the journal): resume from an older RV replays exactly what followed it
    api.put([dict(svc("b", "10.96.0.2"), spec=dict(svc("b", "10.96.0.2")["spec"],
                                                    sessionAffinity="ClientIP"))])
    api.restart(kill=True)
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={last}")
    assert evs(w.events(2)) == [("ADDED", "d"), ("MODIFIED", "b")]
    w.close()
    # "" / "0": synthetic ADDED of the current state first
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion=0")
    assert sorted(evs(w.events(3))) == [("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d")]
    w.close()
    # a streaming list (sendInitialEvents): ADDED..., then the initial-events-end bookmark
    w = RawWatch(api, f"{SVC}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                      f"&resourceVersionMatch=NotOlderThan")
    got = w.events(4, skip_bookmarks=False)
    assert [e["type"] for e in got] == ["ADDED"] * 3 + ["BOOKMARK"]
    assert got[3]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    w.close()


def test_watch_expired_gives_410(api):
    api.put([svc("a", "10.96.0.1")])
    rv = api.resource_version()
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}")
    api.wait_watches(1)
    api.expire()
    e = w.next_event()
    assert e["type"] == "ERROR" and e["object"]["code"] == 410 and \
        e["object"]["reason"] == "Expired"
    assert w.next_event() is None and w.ended
    w.close()
    # resuming from the old RV: 200 + ERROR 410 event, or HTTP 410 with the knob
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}")
    assert w.status == 200 and w.next_event()["object"]["code"] == 410
    w.close()
    api.set(watch_expired_http=True)
    st, _, body = api.http("GET", f"{SVC}?watch=true&resourceVersion={rv}")
    assert st == 410 and body["reason"] == "Expired"
    # a restart keeps the expiry
    api.restart()
    assert api.http("GET", f"{SVC}?watch=true&resourceVersion={rv}&timeoutSeconds=1")[0] == 200
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}")
    assert w.next_event()["type"] == "ERROR"
    w.close()
    assert [r["status"] for r in api.requests() if "watch=true" in r["path"]][:4] == \
        [200, 200, 410, 200]


def test_bookmarks_chunk_split_and_timeout(api):
    api.set(chunk_split=1.0, bookmark_interval=0.2)
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion=&allowWatchBookmarks=true"
                      f"&timeoutSeconds=2")
    api.put([svc(f"s{i}", f"10.96.2.{i}") for i in range(20)])
    rv = api.resource_version()
    got = w.events(20)
    assert sorted(evs(got)) == sorted(("ADDED", f"s{i}") for i in range(20))
    # events really were split across chunks (a chunk ending mid-line)
    assert any(not c.endswith(b"\n") for c in w.chunks), w.chunks[:5]
    bm = w.next_event()
    assert bm["type"] == "BOOKMARK" and bm["object"]["metadata"]["resourceVersion"] == rv
    assert set(bm["object"]) == {"kind", "apiVersion", "metadata"}
    # timeoutSeconds: a clean end with the terminating chunk
    rest = w.events(timeout=5, skip_bookmarks=True)
    assert rest == [] and w.ended and not w.reset
    w.close()

    # on-demand bookmarks only go to watches that allow them
    api.set(bookmark_interval=30)
    w1 = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true")
    w2 = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}")
    api.wait_watches(2)
    assert api.bookmark() == rv
    assert w1.next_event()["type"] == "BOOKMARK"
    with pytest.raises(TimeoutError):
        w2.next_event(timeout=0.3)
    w1.close()
    w2.close()


def test_selectors_in_list_and_watch(api):
    proxy = "service.kubernetes.io/service-proxy-name"
    api.put([svc("mine", "10.96.0.1"), svc("other", "10.96.0.2", {proxy: "x"}),
             svc("hl", "10.96.0.3", {"service.kubernetes.io/headless": ""}),
             svc("kube", "10.96.0.4", {"app": "a"}, ns="kube-system"), node_object("node1"),
             node_object("node2")])
    assert names(api.http("GET", f"{SVC}?{SEL}")[2]["items"]) == ["mine", "kube"]
    assert names(api.http("GET", "/api/v1/namespaces/kube-system/services")[2]["items"]) == ["kube"]
    assert names(api.http("GET", f"{SVC}?labelSelector=app%3Da")[2]["items"]) == ["kube"]
    assert names(api.http("GET", f"{SVC}?labelSelector=app!%3Da,{proxy}")[2]["items"]) == ["other"]
    assert names(api.http("GET", f"{SVC}?labelSelector=app+in+(a,b)")[2]["items"]) == ["kube"]
    assert names(api.http("GET", f"{SVC}?fieldSelector=metadata.namespace%3Ddefault,"
                                 f"metadata.name!%3Dhl")[2]["items"]) == ["mine", "other"]
    assert api.http("GET", f"{SVC}?fieldSelector=spec.bogus%3D1")[0] == 400
    st, _, nodes = api.http("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dnode2")
    assert names(nodes["items"]) == ["node2"]

    rv = api.resource_version()
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion={rv}&{SEL}")
    nw = RawWatch(api, f"/api/v1/nodes?watch=true&resourceVersion={rv}"
                       f"&fieldSelector=metadata.name%3Dnode1")
    api.wait_watches(2)
    api.put([svc("mine", "10.96.0.1", {proxy: "y"})])   # leaves the selector: DELETED
    api.put([svc("other", "10.96.0.2")])                # enters it: ADDED
    api.put([svc("other", "10.96.0.2", {"x": "1"})])     # stays: MODIFIED
    api.put([svc("hl", "10.96.0.3", {"service.kubernetes.io/headless": "", "x": "1"})])  # never
    api.remove([svc("other", "")])
    n2 = node_object("node2")
    n2["metadata"]["labels"]["x"] = "1"
    n1 = node_object("node1")
    n1["metadata"]["labels"]["x"] = "1"
    api.put([n2, n1])
    got = w.events(4)
    assert evs(got) == [("DELETED", "mine"), ("ADDED", "other"), ("MODIFIED", "other"),
                        ("DELETED", "other")]
    assert got[0]["object"]["metadata"]["labels"][proxy] == "y"
    assert evs(nw.events(1)) == [("MODIFIED", "node1")]
    w.close()
    nw.close()


def test_fail_hang_disconnect(api):
    api.fail(429, count=2, retry_after=3)
    st, hdr, body = api.http("GET", SVC)
    assert st == 429 and hdr["retry-after"] == "3" and body["reason"] == "TooManyRequests"
    assert api.http("GET", SVC)[0] == 429
    assert api.http("GET", SVC)[0] == 200
    api.fail(500, count=1, match="endpointslices")
    assert api.http("GET", SVC)[0] == 200
    assert api.http("GET", "/apis/discovery.k8s.io/v1/endpointslices")[0] == 500
    api.hang(0.5, count=1)
    t = time.monotonic()
    assert api.http("GET", SVC)[0] == 200
    assert time.monotonic() - t >= 0.45
    t = time.monotonic()
    assert api.http("GET", SVC)[0] == 200 and time.monotonic() - t < 0.4

    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion=")
    w2 = RawWatch(api, f"{SVC}?watch=true&resourceVersion=")
    api.wait_watches(2)
    assert api.disconnect() == 2
    assert w.next_event() is None and w.reset and not w.ended
    w.close()
    w2.close()
    w = RawWatch(api, f"{SVC}?watch=true&resourceVersion=")
    api.wait_watches(1)
    api.disconnect(midevent=True)  # half an event, then the reset
    assert w.next_event() is None and w.reset and w.chunks[-1].startswith(b'{"type": "BOOKM')
    w.close()
    assert [r["status"] for r in api.requests()][:5] == [429, 429, 200, 200, 500]


def test_plain_http_anonymous():
    with ApiServer(None, tls=False) as a:
        assert a.url.startswith("http://")
        st, _, body = a.http("GET", SVC, token=False)
        assert st == 200 and body["kind"] == "ServiceList"
        assert a.requests()[-1]["auth"] == "anonymous"


def test_kubectl_in_a_lab_namespace(lab):
    api = ApiServer(lab)  # in lab.node; kubectl runs there too
    objs = [svc("web", "10.96.0.10"),
            endpoint_slice("web", ["10.244.0.11"], [("http", 8080, "TCP")]),
            node_object()]
    assert "service/web created" in api.create(objs)  # one multi-document YAML file
    out = api.kubectl("get", "svc", "-A")
    assert "web" in out and "10.96.0.10" in out and "80/TCP" in out
    assert "10.244.0.11" in api.kubectl("get", "endpointslices", "-A")
    objs[1]["endpoints"][0]["addresses"] = ["10.244.0.12"]
    api.replace(objs)
    assert "10.244.0.12" in api.kubectl("get", "endpointslices", "-A")
    cidr = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/16"]}}
    api.apply_objects(objs + [cidr])
    assert "10.96.0.0/16" in api.kubectl("get", "servicecidrs")
    api.delete(objs)
    assert {r for r, _ in api.objects()} == {"namespaces", "servicecidrs"}

    # kubeconfigs the daemon will be given work for kubectl too
    kc = api.kubeconfig_client_cert(os.path.join(lab.tmp, "cert.kubeconfig"), inline_data=True)
    api.kubectl("get", "nodes", kubeconfig=kc)
    assert api.requests()[-1]["auth"] == "cert"
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "tok.kubeconfig"), token_file=True)
    api.kubectl("get", "nodes", kubeconfig=kc)
    assert api.requests()[-1]["token"] == api.token
    bad = api.kubectl("get", "nodes", check=False,
                      kubeconfig=api.kubeconfig_wrong_ca(os.path.join(lab.tmp, "bad")))
    assert bad.returncode != 0 and "certificate" in bad.stderr
    env, sa = api.incluster_env()
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                   "KUBERNETES_SERVICE_PORT": str(api.port)}
    assert sorted(os.listdir(sa)) == ["ca.crt", "namespace", "token"]
    api.stop()
    assert not api.alive()

"""The API-source part of `make bench`: the daemon against the e2e test API server (HTTPS, token
auth, default --kube-api-qps/--kube-api-burst) holding 10k Services + 10k EndpointSlices.

  1. cold start: daemon process start -> first sync committed (the three lists, decoding, the
     sync; the `sync done` line's after_ms, bookkeeping after the commit, is not counted),
     RSS after settling and the peak;
  2. event -> commit: one EndpointSlice replaced in the server's store (an endpoint swapped) ->
     the daemon's `sync done` line, with --min-sync-period=0s.

The server is seeded by writing its snapshot file (20k objects through kubectl would take
minutes); everything after that goes over the wire as in a cluster.
"""
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import gen_state  # noqa: E402
from apiserver_lab import ApiServer  # noqa: E402


def seed_snapshot(state_dir, st):
    """Write the server's snapshot: every service and slice of `st` plus the node, with
    resourceVersions 101.. in order (the server's counter continues after them)."""
    objs = [("nodes", gen_state.node_obj())]
    for name in st.bulk_names + st.probe_names:
        svc, sl = st.objects_for(name)
        objs += [("services", svc), ("endpointslices", sl)]
    rv = 100
    out = []
    for res, o in objs:
        rv += 1
        o["metadata"]["resourceVersion"] = str(rv)
        out.append({"res": res, "obj": o})
    os.makedirs(state_dir, exist_ok=True)
    with open(os.path.join(state_dir, "snapshot.json"), "w") as f:
        json.dump({"rv": rv, "floor": rv, "history": [], "objects": out}, f, separators=(",", ":"))
    return rv


def run_api_phase(b, label, n, e, changes, netns_create, netns_delete, Daemon, say):
    """Fills b.results["api"][label]."""
    res = {"services": n, "endpoints_per_service": e}
    b.results.setdefault("api", {})[label] = res
    st = gen_state.State(n, e, min(30, n))
    ns = netns_create()
    api = ApiServer(None, ns=ns, start=False, chunk_split=0.0, bookmark_interval=30.0)
    d = None
    try:
        t = time.monotonic()
        seed_snapshot(api.state_dir, st)
        api.start()
        say("  seeded and started the test API server with %d objects in %.1f s"
            % (2 * n + 1, time.monotonic() - t))
        kc = api.kubeconfig_token(os.path.join(api.tmp, "daemon.kubeconfig"))
        log = os.path.join(b.logdir, "api-%s.log" % label)
        d = Daemon(b.a.binary, None, ns, log, extra_args=["--kubeconfig=" + kc]).start()
        ev = d.next_sync(b.a.cold_timeout)
        # The rules are in the kernel when the commit returns: the line comes after_ms later.
        res["wall_ms"] = (ev["t"] - d.t_start) * 1000.0 - ev["after_ms"]
        res["after_ms"] = ev["after_ms"]
        res["sync_ms"] = ev["render_ms"] + ev["diff_ms"] + ev["commit_ms"]
        res["commit_ms"] = ev["commit_ms"]
        res["ops"] = ev["ops"]
        time.sleep(b.a.settle)
        d.drain()
        res["rss_mib"] = d.status_kib("VmRSS") / 1024.0
        res["hwm_mib"] = d.status_kib("VmHWM") / 1024.0
        say("  cold: start -> committed %.0f ms (sync %.0f ms, %d ops); RSS %.1f MiB, peak %.1f MiB"
            % (res["wall_ms"], res["sync_ms"], res["ops"], res["rss_mib"], res["hwm_mib"]))

        rnd = random.Random(7)
        lat, commits, timeouts = [], [], 0
        for i in range(changes):
            name = rnd.choice(st.probe_names)
            s = st.services[name]
            s["eps"][rnd.randrange(len(s["eps"]))] = st.ep_ips.take()
            s["gen"] += 1
            sl = st.objects_for(name)[1]
            t0 = time.monotonic()
            api.put([sl])
            try:
                ev = d.next_sync(b.a.change_timeout)
            except Exception:  # noqa: BLE001 - a missing sync is counted, not fatal
                timeouts += 1
                continue
            lat.append((ev["t"] - t0) * 1000.0 - ev["after_ms"])
            commits.append(ev["commit_ms"])
            time.sleep(0.05)
            d.drain()
        res["event_to_commit_ms"] = lat
        res["commit_ms_changes"] = commits
        res["timeouts"] = timeouts
        if lat:
            res["event_to_commit_median_ms"] = statistics.median(lat)
            res["event_to_commit_max_ms"] = max(lat)
            say("  event -> commit over %d slice changes: median %.1f ms, max %.1f ms (commit median %.1f ms)"
                % (len(lat), res["event_to_commit_median_ms"], res["event_to_commit_max_ms"],
                   statistics.median(commits)))
        reqs = [r for r in api.requests() if r.get("ua", "").startswith("kube-proxy-nft")]
        res["requests"] = len(reqs)
        res["lists"] = [r["path"] for r in reqs if not r["watch"]]
    finally:
        if d is not None:
            d.stop()
        api.close()
        netns_delete(ns)
    return res


def report_api(R, say, table, fmt):
    api = R.get("api") or {}
    for label, r in api.items():
        if "wall_ms" not in r:
            continue
        say("")
        say("== API source, %s from the test API server (HTTPS, token, qps 5 / burst 10) ==" % label)
        rows = [[fmt(r["wall_ms"]), fmt(r["sync_ms"]), fmt(r["commit_ms"]), str(r["ops"]),
                 fmt(r["rss_mib"]), fmt(r["hwm_mib"]),
                 fmt(r.get("event_to_commit_median_ms")), fmt(r.get("event_to_commit_max_ms")),
                 str(len(r.get("event_to_commit_ms", [])))]]
        say(table(["start->committed ms", "sync ms", "commit ms", "ops", "RSS MiB", "peak MiB",
                   "event->commit med", "max", "n"], rows))
        say("   %d requests in all; lists: %s" % (r.get("requests", 0), ", ".join(
            p.split("?")[0] for p in r.get("lists", []))))


def api_targets(R, target):
    for label, r in (R.get("api") or {}).items():
        w = r.get("wall_ms")
        target("API %s: start -> rules committed" % label, w, 3.0, "s", 1e-3)
        target("API %s: RSS after settle" % label, r.get("rss_mib"), 100.0, "MiB")
        target("API %s: event -> commit median" % label, r.get("event_to_commit_median_ms"), 30.0, "ms")

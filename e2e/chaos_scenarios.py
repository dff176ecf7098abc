"""Chaos scenarios (issue 12), run by `make chaos`, not by `make test` (they take minutes): the
real daemon in namespaces while a client loop opens a NEW TCP connection every 20 ms to each of
several untouched services; every attempt counts, nothing is retried.

  - 1000 endpoint changes of other services        -> 0 failed connections
  - kill -9 every 3 s for a minute, restarted       -> 0 failed connections
  - the API server down 5 minutes, then back        -> 0 failed connections, the next change lands
  - 100 000 endpoint changes                        -> daemon RSS, helper RSS and open fds flat
                                                       (the curve is printed)
  - an agent fighting over one service's key for    -> 0 failed connections, every other service
    30 s (issue 11 defect 5)                           keeps updating, no failed sync; the fought
                                                       service is programmed once the agent stops
  - `nft flush ruleset` 5 times (defect 6)          -> every service answers again within 2 s; no
                                                       failed connection outside those 2 s
Run: make chaos (or KPN_TEST_TIME_LIMIT=3600 python3 -m pytest -v -s e2e/chaos_scenarios.py)."""
import os
import random
import re
import threading
import time

import pytest

import netlab
from netlab import endpoint_slice, node_object, service
from test_40_live import assert_loop_clean, svc_files
from test_60_kube_api import wait_for
from test_80_foreign_tables import helper_pids

pytestmark = pytest.mark.usefixtures("daemon_bin")
UNTOUCHED = ["10.96.5.1", "10.96.5.2", "10.96.5.3"]


def start(lab, churn_services=5):
    client = lab.add_pod("client")
    steady = lab.add_backends(2, tcp=[8080], udp=[], name="steady")
    churn = lab.add_backends(4, tcp=[8080], udp=[], name="churn")
    m = lab.manifests
    m.write("node.yaml", node_object())
    for i, ip in enumerate(UNTOUCHED):
        m.write(f"steady{i}.yaml", svc_files(f"steady{i}", ip, steady))
    for j in range(churn_services):
        m.write(f"churn{j}.yaml", svc_files(f"churn{j}", f"10.96.6.{j + 1}", churn[:1]))
    d = lab.start_daemon()
    loops = [lab.agent(client) for _ in UNTOUCHED]
    for a, ip in zip(loops, UNTOUCHED):
        a.loop_start(ip, 80)
    return d, m, lab.agent(client), steady, churn, loops


def stop_loops(loops, t0):
    for a in loops:
        st = a.loop_stop()
        assert_loop_clean(st, min_attempts=int((time.monotonic() - t0) / 0.02 * 0.5))


def test_chaos_1000_endpoint_changes_never_disturb_untouched_services(lab):
    d, m, probe, steady, churn, loops = start(lab)
    rng = random.Random(1000)
    t0 = time.monotonic()
    state = {}
    try:
        for i in range(1000):
            j = i % 5
            state[j] = rng.sample(churn, rng.randint(1, len(churn)))
            m.write(f"churn{j}.yaml", svc_files(f"churn{j}", f"10.96.6.{j + 1}", state[j]))
            time.sleep(0.01)
        d.settle(quiet=0.5, timeout=30)
    finally:
        stop_loops(loops, t0)
    print(f"1000 changes in {time.monotonic() - t0:.1f} s, {len(d.syncs())} syncs")
    for j, eps in state.items():  # the last state of every churned service is what serves
        got = {probe.tcp(f"10.96.6.{j + 1}", 80).split()[0] for _ in range(12)}
        assert got <= {p.v4 for p in eps}, (j, got, eps)
    assert d.failed_syncs() == [] and d.alive()


def test_chaos_kill9_every_3s_for_a_minute_never_disturbs_traffic(lab):
    d, m, probe, steady, churn, loops = start(lab)
    t0 = time.monotonic()
    kills = 0
    try:
        while time.monotonic() - t0 < 60:
            time.sleep(3)
            d.kill9()
            kills += 1
            m.write("churn0.yaml", svc_files("churn0", "10.96.6.1", churn[: 1 + kills % 4]))
            d.start()
            d.wait_syncs(1, timeout=20)
    finally:
        stop_loops(loops, t0)
    print(f"{kills} kill -9 + restart cycles in {time.monotonic() - t0:.0f} s")
    want = {p.v4 for p in churn[: 1 + kills % 4]}
    got = {probe.tcp("10.96.6.1", 80).split()[0] for _ in range(20)}
    assert got <= want and got, (got, want)
    assert kills >= 15


def _mem(pid):
    def rss(p):
        with open(f"/proc/{p}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024.0
    helpers = helper_pids(pid)
    return rss(pid), sum(rss(h) for h in helpers), len(os.listdir(f"/proc/{pid}/fd"))


def test_chaos_rss_and_fds_stay_flat_over_100k_endpoint_changes(lab):
    total = int(os.environ.get("KPN_CHAOS_CHANGES", "100000"))
    d, m, probe, steady, churn, loops = start(lab, churn_services=20)
    rng = random.Random(100000)
    t0 = time.monotonic()
    curve = []
    try:
        for i in range(total):
            j = i % 20
            m.write(f"churn{j}.yaml", svc_files(f"churn{j}", f"10.96.6.{j + 1}",
                                               rng.sample(churn, rng.randint(1, len(churn)))))
            if (i + 1) % (total // 10) == 0:
                d.settle(quiet=0.3, timeout=30)
                curve.append((i + 1, *_mem(d.proc.pid), len(d.syncs())))
                print("changes %6d: daemon RSS %.1f MiB, helper RSS %.1f MiB, fds %d, syncs %d"
                      % curve[-1], flush=True)
    finally:
        stop_loops(loops, t0)
    print(f"{total} changes in {time.monotonic() - t0:.0f} s")
    assert d.failed_syncs() == [] and d.alive()
    first, last = curve[0], curve[-1]
    assert last[3] == first[3], f"open fds grew: {curve}"
    assert last[1] <= first[1] * 1.10 + 2, f"daemon RSS grew: {curve}"
    assert last[2] <= first[2] * 1.25 + 2, f"helper RSS grew: {curve}"


FOUGHT_KEY = "10.96.7.1 . tcp . 80"


class KeyFighter:
    """Another agent on the node that keeps a drop verdict on one service's key in our service-ips
    map: whenever the key holds anything else it deletes it and puts its own back, every 50 ms.
    Each of its writes is outside damage to us (repaired, defect 6). Since the slots became the
    count (pkg/render/pick_chains.h) a plain service has no element of its own in service-ips,
    so our commits never add this key and the kernel never refuses them: the fight is all
    repairs. (With a verdict per destination, our commit adding the key between the agent's
    delete and add was refused, File exists, and the daemon left that one service out: defect 5.)"""

    def __init__(self, lab):
        self.lab, self.stop_flag, self.writes = lab, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_flag.is_set():
            held = netlab.sh(["nft", "list", "map", "ip", "kube-proxy", "service-ips"], ns=self.lab.node, check=False)
            if not f"{FOUGHT_KEY} : drop" in (held.stdout or ""):
                netlab.sh(["nft", "delete", "element", "ip", "kube-proxy", "service-ips", f"{{ {FOUGHT_KEY} }}"],
                          ns=self.lab.node, check=False)
                netlab.sh(["nft", "add", "element", "ip", "kube-proxy", "service-ips", f"{{ {FOUGHT_KEY} : drop }}"],
                          ns=self.lab.node, check=False)
                self.writes += 1
            self.stop_flag.wait(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join(timeout=10)


def test_chaos_an_agent_fighting_over_one_service_never_holds_up_the_others(lab):
    d, m, probe, steady, churn, loops = start(lab)
    m.write("fought.yaml", svc_files("fought", "10.96.7.1", churn[:1]))
    d.settle(quiet=0.3, timeout=20)
    rng = random.Random(11)
    t0 = time.monotonic()
    state = {}
    try:
        with KeyFighter(lab) as fighter:
            i = 0
            while time.monotonic() - t0 < 30:
                j = i % 5
                state[j] = rng.sample(churn, rng.randint(1, len(churn)))
                m.write(f"churn{j}.yaml", svc_files(f"churn{j}", f"10.96.6.{j + 1}", state[j]))
                i += 1
                time.sleep(0.05)
            # While the fight goes on, the last change of every other service lands.
            d.settle(quiet=0.3, timeout=30)
            for j, eps in state.items():
                got = {probe.tcp(f"10.96.6.{j + 1}", 80).split()[0] for _ in range(12)}
                assert got <= {p.v4 for p in eps}, (j, got, eps)
    finally:
        stop_loops(loops, t0)
    err = d.stderr()
    refusals = err.count("Service default/fought: nft refuses its rules")
    repairs = err.count("changed by another process")
    print(f"{i} changes of other services in 30 s against {fighter.writes} writes of the agent; "
          f"{len(d.syncs())} syncs, {refusals} refusals of the fought service, {repairs} repairs")
    assert d.failed_syncs() == [] and d.alive(), d.failed_syncs()[:5]
    assert not [l for l in err.splitlines() if "nft refuses its rules" in l and "default/fought" not in l], \
        "a service nobody fought over was refused"
    # The agent is gone: its last drop verdict is repaired away and the fought service answers
    # (after its backoff, at most 30 s, if it was refused last).
    wait_for(lambda: probe.tcp("10.96.7.1", 80, timeout=0.5).split()[0] == churn[0].v4, 40,
             "the fought service answers once the agent stopped")


def test_chaos_nft_flush_ruleset_is_repaired_within_2s_every_time(lab):
    d, m, probe, steady, churn, loops = start(lab)
    want = {p.v4 for p in steady}
    # Each loop's clock: its failures carry seconds since it started.
    origins = []
    for a in loops:
        now = time.monotonic()
        origins.append(now - a.loop_stats()["elapsed"])
    flushes, repair_s = [], []
    try:
        for k in range(5):
            time.sleep(3)
            t = time.monotonic()  # before the flush: it takes effect while `nft` runs
            netlab.sh(["nft", "flush", "ruleset"], ns=lab.node)
            flushes.append(t)
            for ip in UNTOUCHED:
                while probe.tcp(ip, 80, timeout=0.05).split()[0] not in want:
                    assert time.monotonic() - t < 2.0, f"flush {k + 1}: {ip} not repaired within 2 s\n{d.tail()}"
                    time.sleep(0.01)
            repair_s.append(time.monotonic() - t)
        time.sleep(1)
    finally:
        stats = [a.loop_stop() for a in loops]
    print("repaired after (s):", ", ".join(f"{r:.3f}" for r in repair_s))
    windows = [(fl, fl + r) for fl, r in zip(flushes, repair_s)]
    for st, origin in zip(stats, origins):
        print("failures (s after the nearest flush):",
              [(round(origin + f[0] - max([w for w in flushes if w <= origin + f[0]] or [0]), 3), f[1])
               for f in st["failures"]])
    for st, origin in zip(stats, origins):
        print(f"20 ms loop: attempts={st['attempts']} ok={st['ok']} failures={len(st['failures'])} "
              f"max_ms={st['max_ms']}")
        # Connections fail only while a flush is being repaired: each failed attempt started
        # between a flush and the moment the probe saw it repaired.
        outside = [f for f in st["failures"] if not any(a <= origin + f[0] <= b for a, b in windows)]
        assert outside == [], f"failures outside the repair windows: {outside[:10]}"
    assert d.failed_syncs() == [] and d.alive()


def test_chaos_apiserver_down_5_minutes_never_disturbs_traffic_and_recovers(lab):
    """The API server goes away for KPN_CHAOS_APISERVER_DOWN_S (default 300 s): the table stays as
    it is and keeps serving, the daemon keeps retrying with backoff (capped at 30 s), and once the
    server is back it resumes its watches and programs the next change."""
    from apiserver_lab import ApiServer
    from test_60_kube_api import start_with_kubeconfig, who_answers, web

    down_s = float(os.environ.get("KPN_CHAOS_APISERVER_DOWN_S", "300"))
    api = ApiServer(lab)
    client = lab.add_pod("client")
    steady = lab.add_backends(2, tcp=[8080], udp=[], name="steady")
    c1, c2 = lab.add_backends(2, tcp=[8080], udp=[], name="churn")
    objs = [node_object()] + web("churn", "10.96.6.1", [c1])
    for i, ip in enumerate(UNTOUCHED):
        objs += web(f"steady{i}", ip, steady)
    api.create(objs)
    d = start_with_kubeconfig(lab, api)
    api.wait_watches(4)
    loops = [lab.agent(client) for _ in UNTOUCHED]
    for a, ip in zip(loops, UNTOUCHED):
        a.loop_start(ip, 80)
    t0 = time.monotonic()
    api.stop()
    deadline = time.monotonic() + down_s
    syncs_before = len(d.syncs())
    while time.monotonic() < deadline:  # the outage itself: its length is the scenario
        assert d.alive(), d.tail()
        time.sleep(1)
    down_for = time.monotonic() - t0
    assert not [s for s in d.syncs()[syncs_before:] if s["ops"]], "an outage changed the kernel"
    stop_loops(loops, t0)
    failed = len(re.findall(r"(?:list|watch) failed: GET ", d.stderr()))
    # Four resources, backoff 0.5 s doubling to 30 s: about 4 x (6 + down_s / 30) attempts.
    assert 4 <= failed <= 4 * (10 + down_s / 20), f"{failed} failed requests: no retries, or the backoff does not hold"
    print(f"API server down {down_for:.0f} s; {failed} failed requests from the daemon")

    api.restart()
    t_back = time.monotonic()
    api.wait_watches(4, timeout=45)  # within one backoff period (30 s) plus jitter
    resumed_in = time.monotonic() - t_back
    with d.change(timeout=30):
        api.replace([endpoint_slice("churn", [c2.v4], [("http", 8080, "TCP")])])
    probe = lab.agent(client)
    assert who_answers(probe, "10.96.6.1") == ({c2.v4}, [])
    for ip in UNTOUCHED:
        assert who_answers(probe, ip)[1] == [], ip
    print(f"watches resumed {resumed_in:.1f} s after the API server came back; the next change programmed")

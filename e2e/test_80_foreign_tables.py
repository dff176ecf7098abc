"""Other agents' tables on the node (issue 12): a CNI's table with 10 000 chains, sets with
comments and typeof, and sets written by nft >= 1.1.2, whose userdata makes libnftables 1.0.6
segfault while it fills its cache (kubernetes issues 136786, 140898). They are written
straight through netlink by build/foreign-tables (e2e/foreign_tables.c, libnftnl), then the
daemon must keep serving and applying live changes. Also: libnftables dying inside the helper
process costs one commit, never the daemon."""
import os
import signal
import time

import pytest

import netlab
from netlab import answers, endpoint_slice, node_object, service, sh

pytestmark = pytest.mark.usefixtures("daemon_bin")

FOREIGN = os.path.join(netlab.REPO, "build", "foreign-tables")
HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


@pytest.fixture
def foreign_bin():
    if not os.path.exists(FOREIGN):
        pytest.fail(f"{FOREIGN} does not exist: build it with `make -C {netlab.REPO} build/foreign-tables`")
    return FOREIGN


def foreign(lab, *args):
    sh([FOREIGN, *args], ns=lab.node, timeout=120)


def svc_files(name, ip, eps):
    return [service(name, HTTP, [ip]), endpoint_slice(name, [p.v4 for p in eps], HTTP_SLICE)]


def helper_pids(daemon_pid):
    """The daemon's libnftables helper for its own tables (the child running the hidden subcommand
    with our tables as its scope; a second, unscoped one serves commands on other tables)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == daemon_pid and len(argv) > 3 and argv[1] == b"__nft-helper" and \
                argv[2] == f"parent:{daemon_pid}".encode() and argv[3] == b"ip:kube-proxy":
            pids.append(int(p))
    return pids


def churn_rounds(d, m, probe, eps, rounds, k):
    """Endpoint changes of one service (from its first k endpoints), each checked with real
    connections; returns the k it ends with."""
    for rnd in range(rounds):
        k = 1 + k % len(eps)  # never the set it has
        want = eps[:k]
        with d.change():
            m.write("churn.yaml", svc_files("churn", "10.96.2.2", want))
        own, _, errs = answers(probe.many("tcp", "10.96.2.2", 80, 16, timeout=1.0))
        assert not errs and set(own) == {p.v4 for p in want}, f"round {rnd}: {own} {errs}"
    with d.change():
        m.write("extra.yaml", svc_files("extra", "10.96.2.3", eps[:1]))
    assert probe.tcp("10.96.2.3", 80).split()[0] == eps[0].v4
    with d.change():
        m.delete("extra.yaml")
    assert probe.tcp("10.96.2.3", 80, timeout=0.5).startswith("ERR:")
    return k


def start_two_services(lab):
    """A steady service (the client loop's target) and one to churn; the daemon started."""
    client = lab.add_pod("client")
    steady = lab.add_backends(2, tcp=[8080], udp=[], name="steady")
    churn = lab.add_backends(3, tcp=[8080], udp=[], name="churn")
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("steady.yaml", svc_files("steady", "10.96.2.1", steady))
    m.write("churn.yaml", svc_files("churn", "10.96.2.2", churn[:1]))
    d = lab.start_daemon()
    return d, m, lab.agent(client), lab.agent(client), steady, churn


def test_foreign_tables_and_newer_nft_sets_neither_crash_nor_stop_the_daemon(lab, foreign_bin):
    # What other agents left on the node before we start.
    foreign(lab, "chains", "inet", "cni-chains", "10000")
    foreign(lab, "sets", "inet", "cni-sets")
    foreign(lab, "newer-set", "inet", "cni-sets", "written-by-nft-1-1-2")
    foreign(lab, "newer-set", "ip", "firewall", "blocklist")
    assert sh(["nft", "list", "tables"], ns=lab.node, check=False).returncode != 0, \
        "the crash trigger is not in place: nft 1.0.6 must fail to list this ruleset"
    d, m, cli, probe, steady, churn = start_two_services(lab)
    helpers_before = helper_pids(d.proc.pid)
    assert len(helpers_before) == 1, helpers_before
    cli.loop_start("10.96.2.1", 80)
    try:
        k = churn_rounds(d, m, probe, churn, 4, 1)
        # A set with the same userdata inside our own table (a human with nft 1.1.2 on the node).
        foreign(lab, "newer-set", "ip", "kube-proxy", "added-by-newer-nft")
        churn_rounds(d, m, probe, churn, 3, k)
    finally:
        st = cli.loop_stop()
    print(f"loop: attempts={st['attempts']} failures={len(st['failures'])} answers={st['answers']}")
    print("syncs:", [(s["ops"], s["commit_ms"]) for s in d.syncs()])
    assert st["failures"] == [], st["failures"][:20]
    assert set(st["answers"]) == {p.v4 for p in steady}
    assert d.failed_syncs() == [], d.failed_syncs()
    assert d.alive()
    assert helper_pids(d.proc.pid) == helpers_before, "the helper crashed (and was replaced)"
    # Other agents' tables are untouched.
    assert "chain-09999" in lab.nft("list", "table", "inet", "cni-chains")


def test_libnftables_dying_in_its_helper_costs_one_commit_never_the_daemon(lab, foreign_bin):
    d, m, cli, probe, steady, churn = start_two_services(lab)
    cli.loop_start("10.96.2.1", 80)
    seen = set()
    try:
        for rnd, sig in enumerate([signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT]):
            pids = helper_pids(d.proc.pid)
            assert len(pids) == 1, f"round {rnd}: helpers {pids}"
            seen.update(pids)
            os.kill(pids[0], sig)  # what a libnftables crash or exit() looks like from outside
            deadline = time.monotonic() + 5
            while pids[0] in helper_pids(d.proc.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            want = churn[: 1 + (rnd + 1) % 3]
            before = len(d.syncs())
            m.write("churn.yaml", svc_files("churn", "10.96.2.2", want))
            d.wait_syncs(before + 1, timeout=20)  # after at most one failed attempt and a retry
            own, _, errs = answers(probe.many("tcp", "10.96.2.2", 80, 16, timeout=1.0))
            assert not errs and set(own) == {p.v4 for p in want}, f"round {rnd}: {own} {errs}"
    finally:
        st = cli.loop_stop()
    # The syncer's line per refused commit: since failure isolation (issue 11 defect 5) a commit
    # that dies with its helper is checked again on a new helper and committed in the same sync,
    # so it is the warning before the bisection, not a failed sync.
    failed = [l for l in d.stderr().splitlines() if "nft rejected a transaction" in l and "looking for" in l]
    print("failed syncs:", failed)
    assert d.alive()
    assert 1 <= len(failed) <= 3, f"each helper death must cost exactly its one commit: {failed}"
    assert all("libnftables helper killed by signal" in l for l in failed), failed
    assert st["failures"] == [], st["failures"][:20]
    assert len(seen) == 3 and not (seen & set(helper_pids(d.proc.pid)))

"""pytest wiring for the real-kernel e2e suite: the `lab` fixture (namespaces + teardown), a hard
per-test time limit, and failure diagnostics (daemon stderr tail, `nft list ruleset` of the node
namespace) attached to the report of every failing test while its namespaces still exist."""
import os
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import netlab  # noqa: E402

TEST_TIME_LIMIT = int(os.environ.get("KPN_TEST_TIME_LIMIT", "90"))


def pytest_configure(config):
    config.addinivalue_line("markers", "daemon: needs the kube-proxy-nft binary")


def pytest_sessionstart(session):
    """Every test needs root (network namespaces, nftables): without it the run fails at once and
    says why, instead of skipping everything and exiting 0."""
    if os.geteuid() != 0:
        pytest.exit("the e2e suite needs root (network namespaces, nftables); run it as root, "
                    "e.g. `sudo make test`", returncode=1)


@pytest.fixture(autouse=True)
def _time_limit(request):
    def expired(signum, frame):
        raise TimeoutError(f"{request.node.name} exceeded {TEST_TIME_LIMIT} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_TIME_LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def lab(request):
    if os.geteuid() != 0:
        pytest.fail("the e2e suite needs root (network namespaces)")
    lb = netlab.Lab(request.node.name)
    try:
        yield lb
    finally:
        lb.close()


@pytest.fixture
def daemon_bin():
    """The binary must exist: a missing binary is a failure, not a skip."""
    if not os.path.exists(netlab.BIN):
        pytest.fail(f"{netlab.BIN} does not exist: build it with `make -C {netlab.REPO} "
                    f"build/kube-proxy-nft`")
    return netlab.BIN


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        for lb in list(netlab.LIVE_LABS):
            lb.keep_tmp = True
            try:
                rep.sections.append((f"kube-proxy-nft diagnostics {lb.prefix}", lb.diagnostics()))
            except Exception as e:  # noqa: BLE001 - diagnostics must never mask the failure
                rep.sections.append(("diagnostics error", repr(e)))

"""What the daemon writes to its log, as log pipelines and operators read kube-proxy's: klog's text
header on every line (the libnftables helper's too), klog's JSON with --logging-format=json, the
split streams and --log-file, and what shows at the default verbosity: the version, the caches
listed, the first sync, each failure with its cause, an unreachable API server's address and
errno."""
import json
import os
import re
import subprocess
import time

import pytest

import netlab
from apiserver_lab import ApiServer
from netlab import endpoint_slice, node_object, service
from test_60_kube_api import wait_for

pytestmark = pytest.mark.usefixtures("daemon_bin")

# klog's header: severity, month and day (no year), time to the microsecond, the thread id
# right-aligned in 7 columns, file:line. glog's own (I20261205 ... with a 5-column id) fails it.
KLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} [ \d]{6}\d ([\w.+-]+):\d+\] ")
HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]
# The helper refuses the rules of default/bad: it says so in a line of its own (the helper's
# log), and the syncer logs the refusal as an error.
REFUSE_BAD = {"KPN_FAULT_REFUSE_TEXT": '"default/bad:http"'}
REFUSED = "Service default/bad: nft refuses its rules"
HELPER = "nft helper: failpoint KPN_FAULT_REFUSE_TEXT is set"


def two_services(lab):
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    lab.manifests.write("node.yaml", node_object())
    lab.manifests.write("keep.yaml", [service("keep", HTTP, ["10.96.7.1"]), endpoint_slice("keep", [a.v4], HTTP_SLICE)])
    lab.manifests.write("bad.yaml", [service("bad", HTTP, ["10.96.7.2"]), endpoint_slice("bad", [a.v4], HTTP_SLICE)])


def json_lines(text):
    objs = []
    for line in text.splitlines():
        obj = json.loads(line)  # every line one JSON object
        assert isinstance(obj, dict), line
        objs.append(obj)
    return objs


def test_every_line_has_klogs_text_header_the_helpers_too(lab):
    two_services(lab)
    d = lab.daemon(env=REFUSE_BAD).start()
    d.wait_for(REFUSED)
    lines = d.stderr().splitlines()
    assert len(lines) > 5
    for line in lines:
        assert KLOG.match(line), f"not klog's header: {line!r}"
    helper = [l for l in lines if HELPER in l]
    assert helper and KLOG.match(helper[0]).group(1) == "nft_helper.cc", helper
    assert any(l.startswith("E") and REFUSED in l for l in lines)


def test_json_format_is_one_klog_json_object_per_line_the_helpers_too(lab):
    two_services(lab)
    d = lab.daemon(["--logging-format=json"], env=REFUSE_BAD).start()
    d.wait_for(REFUSED)
    wait_for(lambda: "first sync done" in d.stderr(), 20, "the first sync line")
    now_ms = time.time() * 1000
    objs = json_lines(d.stderr())
    for o in objs:
        assert set(o) in ({"ts", "caller", "msg", "v"}, {"ts", "caller", "msg"}), o
        assert isinstance(o["ts"], (int, float)) and abs(o["ts"] - now_ms) < 300_000, o  # milliseconds
        assert re.fullmatch(r"[\w.+-]+/[\w.+-]+:\d+", o["caller"]), o  # zap's short caller: dir/file:line
    helper = [o for o in objs if o["msg"].startswith(HELPER)]
    assert helper and helper[0]["caller"].startswith("nft/nft_helper.cc:") and helper[0]["v"] == 0, helper
    refused = [o for o in objs if o["msg"].startswith(REFUSED)]
    assert refused and "v" not in refused[0], refused  # an error line, as klog's JSON logger writes it
    assert any(o["msg"].startswith("first sync done: ") and o["v"] == 0 for o in objs)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_split_stream_sends_errors_to_stderr_and_the_rest_to_stdout(lab, fmt):
    two_services(lab)
    d = lab.daemon([f"--logging-format={fmt}", f"--log-{fmt}-split-stream"], env=REFUSE_BAD).start()
    wait_for(lambda: REFUSED in d.stderr(), 20, "the refusal on stderr")
    wait_for(lambda: "first sync done" in d.stdout(), 20, "the first sync on stdout")
    err, out = d.stderr().splitlines(), d.stdout().splitlines()
    if fmt == "json":
        assert all("v" not in o for o in json_lines(d.stderr())), err
        assert all("v" in o for o in json_lines(d.stdout())), out
    else:
        assert all(l.startswith("E") and KLOG.match(l) for l in err), err
        assert all(l[0] in "IW" and KLOG.match(l) for l in out), out
    assert any(HELPER in l for l in out), "the helper's warning is not on stdout"


def test_log_file_takes_every_line_and_stderr_the_errors_as_klog(lab):
    two_services(lab)
    path = os.path.join(lab.tmp, "kube-proxy.log")
    d = lab.daemon(["--logtostderr=false", f"--log-file={path}"], env=REFUSE_BAD).start()
    wait_for(lambda: REFUSED in d.stderr(), 20, "the refusal on stderr")
    wait_for(lambda: os.path.exists(path) and "first sync done" in open(path).read(), 20, "the log file")
    logged = open(path).read().splitlines()
    assert all(KLOG.match(l) for l in logged), logged[:5]
    assert any(HELPER in l for l in logged), "the helper does not write to the log file"
    # --stderrthreshold's default (ERROR): only errors are copied to stderr.
    assert all(l.startswith("E") for l in d.stderr().splitlines()), d.stderr()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_trace_subcommand_logs_its_warnings_in_the_same_format(lab, fmt):
    # No Node object in the folder: rendering warns that it takes the default route's addresses.
    lab.manifests.write("web.yaml", [service("web", HTTP, ["10.96.7.3"]), endpoint_slice("web", ["10.244.0.5"],
                                                                                         HTTP_SLICE)])
    p = subprocess.run(["ip", "netns", "exec", lab.node, netlab.BIN, "trace", "--from=pod", "--src=10.244.0.11",
                        "--dst=10.96.7.3:80", "--proto=tcp", f"--manifests={lab.manifests.path}",
                        f"--hostname-override={netlab.NODE_NAME}", f"--logging-format={fmt}"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert any("no Node object" in l for l in lines), lines
    if fmt == "json":
        assert all(o["msg"] and "v" in o for o in json_lines(p.stderr)), lines  # warnings only: "v":0
    else:
        assert all(l.startswith("W") and KLOG.match(l) for l in lines), lines


def start_against_api(lab, verbosity):
    api = ApiServer(lab)
    a, = lab.add_backends(1, tcp=[8080], udp=[])
    api.create([node_object(), service("web", HTTP, ["10.96.7.10"]), endpoint_slice("web", [a.v4], HTTP_SLICE)])
    kc = api.kubeconfig_token(os.path.join(lab.tmp, "daemon.kubeconfig"), token_file=True)
    return api, lab.daemon([f"--kubeconfig={kc}", f"--v={verbosity}"], manifests=False).start()


@pytest.mark.parametrize("verbosity", ["0", "1"])  # 0: upstream's default; 1: deploy/configmap.yaml's
def test_default_verbosity_shows_the_version_the_caches_listed_and_the_first_sync(lab, verbosity):
    api, d = start_against_api(lab, verbosity)
    d.wait_for("first sync done: ")
    log = d.stderr()
    assert re.search(r"\] kube-proxy-nft \S+ \(commit \S+\) on node ", log), log
    for kind in ("Services", "EndpointSlices", "Nodes", "ServiceCIDRs"):
        assert f"{kind} listed from {api.url}" in log, kind
    assert re.search(r"\] first sync done: 1 services, \d+ operations in [\d.]+ ms", log), log
    assert "sync done full=" not in log  # that one is -v=2


def test_an_unreachable_api_server_is_named_with_its_address_and_errno(lab):
    api, d = start_against_api(lab, "0")
    d.wait_for("Services listed from")
    api.stop()
    port = api.url.rsplit(":", 1)[1]
    want = re.compile(r"Service (?:list|watch) failed: GET " + re.escape(api.url) + r"/api/v1/services: connect "
                      r"127\.0\.0\.1:" + port + r": Connection refused \(111\)")
    wait_for(lambda: want.search(d.stderr()), 15, "the failure naming the address and errno")


def test_default_verbosity_shows_each_failed_sync_with_its_cause(lab):
    two_services(lab)
    # Every transaction on our tables is refused, whatever services it holds.
    d = lab.daemon(["--v=0"], env={"KPN_FAULT_REFUSE_TEXT": '"table":"kube-proxy"'}).start()
    wait_for(lambda: d.stderr().count("sync failed (") >= 2, 20, "two failed syncs")
    log = d.stderr()
    assert "sync failed: nft rejects the transaction even without any service's rules (Operation not permitted " \
           "(failpoint KPN_FAULT_REFUSE_TEXT))" in log, log
    assert re.search(r"sync failed \(1 in a row\); retrying in \d+ ms", log), log

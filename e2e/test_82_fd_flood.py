"""File descriptors under a connection flood (issue 12): an outside client opens and holds as many
connections as it can to the health-check node ports of several dual-stack eTP=Local
LoadBalancers, while services change, among them a change big enough (> 10 000 operations) that
libnftables' memory is given back by a fresh helper. The daemon starts with a soft open-files
limit of 256 under a hard one of 1024 (what a unit without LimitNOFILE gives): it must raise it,
cap the connections of all ports together, keep committing and stay up."""
import json
import subprocess
import time

import pytest

import netlab
from netlab import NODE_NAME, NODE_V4, NODE_V6, PY, endpoint_slice, node_object, service
from test_72_health_check import expect_health, http_get, lb, slices_of

pytestmark = pytest.mark.usefixtures("daemon_bin")

HC_PORTS = [30210, 30211, 30212, 30213]

# Keeps up to `target` connections open to the given host:port list, reconnecting those the
# server closes; prints one JSON status line per second.
FLOOD = r"""
import json, resource, socket, sys, time
targets = [(h, int(p)) for h, p in (t.rsplit(":", 1) for t in sys.argv[2].split(","))]
target = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (target + 256, target + 256))
conns, made, refused, last = [], 0, 0, 0
while True:
    alive = []
    for s in conns:
        try:
            if s.recv(1, socket.MSG_DONTWAIT) == b"":
                s.close(); continue
        except BlockingIOError:
            pass
        except OSError:
            s.close(); continue
        alive.append(s)
    conns = alive
    while len(conns) < target:
        h, p = targets[made % len(targets)]
        made += 1
        s = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET)
        s.settimeout(0.5)
        try:
            s.connect((h, p)); s.setblocking(False); conns.append(s)
        except OSError:
            s.close(); refused += 1
            break
    if time.monotonic() - last >= 1:
        last = time.monotonic()
        print(json.dumps({"open": len(conns), "made": made, "refused": refused}), flush=True)
    time.sleep(0.02)
"""


def big_file(n, backends):
    objs = []
    for i in range(n):
        objs += [service(f"bulk{i}", [("http", 80, "TCP", 8080)], [f"10.97.{i // 250}.{i % 250 + 1}"]),
                 endpoint_slice(f"bulk{i}", [p.v4 for p in backends], [("http", 8080, "TCP")])]
    return objs


def open_fds(pid):
    return len(netlab.os.listdir(f"/proc/{pid}/fd"))


def test_connection_flood_on_health_check_ports_never_stops_the_daemon(lab):
    client = lab.add_external_client()
    local = lab.add_backends(2, tcp=[80, 8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    lbs = []
    for i, port in enumerate(HC_PORTS):
        name = f"hc{i}"
        lbs += [lb(name, [f"10.96.3.{i + 1}", f"fd00:10:96::3:{i + 1}"], port, 30060 + i)] + \
            slices_of(name, local)
    m.write("lbs.yaml", lbs)
    d = lab.daemon()
    d.args = ["prlimit", "--nofile=256:1024", "--"] + d.args
    d.start()
    d.wait_syncs(1)
    for i, port in enumerate(HC_PORTS):
        expect_health(client, port, 200, 2, name=f"hc{i}")
    assert "open files limit 1024" in d.stderr(), "the soft limit was not raised to the hard one"

    targets = ",".join(f"{h}:{p}" for p in HC_PORTS for h in (f"[{NODE_V6}]", NODE_V4))
    targets = targets.replace("[", "").replace("]", "")
    flood = subprocess.Popen(["ip", "netns", "exec", client.ns, PY, "-c", FLOOD, "3000", targets],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    lab.procs.append(flood)
    status = {}
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until the daemon refuses more
            status = json.loads(flood.stdout.readline())
            if status["open"] >= 300 and status["refused"] + status["made"] > status["open"] + 50:
                break
        print("flood:", status, "daemon fds:", open_fds(d.proc.pid))
        assert status["open"] >= 300, f"the flood did not get going: {status}"
        fds_flooded = open_fds(d.proc.pid)
        assert fds_flooded < 1024 - 100, f"the daemon holds {fds_flooded} of its 1024 descriptors"

        # A change of > 10 000 operations (the helper is recycled after it; 3 per service of one
        # endpoint in the shared-dispatch layout: its slot, its ClusterIP, its hairpin pair once),
        # then small ones.
        with d.change(timeout=60):
            m.write("bulk.yaml", big_file(3500, local))
        assert max(s["ops"] for s in d.syncs()) > 10000, d.syncs()[-3:]
        for k in range(3):
            with d.change():
                m.write("lbs.yaml", lbs + [service("extra", [("http", 80, "TCP", 8080)], ["10.96.3.100"]),
                                           endpoint_slice("extra", [p.v4 for p in local[: 1 + k % 2]],
                                                          [("http", 8080, "TCP")])])
        assert d.alive()
        cli = lab.agent(client)
        assert cli.tcp("10.97.0.1", 80).split()[0] in {p.v4 for p in local}
        assert cli.tcp("10.96.3.100", 80).split()[0] == local[0].v4
        print("daemon fds at the end of the flood:", open_fds(d.proc.pid))
    finally:
        netlab._kill_group(flood)
    # Flood over: the health checks answer again on every port.
    deadline = time.monotonic() + 15
    while True:
        r = http_get(client, NODE_V4, HC_PORTS[-1])
        if r.get("status") == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for i, port in enumerate(HC_PORTS):
        expect_health(client, port, 200, 2, name=f"hc{i}")
    assert d.failed_syncs() == [], d.failed_syncs()
    assert d.alive()

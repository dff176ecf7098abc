"""The image itself under a real container runtime (Debian's podman, runc): the image `make image`
built, run as kubeadm's kube-proxy DaemonSet runs it (privileged, the lab's node namespace as its
host network, kubeadm's command line overriding the entrypoint, the ConfigMap, service-account and
host mounts, a read-only root, PID 1 of its own PID namespace), against the test API server, with
real traffic, /healthz and /metrics. The image is KPN_IMAGE (default kube-proxy-nft:latest, what
`make image` tags); `make test` builds it first.

The container is named after the lab and removed with `podman rm -f` at the end, failed or not."""
import os
import subprocess
import time

import pytest

import netlab
from apiserver_lab import ApiServer
from kubeadm_pod import KUBEADM_CONFIG, KUBEADM_KUBECONFIG, COMMAND
from netlab import LabError, endpoint_slice, expect_answers, http_get, metric_sample, node_object, service

IMAGE = os.environ.get("KPN_IMAGE", "kube-proxy-nft:latest")
WEB = [("http", 80, "TCP", 8080)]
WEB_SLICE = [("http", 8080, "TCP")]


def podman_command():
    """deploy/podman.sh's podman command line and ulimits: the flags this machine kind needs."""
    out = subprocess.run(["sh", "-c", '. deploy/podman.sh && printf "%s\\n%s" "$PODMAN" "$ULIMITS"'],
                         cwd=netlab.REPO, capture_output=True, text=True, check=True).stdout
    podman, ulimits = out.split("\n")
    return podman.split(), ulimits.split()


@pytest.fixture
def podman():
    cmd, ulimits = podman_command()
    if subprocess.run(cmd + ["image", "exists", IMAGE]).returncode != 0:
        pytest.fail(f"image {IMAGE} does not exist: build it with `make image` (make test does)")
    return cmd, ulimits


def test_the_image_runs_as_kubeadms_daemonset_with_traffic_healthz_and_metrics(lab, podman):
    cmd, ulimits = podman
    client = lab.add_pod("client")
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    api = ApiServer(lab)
    api.put([node_object(), service("web", WEB, ["10.96.8.10"]), endpoint_slice("web", [a.v4, b.v4], WEB_SLICE)])
    d = os.path.join(lab.tmp, "image-pod")
    configmap = os.path.join(d, "configmap")
    os.makedirs(configmap)
    with open(os.path.join(configmap, "config.conf"), "w") as f:
        f.write(KUBEADM_CONFIG)
    with open(os.path.join(configmap, "kubeconfig.conf"), "w") as f:
        f.write(KUBEADM_KUBECONFIG.format(server=api.url))
    _, sa_dir = api.incluster_env()
    lock = os.path.join(d, "xtables.lock")
    open(lock, "w").close()
    # The host's modules, read-only; a machine without /lib/modules (a container of its own) gets
    # an empty directory, as a kubelet's DirectoryOrCreate would make.
    modules = "/lib/modules" if os.path.isdir("/lib/modules") else os.path.join(d, "modules")
    os.makedirs(modules, exist_ok=True)
    name = f"{lab.prefix}-kube-proxy"
    log = os.path.join(lab.tmp, "image-pod.log")
    run = cmd + ["run", "--rm", "--name", name, *ulimits, "--privileged", "--read-only",
                 f"--network=ns:/run/netns/{lab.node}",
                 "-v", f"{configmap}:/var/lib/kube-proxy:ro",
                 "-v", f"{sa_dir}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                 "-v", f"{lock}:/run/xtables.lock", "-v", f"{modules}:/lib/modules:ro",
                 "-e", f"NODE_NAME={netlab.NODE_NAME}",
                 "--entrypoint", COMMAND[0], IMAGE, *COMMAND[1:], f"--hostname-override={netlab.NODE_NAME}"]
    with open(log, "w") as out:
        proc = subprocess.Popen(run, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    lab.procs.append(proc)

    def tail():
        with open(log, errors="replace") as f:
            return f.read()[-4000:]

    try:
        deadline = time.monotonic() + 60
        while True:
            r = http_get(lab.node, "127.0.0.1", 10249, "/metrics")
            if r.get("status") == 200 and (metric_sample(r["body"], "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                                                        ip_family="IPv4") or 0) > 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"the container did not sync (exit {proc.poll()}):\n{tail()}")
            time.sleep(0.2)
        top = subprocess.run(cmd + ["top", name, "pid", "args"], capture_output=True, text=True).stdout
        assert "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf" in top, top
        pid1 = [l.strip().split(None, 1) for l in top.splitlines()[1:] if l.strip()]
        assert ["1", f"{COMMAND[0]} {COMMAND[1]} --hostname-override={netlab.NODE_NAME}"] in pid1, top
        cli = lab.agent(client)
        expect_answers(cli, "10.96.8.10", 80, {a.v4, b.v4}, {client.v4}, what="through the image's rules")
        for path in ("/healthz", "/livez"):
            r = http_get(lab.node, "127.0.0.1", 10256, path)
            assert r.get("status") == 200, f"{path}: {r}\n{tail()}"
        assert "helper failed" not in tail() and "sync failed" not in tail(), tail()
        subprocess.run(cmd + ["stop", "-t", "10", name], capture_output=True, timeout=30)
        assert proc.wait(timeout=30) == 0, tail()
    finally:
        subprocess.run(cmd + ["rm", "-f", name], capture_output=True, timeout=60)

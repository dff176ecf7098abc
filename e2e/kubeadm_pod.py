"""The daemon started the way kubeadm's kube-proxy DaemonSet starts it, without an image or a
container runtime (the image itself runs under podman in `make image-test`).

What a kubelet gives that pod, and what this reproduces in the lab's node namespace:
  - PID 1 of its own PID namespace (or, with init=..., PID 2 below a minimal init: tini, as
    `docker run --init`, or a shell entrypoint), a private mount namespace, a read-only root;
  - the command line `/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf
    --hostname-override=<node>` (the kubelet expands $(NODE_NAME)), where /usr/local/bin/kube-proxy
    is the same link to kube-proxy-nft the image has;
  - kubeadm's own ConfigMap (`config.conf` as `kubeadm init` writes it, and `kubeconfig.conf` with
    a tokenFile) mounted read-only at /var/lib/kube-proxy, the service-account token and CA at
    /var/run/secrets/kubernetes.io/serviceaccount, /lib/modules read-only, /run/xtables.lock;
  - the environment a kubelet sets: NODE_NAME, HOSTNAME, KUBERNETES_SERVICE_HOST/PORT (the
    `kubernetes` Service's ClusterIP, which nothing answers before the proxy programs it).

The root is a tmpfs of our own with the host's /usr and /etc bound read-only (Debian's merged
/usr gives /bin and /lib as links), remounted read-only before the daemon starts: anything it
writes outside its volumes fails as it would in the pod. Everything lives in the lab's temp dir
and the namespaces the lab deletes; the process is the lab's, killed by PID.
"""
import os
import signal
import subprocess
import textwrap
import time

import netlab
from netlab import LabError

# kubeadm's KubeProxyConfiguration as `kubeadm init` writes it into the kube-proxy ConfigMap
# (every field present, unset ones empty or null); only clusterCIDR is the lab's pod network.
KUBEADM_CONFIG = textwrap.dedent("""\
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    bindAddress: 0.0.0.0
    bindAddressHardFail: false
    clientConnection:
      acceptContentTypes: ""
      burst: 0
      contentType: ""
      kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
      qps: 0
    clusterCIDR: 10.244.0.0/16,fd00:10:244::/48
    configSyncPeriod: 0s
    conntrack:
      maxPerCore: null
      min: null
      tcpBeLiberal: false
      tcpCloseWaitTimeout: null
      tcpEstablishedTimeout: null
      udpStreamTimeout: 0s
      udpTimeout: 0s
    detectLocal:
      bridgeInterface: ""
      interfaceNamePrefix: ""
    detectLocalMode: ""
    enableProfiling: false
    healthzBindAddress: ""
    hostnameOverride: ""
    iptables:
      localhostNodePorts: null
      masqueradeAll: false
      masqueradeBit: null
      minSyncPeriod: 0s
      syncPeriod: 0s
    ipvs:
      excludeCIDRs: null
      minSyncPeriod: 0s
      scheduler: ""
      strictARP: false
      syncPeriod: 0s
      tcpFinTimeout: 0s
      tcpTimeout: 0s
      udpTimeout: 0s
    kind: KubeProxyConfiguration
    logging:
      flushFrequency: 0
      options:
        json:
          infoBufferSize: "0"
        text:
          infoBufferSize: "0"
      verbosity: 0
    metricsBindAddress: ""
    mode: ""
    nftables:
      masqueradeAll: false
      masqueradeBit: null
      minSyncPeriod: 0s
      syncPeriod: 0s
    nodePortAddresses: null
    oomScoreAdj: null
    portRange: ""
    showHiddenMetricsForVersion: ""
    winkernel:
      enableDSR: false
      forwardHealthCheckVip: false
      networkName: ""
      rootHnsEndpointName: ""
      sourceVip: ""
    """)

# kubeadm's kubeconfig.conf (cmd/kubeadm/app/phases/addons/proxy), the API server's real address.
KUBEADM_KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: {server}
      name: default
    contexts:
    - context:
        cluster: default
        namespace: default
        user: default
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
    """)

COMMAND = ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf"]

# Runs in a private mount namespace inside the node's network namespace: builds the pod's root,
# then starts the container's entrypoint in it as PID 1 of a new PID namespace, as a runtime does
# (the entrypoint's first child, the daemon below an init, is PID 2).
POD_SHELL = r"""
set -eu
R=$1 BIN=$2 CM=$3 SA=$4 LOCK=$5
shift 5
mount -t tmpfs -o mode=0755,size=8m kpn-pod-root "$R"
for d in usr etc; do
  mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d"
done
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d"; fi
done
# The image's /usr/local/bin: the binary and the link kubeadm's command line names.
mount -t tmpfs -o mode=0755,size=1m kpn-pod-bin "$R/usr/local/bin"
touch "$R/usr/local/bin/kube-proxy-nft"
mount --bind "$BIN" "$R/usr/local/bin/kube-proxy-nft"
ln -s kube-proxy-nft "$R/usr/local/bin/kube-proxy"
mount -o remount,ro "$R/usr/local/bin"
# The pod's volumes.
mkdir -p "$R/var/lib/kube-proxy" "$R/run/secrets/kubernetes.io/serviceaccount" "$R/proc" "$R/sys" "$R/dev" "$R/tmp"
ln -s ../run "$R/var/run"
mount --bind "$CM" "$R/var/lib/kube-proxy"; mount -o remount,bind,ro "$R/var/lib/kube-proxy"
mount --bind "$SA" "$R/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$R/run/secrets/kubernetes.io/serviceaccount"
touch "$R/run/xtables.lock"; mount --bind "$LOCK" "$R/run/xtables.lock"
mount -t sysfs -o ro sysfs "$R/sys"
mount --rbind /dev "$R/dev"
mount -o remount,ro "$R"
exec unshare --pid --fork --kill-child=SIGKILL --mount-proc="$R/proc" chroot "$R" "$@"
"""


class KubeadmPod(netlab.Daemon):
    """kube-proxy-nft as the container of kubeadm's DaemonSet, in the lab's node namespace,
    reading `api` (an apiserver_lab.ApiServer in the node namespace) with the service-account
    token. init=None: the daemon is PID 1; init=["/usr/bin/tini", "--"]: it runs below it."""

    def __init__(self, lab, api, init=None, label="kube-proxy-pod", node=netlab.NODE_NAME,
                 config=KUBEADM_CONFIG):
        self.lab = lab
        self.label = label
        self.runs = []
        self.proc = None
        self.log = None
        self.init = list(init or [])
        d = os.path.join(lab.tmp, label)
        self.root = os.path.join(d, "root")
        configmap = os.path.join(d, "configmap")
        for p in (self.root, configmap):
            os.makedirs(p)
        with open(os.path.join(configmap, "config.conf"), "w") as f:
            f.write(config)
        with open(os.path.join(configmap, "kubeconfig.conf"), "w") as f:
            f.write(KUBEADM_KUBECONFIG.format(server=api.url))
        _, sa_dir = api.incluster_env()
        lock = os.path.join(d, "xtables.lock")
        open(lock, "w").close()
        script = os.path.join(d, "pod.sh")
        with open(script, "w") as f:
            f.write(POD_SHELL)
        # The kubelet's environment for a hostNetwork pod, nothing of the test runner's.
        env = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               f"HOSTNAME={node}", f"NODE_NAME={node}", "KUBERNETES_SERVICE_HOST=10.96.0.1",
               "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
               "KUBERNETES_PORT=tcp://10.96.0.1:443"]
        self.command = COMMAND + [f"--hostname-override={node}"]
        self.args = ["unshare", "--mount", "--propagation", "private", "sh", script, self.root, netlab.BIN,
                     configmap, sa_dir, lock, *env, *self.init, *self.command]
        self.env = None
        lab.daemons.append(self)

    def pid1(self):
        """The host PID of the container's first process (the daemon, or its init)."""
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            kids = f.read().split()
        if len(kids) != 1:
            raise LabError(f"unshare {self.proc.pid} has children {kids}")
        return int(kids[0])

    def daemon_pid(self):
        """The daemon's host PID, and its PID inside the pod's PID namespace."""
        pid = self.pid1()
        if self.init:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
            if len(kids) != 1:
                raise LabError(f"the init {pid} has children {kids}")
            pid = kids[0]
        with open(f"/proc/{pid}/status") as f:
            nspid = next(l for l in f if l.startswith("NSpid:")).split()[1:]
        return pid, int(nspid[-1])

    def wait_started(self, timeout=15.0):
        """Until the entrypoint runs the daemon (the pod's root is built)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise LabError(f"the pod ended (exit {self.proc.poll()})\n{self.tail()}")
            try:
                pid, _ = self.daemon_pid()
                with open(f"/proc/{pid}/cmdline") as f:
                    argv = f.read().split("\0")[:-1]
                if argv == self.command:
                    return pid
            except (OSError, StopIteration, LabError):
                pass
            if time.monotonic() > deadline:
                raise LabError(f"the pod did not start the daemon within {timeout}s\n{self.tail()}")
            time.sleep(0.05)

    def terminate(self, timeout=10.0):
        """SIGTERM to the pod's PID 1, as the kubelet stops a container; -> its exit code."""
        os.kill(self.pid1(), signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"the pod did not stop within {timeout}s of SIGTERM\n{self.tail()}")

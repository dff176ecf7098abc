#!/usr/bin/env python3
"""Synthetic cluster state for the benchmark: N ClusterIP services x E endpoints each.

Objects are written as `kubectl get -o json` prints them (Service v1, EndpointSlice
discovery.k8s.io/v1), grouped into `{"kind":"List","apiVersion":"v1","items":[...]}` files:
  bulk-NNNN.json   CHUNK services + their slices each
  probe-NN.json    one small "probe" service + slice each, so a change rewrites only a small file
  node.json        the Node the daemon runs as (its --hostname-override)

Every service: TCP port 80 (port name "p80") -> endpoint port 8080. ClusterIPs are unique, taken from
10.96.0.0/12. Endpoint IPs are unique across the whole state, taken from 10.244.0.0/16 (the
--cluster-cidr) onwards: 10k x 10 = 100k endpoints does not fit in one /16, so past 10.244.255.254
allocation spills into 10.245.0.0/16 (addresses ending in .0 or .255 are skipped). Uniqueness is
kept on purpose: sharing endpoint IPs between services would shrink per-endpoint state (e.g. a
hairpin set) and flatter the daemon.

kind="external" (the external-traffic comparison) makes every service a LoadBalancer: a unique
nodePort (20000 upwards: 10k services do not fit Kubernetes' default 30000-32767 range, a cluster
sets --service-node-port-range for that), a unique LB ingress IP from 172.16.0.0/12, every 4th
service externalTrafficPolicy Local, every 10th with two loadBalancerSourceRanges; endpoint 0 of
each service runs on this node (so Local services have a local endpoint to go to).

Usable as a module (the driver uses State / Allocator to make further unique changes) or as a CLI:
  python3 bench/gen_state.py --services 1000 --endpoints 10 --out /tmp/state
"""
import argparse
import ipaddress
import json
import os

NAMESPACE = "bench"
NODE_NAME = "bench-node"
NODE_IP = "192.168.77.10"
CHUNK = 1000
SVC_PORT = 80
EP_PORT = 8080
PORT_NAME = "p80"

CLUSTER_IP_BASE = int(ipaddress.IPv4Address("10.96.0.10"))
CLUSTER_IP_LAST = int(ipaddress.IPv4Address("10.111.255.254"))  # end of 10.96.0.0/12
EP_IP_BASE = int(ipaddress.IPv4Address("10.244.0.1"))
EP_IP_LAST = int(ipaddress.IPv4Address("10.253.255.254"))


class Allocator:
    """Hands out unique IPv4 addresses in order, skipping .0 and .255 host bytes."""

    def __init__(self, first, last):
        self.next = first
        self.last = last

    def take(self):
        while self.next & 0xFF in (0, 255):
            self.next += 1
        if self.next > self.last:
            raise RuntimeError("address range exhausted")
        ip = self.next
        self.next += 1
        return str(ipaddress.IPv4Address(ip))


def _ts(i):
    return "2025-01-01T00:%02d:%02dZ" % ((i // 60) % 60, i % 60)


LB_IP_BASE = int(ipaddress.IPv4Address("172.16.0.10"))
LB_IP_LAST = int(ipaddress.IPv4Address("172.31.255.254"))
NODE_PORT_BASE = 20000


def service_obj(name, cluster_ip, uid_n, external=None, proto="TCP"):
    svc = _service_obj(name, cluster_ip, uid_n, proto)
    if external:
        spec = svc["spec"]
        spec["type"] = "LoadBalancer"
        spec["ports"][0]["nodePort"] = external["node_port"]
        spec["externalTrafficPolicy"] = "Local" if uid_n % 4 == 0 else "Cluster"
        if uid_n % 4 == 0:
            spec["healthCheckNodePort"] = 40000 + uid_n % 20000
        if uid_n % 10 == 0:
            spec["loadBalancerSourceRanges"] = ["203.0.113.0/24", "198.51.100.0/24"]
        svc["status"] = {"loadBalancer": {"ingress": [{"ip": external["lb_ip"], "ipMode": "VIP"}]}}
    return svc


def _service_obj(name, cluster_ip, uid_n, proto="TCP"):
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": "00000000-0000-4000-8000-%012d" % uid_n,
            "resourceVersion": str(1000 + uid_n),
            "creationTimestamp": _ts(uid_n),
            "labels": {"app": name},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": cluster_ip,
            "clusterIPs": [cluster_ip],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "selector": {"app": name},
            "ports": [{"name": PORT_NAME, "port": SVC_PORT, "protocol": proto,
                       "targetPort": EP_PORT}],
        },
        "status": {"loadBalancer": {}},
    }


def slice_obj(svc_name, ep_ips, uid_n, generation=1, local_first=False, proto="TCP"):
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": svc_name + "-x7k2p",
            "namespace": NAMESPACE,
            "uid": "00000000-0000-4000-9000-%012d" % uid_n,
            "resourceVersion": str(500000 + uid_n * 7 + generation),
            "generation": generation,
            "creationTimestamp": _ts(uid_n),
            "labels": {
                "kubernetes.io/service-name": svc_name,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": svc_name,
                                 "uid": "00000000-0000-4000-8000-%012d" % uid_n,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [ip],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": NODE_NAME if (local_first and k == 0) else "node-%03d" % (k % 100),
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE,
                              "name": "%s-pod-%d" % (svc_name, k)},
            }
            for k, ip in enumerate(ep_ips)
        ],
        "ports": [{"name": PORT_NAME, "port": EP_PORT, "protocol": proto}],
    }


def node_obj():
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": {"kubernetes.io/hostname": NODE_NAME}},
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": NODE_IP},
                                 {"type": "Hostname", "address": NODE_NAME}]},
    }


def as_list(items):
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": items}


def write_atomic(path, obj):
    """Write to a hidden temp name in the same directory, then rename into place."""
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".tmp-" + base)
    with open(tmp, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    os.rename(tmp, path)


# What share of the services get ClientIP affinity or a scheduler annotation (run_bench.py
# --affinity-share / --scheduler): every N-th service and every probe; N = 0: none.
SHARE = {"every": 0, "affinity": False, "scheduler": None}


def share_of(fraction, affinity=False, scheduler=None):
    return {"every": int(round(1 / fraction)) if fraction > 0 else 0, "affinity": affinity, "scheduler": scheduler}


def set_share(fraction, affinity=False, scheduler=None):
    SHARE.update(share_of(fraction, affinity, scheduler))


class State:
    """The generated cluster: every service name -> (clusterIP, [endpoint IPs]), plus allocators
    positioned after everything already used, so later changes stay unique."""

    def __init__(self, services, endpoints, probes, kind="clusterip", share=None):
        self.n, self.e, self.p = services, endpoints, probes
        self.kind = kind
        # This state's own share (share_of()), so that states written side by side in one run
        # keep theirs; default: the module's (--affinity-share / --scheduler).
        self.share = dict(share or SHARE)
        self.lb_ips = Allocator(LB_IP_BASE, LB_IP_LAST)
        self.svc_ips = Allocator(CLUSTER_IP_BASE, CLUSTER_IP_LAST)
        self.ep_ips = Allocator(EP_IP_BASE, EP_IP_LAST)
        self.services = {}  # name -> {"ip": str, "eps": [str], "uid": int}
        self.bulk_names = []
        self.probe_names = []
        self._uid = 0
        if probes > services:
            raise ValueError("more probes than services")
        for i in range(services - probes):
            self.bulk_names.append(self._new_service("svc-%05d" % i, endpoints))
        for i in range(probes):
            self.probe_names.append(self._new_service("probe-%02d" % i, endpoints))
        self.probe_names_set = set(self.probe_names) if self.share["every"] else set()

    def _new_service(self, name, n_eps):
        self._uid += 1
        self.services[name] = {"ip": self.svc_ips.take(),
                               "eps": [self.ep_ips.take() for _ in range(n_eps)],
                               "uid": self._uid, "gen": 1}
        if self.kind == "external":
            self.services[name]["external"] = {"node_port": NODE_PORT_BASE + self._uid,
                                               "lb_ip": self.lb_ips.take()}
        return name

    def new_service(self, name, n_eps):
        return self._new_service(name, n_eps)

    def objects_for(self, name):
        s = self.services[name]
        ext = s.get("external")
        proto = s.get("proto", "TCP")  # bench/datapath_bench.py makes some UDP
        svc = service_obj(name, s["ip"], s["uid"], ext, proto)
        # Every 1/share-th service (and every probe, so that the measured changes hit them):
        # ClientIP affinity, or the scheduler annotation.
        share = self.share
        picked = name in self.probe_names_set or (share["every"] and s["uid"] % share["every"] == 0)
        if picked and share["affinity"]:
            svc["spec"]["sessionAffinity"] = "ClientIP"
            svc["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
        if picked and share["scheduler"]:
            svc["metadata"]["annotations"] = {"kube-proxy-nft.io/scheduler": share["scheduler"]}
        return [svc,
                slice_obj(name, s["eps"], s["uid"], s["gen"], local_first=ext is not None, proto=proto)]

    def file_for(self, name):
        return name + ".json"

    def write(self, out):
        os.makedirs(out, exist_ok=True)
        files = 0
        for c in range(0, len(self.bulk_names), CHUNK):
            items = []
            for name in self.bulk_names[c:c + CHUNK]:
                items.extend(self.objects_for(name))
            write_atomic(os.path.join(out, "bulk-%04d.json" % (c // CHUNK)), as_list(items))
            files += 1
        for name in self.probe_names:
            self.write_service(out, name)
            files += 1
        write_atomic(os.path.join(out, "node.json"), node_obj())
        return files + 1

    def write_service(self, out, name):
        write_atomic(os.path.join(out, self.file_for(name)), as_list(self.objects_for(name)))

    def dir_bytes(self, out):
        return sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--services", type=int, required=True)
    ap.add_argument("--endpoints", type=int, required=True)
    ap.add_argument("--probes", type=int, default=30)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", choices=["clusterip", "external"], default="clusterip")
    a = ap.parse_args()
    st = State(a.services, a.endpoints, a.probes, a.kind)
    files = st.write(a.out)
    print("wrote %d files, %.1f MB, %d services, %d endpoints to %s" % (
        files, st.dir_bytes(a.out) / 1e6, a.services, a.services * a.endpoints, a.out))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The embedded default: a sandbox node (network namespace) with two backend pods and a client pod,
# kube-proxy-nft running on examples/, and a few requests to the ClusterIP. Everything lives in
# namespaces this script creates and removes; the host's own ruleset is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/kube-proxy-nft
ECHO=e2e/echo_server.py
P="kpndemo$$"
NODE="${P}n"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "$NODE" "${P}a" "${P}b" "${P}c" "${P}x"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT

# Background jobs call `ip netns exec` directly: it execs the program, so $! is the PID to stop.
in_ns() { ip netns exec "$1" "${@:2}"; }

ip netns add "$NODE"
in_ns "$NODE" ip link set lo up
in_ns "$NODE" sysctl -qw net.ipv4.ip_forward=1
# An "outside" network with the default route, so ClusterIPs (assigned nowhere) are routed and
# the nat hooks see them.
ip netns add "${P}x"
ip link add "${P}e0" type veth peer name eth0 netns "${P}x"
ip link set "${P}e0" netns "$NODE"
in_ns "$NODE" ip link set "${P}e0" up
in_ns "$NODE" ip addr add 192.168.100.1/24 dev "${P}e0"
in_ns "${P}x" ip link set eth0 up
in_ns "${P}x" ip addr add 192.168.100.254/24 dev eth0
in_ns "$NODE" ip route add default via 192.168.100.254

# Pods, Calico style: a /32 on eth0, default route via a link-local gateway that the node's side
# of the veth answers for (proxy ARP), and a host route on the node.
add_pod() {  # name ip
  local ns="$P$1" ip="$2" veth="${P}$1h"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" netns "$NODE"
  in_ns "$NODE" ip link set "$veth" up
  in_ns "$NODE" sysctl -qw "net.ipv4.conf.$veth.proxy_arp=1"
  in_ns "$NODE" ip route add "$ip/32" dev "$veth"
  in_ns "$ns" ip link set lo up
  in_ns "$ns" ip link set eth0 up
  in_ns "$ns" ip addr add "$ip/32" dev eth0
  in_ns "$ns" ip route add 169.254.1.1 dev eth0 scope link
  in_ns "$ns" ip route add default via 169.254.1.1 dev eth0
}
add_pod a 10.244.1.2
add_pod b 10.244.1.3
add_pod c 10.244.1.9

ip netns exec "${P}a" /usr/bin/python3 "$ECHO" --addr 10.244.1.2 --tcp 8080 >/dev/null & PIDS+=($!)
ip netns exec "${P}b" /usr/bin/python3 "$ECHO" --addr 10.244.1.3 --tcp 8080 --tcp 5353 --udp 5353 >/dev/null & PIDS+=($!)

LOG=$(mktemp)
ip netns exec "$NODE" "$BIN" --manifests=examples --hostname-override=demo-node --cluster-cidr=10.244.0.0/16 \
  --v=2 2>"$LOG" & PIDS+=($!)
for _ in $(seq 100); do grep -q "sync done" "$LOG" && break; sleep 0.1; done
grep "sync done" "$LOG" | head -1

echo "== nft list table ip kube-proxy (the 384 empty backends maps left out)"
in_ns "$NODE" nft list table ip kube-proxy | awk '
  /^\tmap backends-/ { block = $0 "\n"; inmap = 1; next }
  inmap { block = block $0 "\n"; if ($0 ~ /^\t}/) { if (block ~ /elements/) printf "%s", block; inmap = 0 } ; next }
  { print }' | grep -v '^$'

echo "== 8 requests from pod 10.244.1.9 to web (ClusterIP 10.96.0.10:80); each line: <endpoint> <source it saw>"
in_ns "${P}c" /usr/bin/python3 - <<'PY'
import socket
for _ in range(8):
    s = socket.create_connection(("10.96.0.10", 80), timeout=2)
    print("  answered by", s.recv(100).decode().strip())
    s.close()
PY
echo "== the same from the node itself (outside the cluster CIDR, so masqueraded)"
in_ns "$NODE" /usr/bin/python3 -c '
import socket
s = socket.create_connection(("10.96.0.10", 80), timeout=2)
print("  answered by", s.recv(100).decode().strip())'
echo "== UDP to dns (10.96.0.53:53 -> 10.244.1.3:5353)"
in_ns "${P}c" /usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.connect(("10.96.0.53", 53)); s.send(b"q")
print("  answered by", s.recv(100).decode().strip())'
rm -f "$LOG"
echo "== done: namespaces and processes are removed on exit"

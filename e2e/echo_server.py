#!/usr/bin/python3
"""Echo server for the e2e pods.

Listens on TCP and UDP ports on the given addresses (IPv4 and IPv6) and answers every accepted
TCP connection and every UDP datagram with exactly one line:

    "<own-ip> <peer-ip>"            (default)
    "<own-ip> <peer-ip> <own-port>" (with --show-port)

own-ip is the local address of the accepted socket / the address the datagram was received on,
peer-ip is the remote address as this pod sees it (so a masqueraded client shows up as a node
address). Prints "READY" on stdout once every socket is bound, then serves forever.

    echo_server.py --addr 10.244.0.10 --addr fd00:10:244::10 --tcp 8080 --udp 5353 [--show-port]

--stream PORT: a long-lived TCP port instead. The connection stays open and every line the client
sends is answered with "<own-ip> <peer-ip> <that line>", for as long as the client keeps talking
(a connection that outlives a ruleset change shows whether its NAT binding survived).
"""
import argparse
import ipaddress
import selectors
import socket
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", action="append", required=True, help="address to bind (repeatable)")
    ap.add_argument("--tcp", action="append", type=int, default=[], help="TCP port (repeatable)")
    ap.add_argument("--udp", action="append", type=int, default=[], help="UDP port (repeatable)")
    ap.add_argument("--stream", action="append", type=int, default=[],
                    help="long-lived TCP port: every line is answered (repeatable)")
    ap.add_argument("--show-port", action="store_true")
    args = ap.parse_args()

    sel = selectors.DefaultSelector()

    def listen(fam, addr, port, kind):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(512)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, kind)

    for addr in args.addr:
        fam = socket.AF_INET6 if ipaddress.ip_address(addr).version == 6 else socket.AF_INET
        for port in args.tcp:
            listen(fam, addr, port, "tcp")
        for port in args.stream:
            listen(fam, addr, port, "stream")
        for port in args.udp:
            # Bound to one address: a reply leaves from exactly the address the datagram reached,
            # which is what conntrack needs to un-DNAT it, and getsockname() is the own IP.
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.bind((addr, port))
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, "udp")

    def line(own, peer):
        text = f"{own[0]} {peer[0]}"
        if args.show_port:
            text += f" {own[1]}"
        return (text + "\n").encode()

    print("READY", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            try:
                if key.data == "tcp":
                    conn, peer = s.accept()
                    try:
                        conn.settimeout(2)
                        conn.sendall(line(conn.getsockname(), peer))
                        conn.shutdown(socket.SHUT_WR)
                    finally:
                        conn.close()
                elif key.data == "stream":
                    conn, peer = s.accept()
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ, ["conn", peer, b""])
                elif key.data[0] == "conn":
                    data = s.recv(4096)
                    if not data:
                        sel.unregister(s)
                        s.close()
                        continue
                    key.data[2] += data
                    *lines, key.data[2] = key.data[2].split(b"\n")
                    for ln in lines:
                        s.setblocking(True)
                        s.settimeout(2)
                        s.sendall(line(s.getsockname(), key.data[1])[:-1] + b" " + ln + b"\n")
                        s.setblocking(False)
                else:
                    while True:
                        try:
                            data, peer = s.recvfrom(65535)
                        except BlockingIOError:
                            break
                        s.sendto(line(s.getsockname(), peer), peer)
            except OSError as e:  # a client that vanished must never stop the server
                if isinstance(key.data, list):
                    sel.unregister(s)
                    s.close()
                print(f"echo_server: {e}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()

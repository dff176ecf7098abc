#!/usr/bin/python3
"""Long-running client inside one network namespace, driven by JSON lines on stdin.

One request per line, one JSON answer per line on stdout. Results of a single connection are a
string: the echo server's answer line ("<own-ip> <peer-ip>[ <port>]"), or "ERR:<ERRNO-NAME>"
(ERR:ECONNREFUSED, ERR:ETIMEDOUT, ERR:EHOSTUNREACH, ...; ERR:EMPTY when the peer closed without
answering). Every connection is new (new socket, new source port): nothing is retried.

Requests:
  {"op": "tcp"|"udp", "host", "port", "timeout"?, "bind"?, "sport"?} -> {"result": str}
  {"op": "many", "proto", "host", "port", "n", "timeout"?, "bind"?}  -> {"results": [str]}
  {"op": "loop_start", "host", "port", "interval"?, "connect_timeout"?}  -> {"ok": true}
        opens a NEW TCP connection every `interval` seconds in a background thread
  {"op": "loop_stats"} / {"op": "loop_stop"}
        -> {"attempts", "ok", "failures": [[t, err]], "answers": {answer: n}, "max_ms", "elapsed"}
  {"op": "udp_open", "id", "host", "port", "sport"?} / {"op": "udp_ask", "id", "timeout"?} -> {"result"}
        one long-lived connected UDP socket (a single conntrack flow) asked repeatedly
  {"op": "stream_start", "id", "host", "port", "interval"?} / {"op": "stream_stop", "id"}
        ONE long-lived TCP connection (an echo_server --stream port) exchanging a numbered line
        every `interval` seconds in a background thread; never reconnected: the first error ends it
        -> {"exchanges", "answers": {own-ip: n}, "failures": [[t, err]], "max_ms", "elapsed"}
  {"op": "hold_open", "id", "host", "port", "timeout"?} -> {"result": str}
        ONE long-lived TCP connection (an echo_server --stream port): sends one line and returns the
        answer, then holds the connection open, idle, until {"op": "hold_close", "id"}
  {"op": "sctp_init", "host", "port", "sport", "count"?}  -> {"ok": true}
        sends raw SCTP INIT chunks (IPPROTO_SCTP raw socket, CRC32c checksum)
  {"op": "quit"}
"""
import errno
import ipaddress
import json
import os
import socket
import struct
import sys
import threading
import time


def family(host):
    return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET


def err_name(e):
    if isinstance(e, socket.timeout):
        return "ERR:ETIMEDOUT"
    if isinstance(e, OSError) and e.errno is not None:
        return "ERR:" + errno.errorcode.get(e.errno, str(e.errno))
    return "ERR:" + type(e).__name__


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    text = buf.decode(errors="replace").strip()
    return text if text else "ERR:EMPTY"


def tcp_once(host, port, timeout=2.0, bind=None, connect_timeout=None, sport=0):
    s = socket.socket(family(host), socket.SOCK_STREAM)
    try:
        if bind or sport:
            s.bind((bind or "", sport))
        s.settimeout(connect_timeout if connect_timeout is not None else timeout)
        s.connect((host, port))
        s.settimeout(timeout)
        return read_line(s)
    except Exception as e:  # noqa: BLE001 - every failure is a result
        return err_name(e)
    finally:
        s.close()


def udp_once(host, port, timeout=2.0, bind=None):
    s = socket.socket(family(host), socket.SOCK_DGRAM)
    try:
        if bind:
            s.bind((bind, 0))
        s.settimeout(timeout)
        s.connect((host, port))  # connected: an ICMP port unreachable surfaces as ECONNREFUSED
        s.send(b"hello\n")
        data = s.recv(65535)
        return data.decode(errors="replace").strip() or "ERR:EMPTY"
    except Exception as e:  # noqa: BLE001
        return err_name(e)
    finally:
        s.close()


# ---- SCTP INIT -------------------------------------------------------------------------------

def _crc32c_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def sctp_init_packet(sport, dport):
    init_tag = int.from_bytes(os.urandom(4), "big") or 1
    tsn = int.from_bytes(os.urandom(4), "big")
    # INIT chunk: type 1, flags 0, length 20, initiate tag, a_rwnd, out streams, in streams, TSN
    chunk = struct.pack("!BBHIIHHI", 1, 0, 20, init_tag, 65535, 10, 10, tsn)
    header = struct.pack("!HHII", sport, dport, 0, 0)  # verification tag 0 for INIT
    pkt = header + chunk
    csum = crc32c(pkt)
    # The CRC32c value goes on the wire least significant byte first (RFC 4960 appendix B,
    # Linux: cpu_to_le32).
    return pkt[:8] + struct.pack("<I", csum) + pkt[12:]


def sctp_init(host, port, sport, count=1):
    s = socket.socket(family(host), socket.SOCK_RAW, 132)
    try:
        for _ in range(count):
            s.sendto(sctp_init_packet(sport, port), (host, 0))
    finally:
        s.close()


# ---- the 20 ms loop ------------------------------------------------------------------------------

class Loop:
    def __init__(self, host, port, interval, connect_timeout, read_timeout):
        self.host, self.port = host, port
        self.interval, self.connect_timeout, self.read_timeout = interval, connect_timeout, read_timeout
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.attempts = 0
        self.ok = 0
        self.failures = []
        self.answers = {}
        self.max_ms = 0.0
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            start = time.monotonic()
            res = tcp_once(self.host, self.port, timeout=self.read_timeout,
                           connect_timeout=self.connect_timeout)
            ms = (time.monotonic() - start) * 1000
            with self.lock:
                self.attempts += 1
                self.max_ms = max(self.max_ms, ms)
                if res.startswith("ERR:"):
                    self.failures.append([round(start - self.t0, 3), res])
                else:
                    self.ok += 1
                    key = res.split()[0]
                    self.answers[key] = self.answers.get(key, 0) + 1
            nxt += self.interval
            delay = nxt - time.monotonic()
            if delay > 0:
                self.stop_ev.wait(delay)
            else:
                nxt = time.monotonic()

    def stats(self):
        with self.lock:
            return {"attempts": self.attempts, "ok": self.ok, "failures": list(self.failures),
                    "answers": dict(self.answers), "max_ms": round(self.max_ms, 1),
                    "elapsed": round(time.monotonic() - self.t0, 3)}

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        return self.stats()


class Stream:
    def __init__(self, host, port, interval, timeout=2.0):
        self.interval, self.timeout = interval, timeout
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.exchanges = 0
        self.answers = {}
        self.failures = []
        self.max_ms = 0.0
        self.t0 = time.monotonic()
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        buf = b""
        n = 0
        while not self.stop_ev.is_set():
            start = time.monotonic()
            n += 1
            try:
                self.sock.sendall(b"%d\n" % n)
                while b"\n" not in buf:
                    chunk = self.sock.recv(4096)
                    if not chunk:
                        raise ConnectionResetError(errno.ECONNRESET, "closed by peer")
                    buf += chunk
                line, buf = buf.split(b"\n", 1)
                parts = line.decode(errors="replace").split()
                if len(parts) != 3 or parts[2] != str(n):
                    raise ValueError(f"answer {line!r} to line {n}")
            except Exception as e:  # noqa: BLE001 - the first error ends the stream
                with self.lock:
                    self.failures.append([round(start - self.t0, 3), err_name(e)])
                return
            with self.lock:
                self.exchanges += 1
                self.answers[parts[0]] = self.answers.get(parts[0], 0) + 1
                self.max_ms = max(self.max_ms, (time.monotonic() - start) * 1000)
            self.stop_ev.wait(self.interval)

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        self.sock.close()
        with self.lock:
            return {"exchanges": self.exchanges, "answers": dict(self.answers),
                    "failures": list(self.failures), "max_ms": round(self.max_ms, 1),
                    "elapsed": round(time.monotonic() - self.t0, 3)}


def handle(req, state):
    op = req["op"]
    if op == "tcp":
        return {"result": tcp_once(req["host"], req["port"], req.get("timeout", 2.0), req.get("bind"),
                                   sport=req.get("sport", 0))}
    if op == "udp":
        return {"result": udp_once(req["host"], req["port"], req.get("timeout", 2.0), req.get("bind"))}
    if op == "many":
        fn = tcp_once if req["proto"] == "tcp" else udp_once
        return {"results": [fn(req["host"], req["port"], req.get("timeout", 2.0), req.get("bind"))
                            for _ in range(req["n"])]}
    if op == "loop_start":
        if state.get("loop"):
            state["loop"].stop()
        state["loop"] = Loop(req["host"], req["port"], req.get("interval", 0.02),
                             req.get("connect_timeout", 0.9), req.get("read_timeout", 3.0))
        return {"ok": True}
    if op == "loop_stats":
        return state["loop"].stats()
    if op == "loop_stop":
        loop = state.pop("loop")
        return loop.stop()
    if op == "udp_open":  # one connected UDP socket kept across requests: one conntrack flow
        s = socket.socket(family(req["host"]), socket.SOCK_DGRAM)
        if req.get("sport"):  # a fixed source port: the same flow even across a new socket
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("::" if ":" in req["host"] else "0.0.0.0", req["sport"]))
        s.connect((req["host"], req["port"]))
        state.setdefault("udp", {})[req["id"]] = s
        return {"ok": True}
    if op == "udp_ask":
        s = state["udp"][req["id"]]
        s.settimeout(req.get("timeout", 2.0))
        try:
            s.send(b"hello\n")
            return {"result": s.recv(65535).decode(errors="replace").strip() or "ERR:EMPTY"}
        except Exception as e:  # noqa: BLE001
            return {"result": err_name(e)}
    if op == "stream_start":
        state.setdefault("streams", {})[req["id"]] = Stream(req["host"], req["port"],
                                                             req.get("interval", 0.02))
        return {"ok": True}
    if op == "stream_stop":
        return state["streams"].pop(req["id"]).stop()
    if op == "hold_open":
        try:
            s = socket.create_connection((req["host"], req["port"]), timeout=req.get("timeout", 2.0))
            s.sendall(b"1\n")
            result = read_line(s) or "ERR:EMPTY"
        except Exception as e:  # noqa: BLE001
            return {"result": err_name(e)}
        state.setdefault("held", {})[req["id"]] = s
        return {"result": result}
    if op == "hold_close":
        state["held"].pop(req["id"]).close()
        return {"ok": True}
    if op == "sctp_init":
        sctp_init(req["host"], req["port"], req["sport"], req.get("count", 1))
        return {"ok": True}
    if op == "ping":
        return {"ok": True}
    raise ValueError(f"unknown op {op}")


def main():
    state = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            resp = handle(req, state)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            resp = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(resp), flush=True)
    if state.get("loop"):
        state["loop"].stop()
    for stream in state.get("streams", {}).values():
        stream.stop()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""CPU time of one libnftables transaction on our two tables while another agent's table holds
10 000 chains: median of 15, per transaction kind, in a fresh network namespace (needs root).
Run three ways to compare:
  python3 bench/libnftables_cache_cost.py                          # libnftables as is
  LD_PRELOAD=build/cache-scope-preload.so python3 bench/...        # interposers, no scope
  KPN_SCOPE=1 LD_PRELOAD=build/cache-scope-preload.so python3 ...  # the daemon's helper
(`make build/cache-scope-preload.so`). The foreign table is written by build/foreign-tables."""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = "kube-proxy"


def measure():
    # RTLD_GLOBAL: libnftnl must be visible to the interposers' dlsym(RTLD_NEXT).
    lib = ctypes.CDLL("libnftables.so.1", mode=os.RTLD_GLOBAL)
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    for f in ("nft_ctx_buffer_output", "nft_ctx_buffer_error", "nft_ctx_get_error_buffer"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ctx = lib.nft_ctx_new(0)
    lib.nft_ctx_output_set_flags(ctx, 16)  # NFT_CTX_OUTPUT_JSON: also what makes 1.0.6 read JSON
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_buffer_error(ctx)

    def run(cmds):
        rc = lib.nft_run_cmd_from_buffer(ctx, json.dumps({"nftables": cmds}).encode())
        return rc, (lib.nft_ctx_get_error_buffer(ctx) or b"").decode().strip()[:120]

    setup = []
    for fam in ("ip", "ip6"):
        setup += [{"add": {"table": {"family": fam, "name": T}}},
                  {"add": {"set": {"family": fam, "table": T, "name": "s",
                                   "type": "ipv4_addr" if fam == "ip" else "ipv6_addr"}}},
                  {"add": {"chain": {"family": fam, "table": T, "name": "c"}}}]
    assert run(setup)[0] == 0

    def elem(fam, i):
        return "10.0.0.%d" % (i % 200 + 1) if fam == "ip" else "fd00::%x" % (i + 1)

    kinds = {
        "add element": lambda fam, i: [{"add": {"element": {"family": fam, "table": T, "name": "s",
                                                            "elem": [elem(fam, i)]}}}],
        "add rule": lambda fam, i: [{"add": {"rule": {"family": fam, "table": T, "chain": "c",
                                                      "expr": [{"counter": None}]}}}],
        "flush chain": lambda fam, i: [{"flush": {"chain": {"family": fam, "table": T, "name": "c"}}}],
    }
    for name, f in kinds.items():
        cpu, err = [], None
        for i in range(15):
            ops = f("ip", i) + f("ip6", i)
            t = time.process_time()
            rc, err = run(ops)
            cpu.append((time.process_time() - t) * 1000)
            if rc:
                break
            if name == "add element":
                run([{"delete": {"element": {"family": fam, "table": T, "name": "s", "elem": [elem(fam, i)]}}}
                     for fam in ("ip", "ip6")])
        print("  ip+ip6 %-12s median CPU %.2f ms %s" % (name, statistics.median(cpu), "" if not rc else err))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        print(" our tables only:")
        measure()
        subprocess.run([os.path.join(ROOT, "build", "foreign-tables"), "chains", "inet", "cni", "10000"], check=True)
        print(" with 10 000 foreign chains:")
        measure()
    else:
        sys.exit(subprocess.call(["unshare", "-n", sys.executable, os.path.abspath(__file__), "--inside"]))

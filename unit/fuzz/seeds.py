#!/usr/bin/env python3
"""Seed corpora for the fuzzers, from the tests: the raw-string literals (R"(...)") of the unit
tests that feed each decoder, and the example manifests. Usage: seeds.py TARGET OUTDIR"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = {
    "manifest_yaml": ["unit/decode_test.cc", "unit/manifest_dir_test.cc", "examples/web.yaml"],
    "manifest_json": ["unit/decode_test.cc", "unit/kube_wire_test.cc", "examples/dns.json"],
    "watch_stream": ["unit/kube_wire_test.cc", "unit/reflector_test.cc"],
    "kubeconfig": ["unit/kube_config_test.cc"],
    "render_fake": ["unit/decode_test.cc", "unit/manifest_dir_test.cc", "examples/web.yaml"],
}
RAW = re.compile(r'R"\((.*?)\)"', re.S)


def main():
    target, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    n = 0
    for rel in SOURCES[target]:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        pieces = RAW.findall(text) if rel.endswith(".cc") else [text]
        for p in pieces:
            data = p.encode()
            if target == "watch_stream":
                data = bytes([n % 4, 8]) + data + b"\n" + data  # kind, line limit, two lines
            with open(os.path.join(out, "seed-%s-%03d" % (os.path.basename(rel), n)), "wb") as f:
                f.write(data)
            n += 1
    print("%s: %d seeds" % (target, n))


if __name__ == "__main__":
    main()

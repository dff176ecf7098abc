#!/usr/bin/env python3
"""Both ends of lc_bench.py's connections, each run inside its own network namespace.

  lc_load.py serve PORT
      Accepts TCP connections on every local address (the backend namespace routes the endpoint
      range to itself, so every endpoint address is local) and answers each with the address it
      was reached at (the endpoint), then closes when the client does.
  lc_load.py steady RATE SECONDS VIP...
      Opens RATE short connections a second for SECONDS (each: connect, read the answer, close),
      to the VIPs in turn; prints {"opened", "answered", "failed", "seconds"} as JSON.
  lc_load.py herd VIP HOLD PAUSE_MS BURST
      Opens HOLD long-lived connections to VIP one after another, PAUSE_MS apart (time for the
      daemon's choice to land), prints the endpoints that answered as {endpoint: count}; waits for
      a line on stdin; then opens BURST more at once, prints theirs; keeps every connection open
      until stdin closes.
"""
import asyncio
import json
import sys
import time


async def serve(port):
    async def one(reader, writer):
        ip = writer.get_extra_info("sockname")[0]
        writer.write(ip.encode() + b"\n")
        try:
            await writer.drain()
            await reader.read(1)  # the client's close
        except OSError:
            pass
        writer.close()

    server = await asyncio.start_server(one, "0.0.0.0", port, backlog=4096, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


async def ask(vip, keep=None):
    reader, writer = await asyncio.wait_for(asyncio.open_connection(vip, 80), 5)
    line = await asyncio.wait_for(reader.readline(), 5)
    if keep is None:
        writer.close()
    else:
        keep.append(writer)
    return line.decode().strip()


async def steady(rate, seconds, vips):
    counts = {"opened": 0, "answered": 0, "failed": 0}
    tasks = set()

    async def one(vip):
        try:
            await ask(vip)
            counts["answered"] += 1
        except (OSError, asyncio.TimeoutError):
            counts["failed"] += 1

    start = time.monotonic()
    n = int(rate * seconds)
    for i in range(n):
        # Paced against the clock, not by sleeping a fixed step: a late loop catches up.
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        counts["opened"] += 1
        t = asyncio.ensure_future(one(vips[i % len(vips)]))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    elapsed = time.monotonic() - start
    if tasks:
        await asyncio.wait(tasks)
    counts["seconds"] = round(elapsed, 2)
    print(json.dumps(counts), flush=True)


def tally(answers):
    out = {}
    for a in answers:
        out[a] = out.get(a, 0) + 1
    return out


async def herd(vip, hold, pause_ms, burst):
    keep = []
    held = []
    for _ in range(hold):
        held.append(await ask(vip, keep))
        await asyncio.sleep(pause_ms / 1000)
    print(json.dumps(tally(held)), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)
    answers = await asyncio.gather(*(ask(vip, keep) for _ in range(burst)))
    print(json.dumps(tally(answers)), flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    for w in keep:
        w.close()


def main():
    mode = sys.argv[1]
    if mode == "serve":
        asyncio.run(serve(int(sys.argv[2])))
    elif mode == "steady":
        asyncio.run(steady(float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
    elif mode == "herd":
        asyncio.run(herd(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()

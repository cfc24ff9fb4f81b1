#!/usr/bin/python3
"""A TCP relay that delays every byte by a fixed time plus random jitter.

Used by scripts/netem_run.sh where the kernel has no netem qdisc: the
coordinator connects to LISTEN, the relay connects to TARGET and forwards both
directions, each chunk released DELAY +- JITTER ms after it arrived, never
before the chunk ahead of it (a TCP stream keeps its order; jitter only
spreads the gaps). One line "relay ready" on stdout once every listener is up.

    delay_relay.py --delay-ms 10 --jitter-ms 5 127.0.0.1:7100=10.213.0.2:7000 ...
"""
import argparse
import asyncio
import random
import sys
import time


def parse_pair(text):
    listen, _, target = text.partition("=")
    lh, _, lp = listen.rpartition(":")
    th, _, tp = target.rpartition(":")
    if not (lh and lp.isdigit() and th and tp.isdigit()):
        raise SystemExit(f"delay_relay: expected LISTEN_HOST:PORT=TARGET_HOST:PORT, got {text!r}")
    return (lh, int(lp)), (th, int(tp))


async def pump(reader, writer, delay_s, jitter_s):
    """Copies reader -> writer, each chunk held until its release time."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def release():
        while True:
            item = await queue.get()
            if item is None:
                break
            at, data = item
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(release())
    last = 0.0
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            at = loop.time() + delay_s + (random.uniform(-jitter_s, jitter_s) if jitter_s > 0 else 0.0)
            last = max(last, at)
            await queue.put((last, data))
    except (ConnectionError, OSError):
        pass
    await queue.put(None)
    try:
        await sender
    except (ConnectionError, OSError):
        pass


async def serve(listen, target, delay_s, jitter_s):
    async def handle(c_reader, c_writer):
        try:
            b_reader, b_writer = await asyncio.wait_for(asyncio.open_connection(*target), timeout=10)
        except (OSError, asyncio.TimeoutError):
            c_writer.close()
            return
        await asyncio.gather(pump(c_reader, b_writer, delay_s, jitter_s), pump(b_reader, c_writer, delay_s, jitter_s))

    return await asyncio.start_server(handle, *listen)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    if a.delay_ms < 0 or a.jitter_ms < 0 or a.jitter_ms > a.delay_ms:
        raise SystemExit("delay_relay: need 0 <= jitter <= delay")
    random.seed(a.seed if a.seed is not None else time.time_ns())
    servers = [await serve(*parse_pair(p), a.delay_ms / 1000.0, a.jitter_ms / 1000.0) for p in a.pairs]
    print("relay ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)

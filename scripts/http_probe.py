#!/usr/bin/env python3
"""One streaming client, light on the CPU it shares with the server (Python's http.client, no
framework): N requests one after another to llama-server's /completion shape (ponder serve and
llama-server both speak it), each a fresh random prompt of token ids so no prefix is reused.
Prints time to first token and decode tokens/s, to set against `ponder bench --concurrent 1
--prompt P --gen G` (the same work without HTTP).
Usage: scripts/http_probe.py PORT [--requests 5] [--prompt 128] [--gen 64] [--vocab 150000] [--temperature T]"""
import argparse
import http.client
import json
import random
import statistics
import time

ap = argparse.ArgumentParser()
ap.add_argument("port", type=int)
ap.add_argument("--requests", type=int, default=5)
ap.add_argument("--prompt", type=int, default=128)
ap.add_argument("--gen", type=int, default=64)
ap.add_argument("--vocab", type=int, default=150000)
ap.add_argument("--temperature", type=float, default=None, help="default: the server's")
a = ap.parse_args()
rng = random.Random(time.time_ns())
ttfts, rates = [], []
for i in range(a.requests + 1):  # the first one warms up
    req = {"prompt": [rng.randrange(a.vocab) for _ in range(a.prompt)], "n_predict": a.gen,
           "ignore_eos": True, "stream": True, "cache": False, "cache_prompt": False}
    if a.temperature is not None:
        req["temperature"] = a.temperature
    body = json.dumps(req)
    c = http.client.HTTPConnection("127.0.0.1", a.port)
    t0 = time.perf_counter()
    c.request("POST", "/completion", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    buf = b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            j = json.loads(event[6:])
            if j.get("content") or j.get("tokens"):
                times.append(time.perf_counter())
    c.close()
    if i == 0 or len(times) < 2:
        continue
    ttfts.append(times[0] - t0)
    rates.append((len(times) - 1) / (times[-1] - times[0]))
print(f"requests {len(ttfts)}: TTFT p50 {statistics.median(ttfts):.3f} s, decode {statistics.median(rates):.2f} t/s "
      f"(min {min(rates):.2f}, max {max(rates):.2f})")

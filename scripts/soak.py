#!/usr/bin/env python3
"""A bounded soak of `ponder serve` (the tiny model, a loopback port, the SQLite response cache):
many concurrent clients, streaming and not, over all three API families, mixed prompt lengths,
repeated questions (cache hits) and fresh ones (misses), clients that vanish mid-stream and
requests ended by "Answer now". The run first warms up until the response cache's bounded disk
file is full (its first eviction: RSS rises with it until then, faster or slower with the machine),
then runs --seconds more. Pass: zero unexpected errors; RSS at the end at most 5% above RSS at the
first third of that measured run (minute 10 of 30 by default); at the end no request running and
every KV block free (ponder_kv_blocks_used 0, so every reference count is zero).
Usage: scripts/soak.py [BUILD_DIR] [--seconds 1800] [--clients 8]   (the test command: --seconds 45)"""

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import ROOT, free_port, metric, request, wait_until  # noqa: E402


WARM_UP_LIMIT_S = 300


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


class Client(threading.Thread):
    def __init__(self, port, seed, stats, lock):
        super().__init__()
        self.port, self.rng, self.stats, self.lock = port, random.Random(seed), stats, lock
        self.until = float("inf")  # set once the warm-up is over

    def count(self, key, detail=None):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + 1
            if detail and len(self.stats.setdefault("examples", [])) < 10:
                self.stats["examples"].append(detail)

    def messages(self):
        n = self.rng.choice([3, 20, 200, 800])
        q = self.rng.randrange(30) if self.rng.random() < 0.5 else self.rng.randrange(10 ** 9)  # repeats hit the cache
        return [{"role": "user", "content": f"question {q}: " + " ".join(["word"] * n)}]

    def run(self):
        while time.time() < self.until:
            kind = self.rng.choice(["chat", "chat-stream", "chat-vanish", "chat-answer-now", "completion", "llama", "ollama"])
            try:
                getattr(self, kind.replace("-", "_"))()
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.count("unexpected", f"{kind}: {type(e).__name__}: {e}")

    def expect(self, kind, status, body):
        if status == 200:
            self.count(kind)
        else:
            self.count("unexpected", f"{kind}: {status} {body[:200]}")

    def chat(self):
        r = request(self.port, "POST", "/v1/chat/completions",
                    {"messages": self.messages(), "max_tokens": self.rng.randrange(1, 40), "temperature": self.rng.choice([0, 0.7])})
        self.expect("chat", r.status, r.body)

    def chat_stream(self):
        r = request(self.port, "POST", "/v1/chat/completions",
                    {"messages": self.messages(), "max_tokens": self.rng.randrange(1, 40), "stream": True, "temperature": 0})
        self.expect("chat-stream", r.status if "data: [DONE]" in r.body else -1, r.body)

    def open_stream(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        return c, c.getresponse()

    def chat_vanish(self):
        c, r = self.open_stream({"messages": self.messages(), "max_tokens": 400, "stream": True, "temperature": 0.7, "ignore_eos": True})
        r.read1(self.rng.randrange(1, 2000))
        c.close()  # the client goes away mid-answer: the server cancels it
        self.count("vanished")

    def chat_answer_now(self):
        c, r = self.open_stream({"messages": self.messages(), "max_tokens": 300, "stream": True, "temperature": 0.7, "ignore_eos": True})
        rid = r.getheader("X-Request-Id")
        r.read1(200)
        a = request(self.port, "POST", "/v1/answer_now", {"id": rid})
        rest = r.read().decode("utf-8", "replace")
        c.close()
        ok = a.status in (200, 404) and "data: [DONE]" in rest  # 404: it had already finished
        self.expect("answer-now", 200 if ok else a.status, rest[-200:])

    def completion(self):
        r = request(self.port, "POST", "/v1/completions", {"prompt": self.messages()[0]["content"], "max_tokens": self.rng.randrange(1, 30)})
        self.expect("completion", r.status, r.body)

    def llama(self):
        r = request(self.port, "POST", "/completion", {"prompt": self.messages()[0]["content"], "n_predict": self.rng.randrange(1, 30),
                                                        "stream": self.rng.random() < 0.5})
        self.expect("llama", r.status, r.body)

    def ollama(self):
        r = request(self.port, "POST", "/api/chat", {"model": "tiny", "messages": self.messages(), "stream": self.rng.random() < 0.5,
                                                      "options": {"num_predict": self.rng.randrange(1, 30)}})
        self.expect("ollama", r.status, r.body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--clients", type=int, default=8)
    a = ap.parse_args()
    port = free_port()
    cache = tempfile.mkdtemp(prefix="ponder-soak-")
    srv = subprocess.Popen([os.path.join(ROOT, a.build, "ponder"), "serve", "-m", os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf"),
                            "--port", str(port), "-c", "4096", "--cache-dir", cache, "--queue", "256",
                            "--cache-size", "1"],  # bounds the warm-up fills (memory holds 256 KiB)
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stats, lock = {}, threading.Lock()
    try:
        wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 30, "ponder serve")
        t0 = time.time()
        clients = [Client(port, seed, stats, lock) for seed in range(a.clients)]
        for c in clients:
            c.start()
        try:  # the warm-up: until an answer stored has pushed another out of the 1 MiB file
            while metric(port, "ponder_response_cache_entries") >= metric(port, "ponder_response_cache_stores_total"):
                if time.time() - t0 > WARM_UP_LIMIT_S:
                    raise RuntimeError(f"the response cache did not fill in {WARM_UP_LIMIT_S} s")
                time.sleep(1)
        except BaseException:
            for c in clients:
                c.until = 0
            raise
        warm_up = time.time() - t0
        until = time.time() + a.seconds
        for c in clients:
            c.until = until
        time.sleep(a.seconds / 3)
        rss_third = rss_kb(srv.pid)
        samples = []
        while time.time() < until:
            samples.append(rss_kb(srv.pid))
            time.sleep(min(5, max(0.5, until - time.time())))
        for c in clients:
            c.join()
        rss_end = rss_kb(srv.pid)
        wait_until(lambda: metric(port, "llamacpp:requests_processing") == 0 and metric(port, "llamacpp:requests_deferred") == 0, 30, "idle")
        used = metric(port, "ponder_kv_blocks_used")
        hits = metric(port, "ponder_response_cache_hits_total")
        cancelled = metric(port, "ponder_requests_cancelled_total")
    finally:
        srv.terminate()
        rc = srv.wait(60)
    total = sum(v for k, v in stats.items() if k not in ("unexpected", "examples"))
    growth = (rss_end - rss_third) / rss_third
    print(f"soak: {a.seconds:g} s, {a.clients} clients, {total} requests ({', '.join(f'{k} {v}' for k, v in sorted(stats.items()) if k != 'examples')}); "
          f"cache hits {hits:g}, cancelled {cancelled:g}; warm-up {warm_up:.0f} s; RSS {rss_third / 1024:.1f} MB at {a.seconds / 3:g} s -> {rss_end / 1024:.1f} MB "
          f"at the end ({100 * growth:+.1f}%; between {min(samples) / 1024:.1f} and {max(samples) / 1024:.1f}); KV blocks used at the end {used:g}; exit {rc}")
    bad = stats.get("unexpected", 0) > 0 or growth > 0.05 or used != 0 or rc != 0
    for e in stats.get("examples", []):
        print("  unexpected: " + e)
    if bad:
        print("soak: FAILED")
        sys.exit(1)
    print("soak: passed")


if __name__ == "__main__":
    main()

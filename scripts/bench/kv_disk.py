#!/usr/bin/env python3
"""The prefix cache on disk, measured: the next turn of a long conversation, its first token
(a request for one token, wall time on loopback) computed cold, from the RAM prefix cache, and from
disk after a kill -9 and a restart (page cache warm, and with the page cache dropped when this
machine allows it), and how long a stream decoding beside that read waits between two tokens (the
reads spread over its steps). Prints a Markdown table for BENCHMARKS.md.
Usage: scripts/bench/kv_disk.py MODEL.gguf [--tokens 4000] [--threads 2] [--build build]"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cluster import ROOT, free_port, metric, request, settled_kv_disk_writes, wait_until  # noqa: E402


def start(ponder, model, kv_dir, port, threads, ctx):
    args = [ponder, "serve", "-m", model, "--port", str(port), "-c", str(ctx), "-t", str(threads),
            "--no-response-cache"]
    if kv_dir:
        args += ["--kv-disk", kv_dir]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 300, "ponder serve")
    return p


def first_token(port, messages):
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    t = time.perf_counter()
    r = request(port, "POST", "/v1/chat/completions", body, timeout=600)
    dt = time.perf_counter() - t
    assert r.status == 200, r.body[:300]
    u = r.json()["usage"]
    return dt, u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], r.json()["choices"][0]


class Streamer(threading.Thread):
    """A streaming chat request; the arrival time of each content event."""

    def __init__(self, port, n_tokens):
        super().__init__(daemon=True)
        self.port, self.n_tokens, self.times = port, n_tokens, []

    def run(self):
        body = {"messages": [{"role": "user", "content": message(40, 9)}], "max_tokens": self.n_tokens,
                "temperature": 0, "stream": True}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        for line in r:
            if line.startswith(b"data: {"):
                self.times.append(time.perf_counter())
        c.close()

    def longest_gap(self, t0, t1):
        """The longest wait between two events, of the gaps that end in [t0, t1]."""
        gaps = [b - a for a, b in zip(self.times, self.times[1:]) if t0 <= b <= t1]
        return max(gaps) if gaps else None

    def median_gap(self):
        gaps = sorted(b - a for a, b in zip(self.times, self.times[1:]))
        return gaps[len(gaps) // 2] if gaps else None


def message(n_words, seed):
    rnd = random.Random(seed)
    words = ["river", "stone", "seven", "prime", "lemma", "proof", "angle", "square", "number", "circle"]
    return " ".join(rnd.choice(words) + str(rnd.randrange(100)) for _ in range(n_words))


def drop_page_cache():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    ponder = os.path.join(ROOT, a.build, "ponder")
    base = tempfile.mkdtemp(prefix="ponder-kvbench-")
    kv = os.path.join(base, "kv")
    ctx = a.tokens + 512
    user1 = "Read this and answer at the end. " + message(int(a.tokens / 2.92), 1)
    rows = []
    try:
        # Server A, with the disk tier: the first turn, its blocks written, kill -9. The directory
        # then holds the first turn only; a copy of it serves the page-cache-dropped run.
        port = free_port()
        p = start(ponder, a.model, kv, port, a.threads, ctx + 1024)
        # A stream decodes beside the first turn: its gap across the turn's end shows what handing
        # the turn's blocks to the writer costs the engine thread.
        streamer = Streamer(port, 600)
        streamer.start()
        wait_until(lambda: len(streamer.times) >= 8, 120, "the stream's first tokens")
        t_cold1, n1, _, c1 = first_token(port, [{"role": "user", "content": user1}])
        t_end1 = time.perf_counter()
        wait_until(lambda: streamer.times[-1] > t_end1 + 1.0, 120, "the stream's tokens after the turn")
        end_gap = next((b - a for a, b in zip(streamer.times, streamer.times[1:]) if a <= t_end1 <= b), None)
        end_median = streamer.median_gap()
        turn2 = [{"role": "user", "content": user1}, {"role": "assistant", "content": c1["message"]["content"] or "ok"},
                 {"role": "user", "content": "And which number came first?"}]
        written = settled_kv_disk_writes(port, timeout=60)
        disk_bytes = metric(port, "ponder_kv_disk_bytes")
        copy_s = metric(port, "ponder_kv_disk_copy_seconds_total")
        p.send_signal(signal.SIGKILL)
        streamer.join(60)
        p.wait()
        kv_copy = kv + "-copy"
        shutil.copytree(kv, kv_copy)
        # Server B, restarted on the directory: the next turn from disk (page cache warm).
        port = free_port()
        p = start(ponder, a.model, kv, port, a.threads, ctx)
        t_disk, n2, cached_disk, ans_disk = first_token(port, turn2)
        blocks_read = metric(port, "ponder_kv_disk_blocks_read_total")
        read_s = metric(port, "ponder_kv_disk_read_seconds_total")
        p.send_signal(signal.SIGKILL)
        p.wait()
        # Server C, no disk tier: both turns, the second from the RAM prefix cache.
        port = free_port()
        p = start(ponder, a.model, None, port, a.threads, ctx)
        first_token(port, [{"role": "user", "content": user1}])
        t_ram, _, cached_ram, ans_ram = first_token(port, turn2)
        p.terminate()
        p.wait(60)
        # Cold: the next turn computed whole.
        port = free_port()
        p = start(ponder, a.model, None, port, a.threads, ctx)
        t_cold, _, _, ans_cold = first_token(port, turn2)
        p.terminate()
        p.wait(60)
        t_disk_cold = beside = None
        if drop_page_cache():
            port = free_port()
            p = start(ponder, a.model, kv_copy, port, a.threads, ctx)
            drop_page_cache()
            t_disk_cold, _, _, _ = first_token(port, turn2)
            p.send_signal(signal.SIGKILL)
            p.wait()
            # Once more, beside a stream: its longest wait between two tokens while the next turn's
            # prefix is read (spread over the stream's steps) against its usual one.
            port = free_port()
            p = start(ponder, a.model, kv_copy, port, a.threads, ctx)
            drop_page_cache()
            streamer = Streamer(port, 400)
            streamer.start()
            wait_until(lambda: len(streamer.times) >= 8, 120, "the stream's first tokens")
            read_s0 = metric(port, "ponder_kv_disk_read_seconds_total") or 0
            t0 = time.perf_counter()
            first_token(port, turn2)
            t1 = time.perf_counter()
            beside = (streamer.longest_gap(t0, t1), metric(port, "ponder_kv_disk_read_seconds_total") - read_s0)
            streamer.join(600)
            beside += (streamer.median_gap(),)
            p.send_signal(signal.SIGKILL)
            p.wait()
        block_bytes = disk_bytes / written if written else 0
        print(f"model {os.path.basename(a.model)}, turn 1 {n1} prompt tokens, turn 2 {n2}; {written:.0f} blocks "
              f"written ({disk_bytes / 1e6:.0f} MB, {block_bytes / 1e3:.0f} KB a block)")
        print("same answer cold / RAM / disk:", ans_cold == ans_ram == ans_disk)
        print()
        print("| next turn's first token | prompt from cache | time | vs cold |")
        print("|---|---|---|---|")
        rows = [("cold (computed)", 0, t_cold), ("RAM prefix cache", cached_ram, t_ram),
                ("disk, after kill -9 + restart (page cache warm)", cached_disk, t_disk)]
        if t_disk_cold is not None:
            rows.append(("disk, after restart, page cache dropped", cached_disk, t_disk_cold))
        for name, cached, t in rows:
            print(f"| {name} | {cached} / {n2} ({100 * cached / n2:.0f}%) | {t:.3f} s | {100 * t / t_cold:.1f}% |")
        print()
        read_mb = blocks_read * block_bytes / 1e6
        print(f"blocks read back: {blocks_read:.0f} ({read_mb:.0f} MB) in {read_s:.3f} s: {read_mb / 1e3 / read_s:.2f} GB/s "
              f"from the page cache (read, checksum, copy into the KV cache)")
        print(f"the writer's copy of the first turn's blocks (off the engine thread): {copy_s * 1e3:.1f} ms "
              f"({disk_bytes / 1e6:.0f} MB)")
        if end_gap is not None:
            print(f"a stream beside the first turn: its gap across the turn's end {end_gap * 1e3:.0f} ms, "
                  f"its median gap {end_median * 1e3:.0f} ms")
        print(f"(first turn cold: {t_cold1:.3f} s for {n1} tokens)")
        if beside is not None and beside[0] is not None:
            print(f"a stream beside the read (page cache dropped): longest gap between two tokens "
                  f"{beside[0] * 1e3:.0f} ms while the next turn's prefix was read ({beside[1] * 1e3:.0f} ms of "
                  f"reading in all), its median gap {beside[2] * 1e3:.0f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Crash consistency of the response cache: `ponder serve --cache-dir D` under heavy cache writes
(clients asking distinct deterministic questions, every answer stored), killed with SIGKILL at a
random moment, N times. After each kill: the SQLite file opens and `PRAGMA integrity_check` says
ok, the server starts again on it, and every answer it serves from the cache is exactly the one
first computed for that question (bodies are checksummed; a torn one would be a miss, never served).
Then, where this machine allows mounts (root with CAP_SYS_ADMIN): a full disk (a 256 KiB tmpfs)
and a read-only directory (a read-only bind mount) never fail a request.
Usage: scripts/test_cache_crash.py [BUILD_DIR] [--kills 10]"""

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Checks, ROOT, free_port, hostile_dirs, request, wait_until  # noqa: E402

check = Checks()
failures = check.failures


def question(i):
    return {"messages": [{"role": "user", "content": f"Question number {i}?"}], "max_tokens": 12, "temperature": 0}


def start(ponder, model, cache_dir, port):
    p = subprocess.Popen([ponder, "serve", "-m", model, "--port", str(port), "--cache-dir", cache_dir, "-c", "2048", "-t", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 30, "ponder serve")
    return p


def answer(r):
    return json.dumps(r.json()["choices"][0]["message"], sort_keys=True)


def hammer(port, stop, ids):
    while not stop.is_set():
        i = random.randrange(100000)
        try:
            r = request(port, "POST", "/v1/chat/completions", question(i), timeout=10)
            if r.status == 200:
                ids.append((i, answer(r), r.headers.get("x-ponder-cache")))
        except OSError:
            return  # killed


def crash_rounds(ponder, model, kills):
    d = tempfile.mkdtemp(prefix="ponder-crash-")
    reference = {}  # question -> the answer first computed
    served_from_cache = 0
    for k in range(kills):
        port = free_port()
        p = start(ponder, model, d, port)
        stop, got = threading.Event(), []
        threads = [threading.Thread(target=hammer, args=(port, stop, got)) for _ in range(3)]
        for t in threads:
            t.start()
        # Earlier questions again, so that hits come from the file written before the last kill.
        for i in random.sample(sorted(reference), min(20, len(reference))):
            r = request(port, "POST", "/v1/chat/completions", question(i), timeout=10)
            if r.status == 200 and r.headers.get("x-ponder-cache") == "hit":
                served_from_cache += 1
                if answer(r) != reference[i]:
                    failures.append(f"round {k}: question {i} served a different answer from the cache")
        time.sleep(random.uniform(0.2, 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        stop.set()
        for t in threads:
            t.join()
        for i, a, cache in got:
            if i in reference and a != reference[i]:
                failures.append(f"round {k}: question {i} answered differently ({cache})")
            reference.setdefault(i, a)
        db = os.path.join(d, "responses.sqlite")
        con = sqlite3.connect(db)
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        n = con.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        con.close()
        if ok != "ok":
            failures.append(f"round {k}: integrity_check says {ok}")
        print(f"  --   kill {k + 1}/{kills}: {len(got)} answers in this run, {n} stored, integrity {ok}", flush=True)
    check(not [f for f in failures if f.startswith("round")], f"{kills} kills -9 under cache writes: the file always opened and passed "
          f"integrity_check; {served_from_cache} answers served from it after a kill, every one the first computed")


def hostile_places(ponder, model):
    with hostile_dirs("ponder-places-") as places:
        for name, d, read_only in places:
            port = free_port()
            p = start(ponder, model, os.path.join(d, "cache") if read_only else d, port)
            try:
                statuses = [request(port, "POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x" * 2000 + str(i)}], "max_tokens": 24, "temperature": 0},
                                    timeout=20).status for i in range(40)]
            finally:
                p.terminate()
                p.wait(30)
            check(all(s == 200 for s in statuses), f"{name}: all {len(statuses)} requests answered (statuses {sorted(set(statuses))})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--kills", type=int, default=10)
    a = ap.parse_args()
    ponder = os.path.join(ROOT, a.build, "ponder")
    model = os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf")
    crash_rounds(ponder, model, a.kills)
    hostile_places(ponder, model)
    for f in failures[:10]:
        print("  FAIL " + f)
    if failures:
        print(f"test_cache_crash: {len(failures)} FAILED")
        sys.exit(1)
    print("test_cache_crash: all passed")


if __name__ == "__main__":
    main()

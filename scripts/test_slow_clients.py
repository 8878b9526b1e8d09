#!/usr/bin/env python3
"""Slow and idle clients against a live `ponder serve` (the tiny model, a loopback port):
N connections held open at once (half idle, half slowloris: a request line, then one header byte
a second, never finishing), and meanwhile /health must answer within 100 ms and a completion must
be served; the header timeout must close them all; file descriptors and threads stay bounded
(threads: the same count throughout; descriptors: back near where they started).
Usage: scripts/test_slow_clients.py [BUILD_DIR] [--connections 1000] [--header-timeout 3]"""

import argparse
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Checks, ROOT, free_port, request, wait_until  # noqa: E402


def count(pid, what):
    return len(os.listdir(f"/proc/{pid}/{what}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--header-timeout", type=float, default=3)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="ponder-slow-", suffix=".log", delete=False)
    srv = subprocess.Popen([os.path.join(ROOT, a.build, "ponder"), "serve", "-m", os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf"),
                            "--port", str(port), "-c", "2048", "--no-response-cache", "--header-timeout", str(a.header_timeout)],
                           stdout=log, stderr=log)
    check = Checks()
    failures = check.failures

    socks = []
    try:
        wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 30, "ponder serve")
        fds0, threads0 = count(srv.pid, "fd"), count(srv.pid, "task")
        t0 = time.time()
        for i in range(a.connections):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2 == 1:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        opened = time.time() - t0
        time.sleep(0.3)
        fds1 = count(srv.pid, "fd")
        check(fds1 >= fds0 + a.connections * 0.95, f"{a.connections} connections held open ({opened:.1f} s to open; descriptors {fds0} -> {fds1})")
        worst = 0.0
        for _ in range(20):
            t = time.time()
            r = request(port, "GET", "/health", timeout=5)
            worst = max(worst, time.time() - t)
            assert r.status == 200
            for s in socks[1::2][:200]:  # the slowloris half dribbles a byte
                try:
                    s.send(b"a")
                except OSError:
                    pass
            time.sleep(0.02)
        check(worst < 0.1, f"/health answers within 100 ms meanwhile (worst of 20: {worst * 1000:.1f} ms)")
        t = time.time()
        r = request(port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}, timeout=10)
        check(r.status == 200, f"a new completion is served meanwhile ({r.status}, {time.time() - t:.2f} s)")
        threads1 = count(srv.pid, "task")
        check(threads1 == threads0, f"threads stay bounded ({threads0} before, {threads1} with the connections open)")
        # The header timeout closes every one of them (a slowloris client never completes its headers).
        deadline = time.time() + a.header_timeout + 5
        open_socks = set(socks)
        while open_socks and time.time() < deadline:
            ready, _, _ = select.select(list(open_socks)[:1000], [], [], 0.5)
            for s in ready:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data or data.startswith(b"HTTP/1.1 408") or data.startswith(b"HTTP/1.1 4"):
                    open_socks.discard(s)
        check(not open_socks, f"the header timeout ({a.header_timeout:g} s) closed all {a.connections} ({len(open_socks)} left open)")
        time.sleep(0.5)
        fds2 = count(srv.pid, "fd")
        check(fds2 <= fds0 + 5, f"descriptors back to {fds2} (from {fds1}; {fds0} at the start)")
        check(request(port, "GET", "/health", timeout=2).status == 200, "still serving afterwards")
    finally:
        for s in socks:
            s.close()
        srv.terminate()
        rc = srv.wait(30)
    if failures or rc != 0:
        with open(log.name) as f:
            print(f.read()[-2000:])
        print(f"test_slow_clients: {len(failures)} FAILED (exit {rc})")
        sys.exit(1)
    os.unlink(log.name)
    print("test_slow_clients: all passed")


if __name__ == "__main__":
    main()

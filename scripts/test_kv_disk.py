#!/usr/bin/env python3
"""The prefix cache on disk (`ponder serve --kv-disk DIR`) against a live server:
- a long conversation's first turn, the server killed with SIGKILL, started again on the same
  directory: the next turn takes >= 90% of its prompt from disk (usage.cached_tokens, /metrics,
  /slots) and answers with exactly the tokens and logprobs of a server that never restarted;
- killed -9 N times at random moments while it writes: after each restart no temporary is left,
  every answer equals the one first computed for its question, and damaged files never serve;
- where this machine allows mounts (root with CAP_SYS_ADMIN): a full disk (a 256 KiB tmpfs) and a
  read-only directory cost a log line, never a request.
Timing (first token after a restart against a cold prefill) is a benchmark: scripts/bench/kv_disk.sh.
Usage: scripts/test_kv_disk.py [BUILD_DIR] [--kills 5]"""

import argparse
import glob
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Checks, ROOT, free_port, hostile_dirs, metric, request, settled_kv_disk_writes, wait_until  # noqa: E402

check = Checks()
failures = check.failures


def start(ponder, model, kv_dir, port, log):
    args = [ponder, "serve", "-m", model, "--port", str(port), "-c", "4096", "-t", "2", "--no-response-cache"]
    if kv_dir is not None:
        args += ["--kv-disk", kv_dir]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 60, "ponder serve")
    return p


def ask(port, messages, max_tokens=16):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    r = request(port, "POST", "/v1/chat/completions", body, timeout=120)
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.body[:300]}")
    j = r.json()
    return j["choices"][0], j["usage"]


def long_message(seed, words=950):
    rnd = random.Random(seed)
    vocab = ["river", "stone", "seven", "prime", "lemma", "proof", "angle", "square", "number", "circle", "theorem", "because"]
    return "Read this and answer at the end. " + " ".join(rnd.choice(vocab) + str(rnd.randrange(100)) for _ in range(words))


def restart_conversation(ponder, model, base, log):
    kv = os.path.join(base, "kv")
    user1 = long_message(1)
    # The reference: one server, never restarted, both turns.
    port = free_port()
    p = start(ponder, model, None, port, log)
    try:
        ref1, _ = ask(port, [{"role": "user", "content": user1}])
        turn2 = [{"role": "user", "content": user1}, {"role": "assistant", "content": ref1["message"]["content"]},
                 {"role": "user", "content": "And the second question: which number came first?"}]
        ref2, _ = ask(port, turn2)
    finally:
        p.terminate()
        p.wait(30)
    # With --kv-disk: the first turn, kill -9, a restart, the second turn.
    port = free_port()
    p = start(ponder, model, kv, port, log)
    first, usage1 = ask(port, [{"role": "user", "content": user1}])
    written = settled_kv_disk_writes(port)
    p.send_signal(signal.SIGKILL)
    p.wait()
    check(first == ref1, "the first turn with --kv-disk answers as without it")
    check(written >= usage1["prompt_tokens"] // 16, f"the first turn's blocks written before the kill ({written:.0f} blocks "
          f"for {usage1['prompt_tokens']} prompt tokens)")
    port = free_port()
    p = start(ponder, model, kv, port, log)
    try:
        second, usage2 = ask(port, turn2)
        cached, total = usage2["prompt_tokens_details"]["cached_tokens"], usage2["prompt_tokens"]
        check(cached >= 0.9 * total, f"after kill -9 and a restart, the next turn took {cached} of its {total} prompt tokens "
              f"({100 * cached / total:.0f}%) from disk")
        check(second == ref2, "and answered with the tokens and logprobs of a server that never restarted")
        read = metric(port, "ponder_kv_disk_blocks_read_total") or 0
        check(read * 16 >= cached, f"/metrics counts the {read:.0f} blocks read from disk")
        slots = request(port, "GET", "/slots").json()
        check(slots and slots[0].get("kv_disk", {}).get("blocks", 0) > 0,
              f"/slots shows what the disk holds ({slots[0].get('kv_disk') if slots else None})")
    finally:
        p.terminate()
        p.wait(30)


def kill_rounds(ponder, model, base, kills, log):
    kv = os.path.join(base, "kv-kills")
    reference = {}
    reads = 0
    for k in range(kills):
        port = free_port()
        p = start(ponder, model, kv, port, log)
        tmp_left = glob.glob(os.path.join(kv, "*", "*.tmp.*"))
        if tmp_left:
            failures.append(f"round {k}: temporaries left after the restart: {tmp_left[:3]}")
        stop, got = threading.Event(), []

        def hammer():
            while not stop.is_set():
                i = random.randrange(12)  # few questions: later rounds find their prefixes on disk
                try:
                    c, u = ask(port, [{"role": "user", "content": long_message(100 + i, 300)}], max_tokens=8)
                    got.append((i, c))
                except (OSError, RuntimeError):
                    return  # killed

        threads = [threading.Thread(target=hammer) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(random.uniform(0.5, 2.0))
        reads = max(reads, metric(port, "ponder_kv_disk_blocks_read_total") or 0)
        p.send_signal(signal.SIGKILL)
        p.wait()
        stop.set()
        for t in threads:
            t.join()
        for i, c in got:
            if i in reference and c != reference[i]:
                failures.append(f"round {k}: question {i} answered differently after a restart")
            reference.setdefault(i, c)
        print(f"  --   kill {k + 1}/{kills}: {len(got)} answers, {len(glob.glob(os.path.join(kv, '*', '*.kvb')))} files on disk", flush=True)
    check(not [f for f in failures if f.startswith("round")],
          f"{kills} kills -9 while writing: no temporary survived a restart, every answer the first computed "
          f"(blocks read from disk in a round: up to {reads:.0f})")


def hostile_places(ponder, model, log):
    with hostile_dirs("ponder-kvdisk-places-") as places:
        for name, d, _ in places:
            port = free_port()
            p = start(ponder, model, os.path.join(d, "kv"), port, log)
            try:
                answers = [ask(port, [{"role": "user", "content": long_message(200 + i, 200)}], max_tokens=8)[0]
                           for i in range(6)]
                errors = metric(port, "ponder_kv_disk_errors_total") or 0
            finally:
                p.terminate()
                p.wait(30)
            check(len(answers) == 6 and errors > 0, f"{name}: every request answered, the failed writes counted ({errors:.0f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--kills", type=int, default=5)
    a = ap.parse_args()
    ponder = os.path.join(ROOT, a.build, "ponder")
    model = os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf")
    base = tempfile.mkdtemp(prefix="ponder-kvdisk-")
    log_path = os.path.join(base, "serve.log")
    with open(log_path, "w") as log:
        restart_conversation(ponder, model, base, log)
        kill_rounds(ponder, model, base, a.kills, log)
        hostile_places(ponder, model, log)
    if failures:
        for f in failures[:10]:
            print("  FAIL " + f)
        print(f"  (the servers' log: {log_path})")
        sys.exit(1)
    subprocess.run(["rm", "-rf", base])
    print("test_kv_disk: all passed")


if __name__ == "__main__":
    main()

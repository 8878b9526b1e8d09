#!/usr/bin/env python3
"""What conversation affinity buys: the share of prompt tokens served from the replicas' prefix
caches, for many multi-turn conversations through nginx in front of 3 replicas
(scripts/cluster.py), with the conversation header (consistent hashing) and without it
(least connections). Times to first token on 2 shared cores would be noise; the share is not.
Sampled answers (temperature 0.7, no seed) keep the response cache out of it.
Usage: scripts/affinity_bench.py [--build build] [--model M.gguf] [--conversations 24] [--turns 4]
                                 [--workers 4] [--system-words 60] [--user-words 25]"""

import argparse
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, chat, request  # noqa: E402

WORDS = ("river stone cloud number proof lemma graph vector matrix prime circle angle theorem python compile "
         "memory cache thread socket latency model token answer reason think step check result").split()


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def run(cl, affinity, a, seed):
    conversations, turns, workers = a.conversations, a.turns, a.workers
    rng = random.Random(seed)
    system = "You are a careful assistant. " + sentence(rng, a.system_words)
    plans = [[sentence(rng, a.user_words) for _ in range(turns)] for _ in range(conversations)]
    totals = {"prompt": 0, "cached": 0, "requests": 0, "errors": 0}
    lock = threading.Lock()
    next_conv = iter(range(conversations))

    def worker():
        while True:
            with lock:
                c = next(next_conv, None)
            if c is None:
                return
            history = [{"role": "system", "content": system}] if a.system_words > 0 else []
            headers = {"X-Conversation-Id": f"bench-{seed}-{c}"} if affinity else {}
            for text in plans[c]:
                history.append({"role": "user", "content": text})
                r = request(cl.front, "POST", "/v1/chat/completions", chat(history, max_tokens=24, temperature=0.7), headers)
                with lock:
                    totals["requests"] += 1
                    if r.status != 200:
                        totals["errors"] += 1
                        continue
                    u = r.json()["usage"]
                    totals["prompt"] += u["prompt_tokens"]
                    totals["cached"] += u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                history.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return totals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--model")
    ap.add_argument("--conversations", type=int, default=24)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--system-words", type=int, default=60, help="a system prompt every conversation shares (0: none)")
    ap.add_argument("--user-words", type=int, default=25, help="words per user turn")
    a = ap.parse_args()
    for affinity in (False, True):
        cl = Cluster(build=a.build, model=a.model, ctx=4096)  # fresh replicas: empty prefix caches
        cl.start()
        try:
            t = run(cl, affinity, a, seed=7)
        finally:
            cl.stop()
        share = t["cached"] / t["prompt"] if t["prompt"] else 0
        mode = "affinity (X-Conversation-Id, hash consistent)" if affinity else "no affinity (least_conn)"
        print(f"{mode:48s} {t['requests']} requests, {t['errors']} errors, prompt tokens {t['prompt']}, "
              f"from the prefix cache {t['cached']} ({100 * share:.1f}%)")


if __name__ == "__main__":
    main()

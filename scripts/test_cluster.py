#!/usr/bin/env python3
"""Ponder past one machine, on this machine: 3 replicas of `ponder serve` + a real nginx running
deploy/nginx/ponder.conf + a real Redis holding the shared response cache (scripts/cluster.py).
Checks, each against the real processes:
  1. nginx -t accepts the shipped configuration;
  2. a conversation keeps hitting one replica (X-Conversation-Id, or X-Ponder-Route-Key sent back),
     and conversations spread over the replicas;
  3. an answer cached by one replica is served by another (Redis);
  4. "Answer now" through nginx reaches the replica that runs the request;
  5. killing a replica (SIGKILL) mid-run loses no request that had not started streaming (nginx
     retries it on another);
  6. a rolling restart (SIGTERM, drain, start again) under load drops zero requests;
  7. Redis going away and coming back changes nothing a user sees but speed.
Usage: scripts/test_cluster.py [BUILD_DIR]  (default build/). Bounded: about a minute."""

import http.client
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Checks, Cluster, chat, metric, request, wait_until  # noqa: E402

check = Checks()
failures = check.failures


def ask_until_hit(port, body):
    """The answer once it comes from the response cache (the writer stores asynchronously), or the last miss."""
    for _ in range(40):
        r = request(port, "POST", "/v1/chat/completions", body)
        if r.headers.get("x-ponder-cache") == "hit":
            return r
        time.sleep(0.05)
    return r


class Load:
    """Clients sending completions through nginx until stopped: every answer must be a 200."""

    def __init__(self, port, clients=3, stream_every=3):
        self.port, self.stop_flag = port, threading.Event()
        self.results, self.lock = [], threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(c, stream_every)) for c in range(clients)]

    def run(self, c, stream_every):
        n = 0
        while not self.stop_flag.is_set():
            n += 1
            stream = stream_every > 0 and n % stream_every == 0
            body = chat([{"role": "user", "content": f"client {c} question {n}"}], max_tokens=12, temperature=0.8,
                        stream=stream)
            try:
                r = request(self.port, "POST", "/v1/chat/completions", body, timeout=60)
                ok = r.status == 200 and (not stream or "data: [DONE]" in r.body)
                detail = f"{r.status} {r.body[:200]}"
            except OSError as e:
                ok, detail = False, f"{type(e).__name__}: {e}"
            with self.lock:
                self.results.append((ok, detail))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        for t in self.threads:
            t.join()

    def failed(self):
        return [d for ok, d in self.results if not ok]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    cl = Cluster(build=build)
    rc, err = cl.check_nginx_conf()
    check(rc == 0, "nginx -t accepts deploy/nginx/ponder.conf" + ("" if rc == 0 else ": " + err))
    cl.start()
    front = cl.front
    try:
        # 2. Affinity.
        owners = {}
        sticky = True
        for c in range(9):
            history = [{"role": "system", "content": "You are brief."}]
            seen = set()
            for turn in range(3):
                history.append({"role": "user", "content": f"conversation {c}, turn {turn}"})
                r = request(front, "POST", "/v1/chat/completions", chat(history, max_tokens=4, temperature=0.7),
                            {"X-Conversation-Id": f"conv-{c}"})
                seen.add(r.headers.get("x-ponder-replica"))
                history.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})
            sticky &= len(seen) == 1
            owners[c] = seen.pop()
        check(sticky, "every turn of a conversation (X-Conversation-Id) reached one replica")
        check(len(set(owners.values())) >= 2, f"conversations spread over the replicas ({sorted(set(owners.values()))})")
        history = [{"role": "user", "content": "a client without a conversation id"}]
        first = request(front, "POST", "/v1/chat/completions", chat(history, max_tokens=4, temperature=0.7))
        key = first.headers.get("x-ponder-route-key", "")
        seen = set()
        for turn in range(3):
            history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"more {turn}"}]
            r = request(front, "POST", "/v1/chat/completions", chat(history, max_tokens=4, temperature=0.7),
                        {"X-Ponder-Route-Key": key})
            seen.add(r.headers.get("x-ponder-replica"))
            same_key = r.headers.get("x-ponder-route-key") == key
        check(same_key and key.startswith("h-"), f"every turn of a conversation has the same route key ({key})")
        check(len(seen) == 1, "a route key sent back keeps the later turns on one replica")

        page = request(front, "GET", "/")
        check(page.status == 200 and "<html" in page.body.lower(), "the chat page loads through nginx")

        # 3. The shared response cache.
        q = chat([{"role": "user", "content": "What is shared between replicas?"}], max_tokens=6)
        a = request(cl.ports[0], "POST", "/v1/chat/completions", q)
        check(a.headers.get("x-ponder-cache") == "miss", "replica r1 computes a new deterministic answer (miss)")
        hit = ask_until_hit(cl.ports[1], q)
        check(hit.headers.get("x-ponder-cache") == "hit", "replica r2 answers it from Redis (hit)")
        check(hit.json()["choices"][0]["message"] == a.json()["choices"][0]["message"], "with the very same message")

        # 4. Answer now reaches the replica that runs the request.
        body = chat([{"role": "user", "content": "think for a long time"}], max_tokens=1500, temperature=0.7,
                    stream=True, ignore_eos=True)
        conn = http.client.HTTPConnection("127.0.0.1", front, timeout=30)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        rid, replica = resp.getheader("X-Request-Id"), resp.getheader("X-Ponder-Replica")
        resp.read1(256)
        an = request(front, "POST", "/v1/answer_now", {"id": rid}, {"X-Ponder-Replica": replica})
        check(an.status == 200 and rid.startswith(f"chatcmpl-{replica}-"),
              f"answer now through nginx reached {replica}, which runs {rid} ({an.status})")
        conn.close()  # the client leaves: the replica cancels the rest

        # 5. A replica killed mid-run: a long request known to run on it (its conversation's
        # replica) must come back whole from another one, and the load around it loses nothing.
        victim = int(owners[0][1:]) - 1
        pinned = {}

        def long_request():
            body = chat([{"role": "user", "content": "a long answer"}], max_tokens=1500, temperature=0.7, ignore_eos=True)
            pinned["reply"] = request(front, "POST", "/v1/chat/completions", body, {"X-Conversation-Id": "conv-0"})

        with Load(front, clients=3, stream_every=0) as load:
            time.sleep(0.5)
            t = threading.Thread(target=long_request)
            t.start()
            time.sleep(0.1)
            cl.stop_replica(victim, signal.SIGKILL)
            t.join()
            time.sleep(1.0)
        r = pinned["reply"]
        check(r.status == 200 and r.headers.get("x-ponder-replica") != owners[0] and r.json()["usage"]["completion_tokens"] == 1500,
              f"a request running on {owners[0]} when it was killed was answered whole by {r.headers.get('x-ponder-replica')}")
        bad = load.failed()
        check(not bad and len(load.results) >= 8,
              f"SIGKILL of {owners[0]} under load: {len(load.results)} requests, {len(bad)} lost {bad[:2]}")
        cl.start_replica(victim)
        time.sleep(2.5)  # nginx's fail_timeout

        # 6. A rolling restart under load.
        with Load(front, clients=3, stream_every=3) as load:
            for i in range(3):
                rc = cl.stop_replica(i, signal.SIGTERM)
                check(rc == 0, f"{cl.replica_name(i)} drained and exited 0 on SIGTERM")
                cl.start_replica(i)  # returns once /health/ready answers 200
                time.sleep(2.5)  # nginx's fail_timeout (deploy/nginx/ponder.conf): it is in the pool again
        bad = load.failed()
        check(not bad and len(load.results) >= 10,
              f"rolling restart of 3 replicas under load: {len(load.results)} requests, {len(bad)} dropped {bad[:2]}")

        # 7. Redis away and back.
        cl.stop_redis()
        wait_until(lambda: all(metric(p, "ponder_response_cache_redis_up") == 0 for p in cl.ports), 10, "redis_up 0")
        check(True, "every replica reports ponder_response_cache_redis_up 0 while Redis is gone")
        q2 = chat([{"role": "user", "content": "Asked while Redis is away"}], max_tokens=6)
        rs = [request(front, "POST", "/v1/chat/completions", q2) for _ in range(4)]
        check(all(r.status == 200 for r in rs), "requests while Redis is away: all answered")
        cl.start_redis()
        wait_until(lambda: all(metric(p, "ponder_response_cache_redis_up") == 1 for p in cl.ports), 15, "redis_up 1")
        check(True, "every replica reconnected to Redis by itself")
        q3 = chat([{"role": "user", "content": "Asked after Redis came back"}], max_tokens=6)
        request(cl.ports[0], "POST", "/v1/chat/completions", q3)
        hit = ask_until_hit(cl.ports[2], q3)
        check(hit.headers.get("x-ponder-cache") == "hit", "answers are shared again after Redis came back")
        for i in range(3):
            check(cl.stop_replica(i, signal.SIGTERM) == 0, f"{cl.replica_name(i)} exited 0 at the end")
    finally:
        if failures:
            for i in range(3):
                try:
                    print(f"--- {cl.replica_name(i)} log (tail)\n" + cl.log(i)[-3000:])
                except OSError:
                    pass
        cl.stop()
    if failures:
        print(f"test_cluster: {len(failures)} FAILED")
        sys.exit(1)
    print("test_cluster: all passed")


if __name__ == "__main__":
    main()

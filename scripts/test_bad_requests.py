#!/usr/bin/env python3
"""Bad requests against a live `ponder serve` (the tiny model, a loopback port): every field of
every generation endpoint with the wrong type, null, negative, huge, NaN-like or infinite values;
broken JSON, invalid UTF-8, empty and enormous bodies, deep nesting; too many and too long
headers, long URIs, wrong methods, unknown routes, bad keys. Each must get a 4xx whose body is a
JSON error (OpenAI's {"error": {...}}, Ollama's {"error": "..."}, Anthropic's
{"type": "error", "error": {...}}), never a 5xx, a hang or a 200,
and /health must answer 200 right after each. Prints the count; fails on the first few misses.
Usage: scripts/test_bad_requests.py [BUILD_DIR]"""

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import ROOT, free_port, wait_until  # noqa: E402

KEY = "bad-requests-key"
BIG = 10 ** 30


def send(port, method, path, body=b"", headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def raw(port, data, timeout=10):
    """Bytes on a socket as they are; the status of the answer (0: closed without one)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while b"\r\n\r\n" not in out:
            part = s.recv(65536)
            if not part:
                break
            out += part
        head, _, rest = out.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 "):
            return 0, b""
        status = int(head.split()[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            part = s.recv(65536)
            if not part:
                break
            rest += part
        return status, rest[:length]  # a pipelined second answer may follow
    finally:
        s.close()


def field_cases():
    """(path, body) for every field with values of the wrong type or range."""
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    comp = {"prompt": "hi", "max_tokens": 2}
    # null is not here: OpenAI's API takes null for an optional field as "the default".
    wrong = ["x", -1, BIG, -BIG, 1e308 * 10, [], {}, True, 1.5]
    fields = {
        "/v1/chat/completions": (chat, {
            "messages": [None, "x", 1, [], [1], [{"role": "user"}], [{"role": "pilot", "content": "x"}],
                         [{"role": "user", "content": 5}], [{"role": "user", "content": [{"type": "image_url"}]}],
                         [{"content": "x"}], [{"role": "tool", "content": "x"}],
                         [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_x", "content": "x"}],
                         [{"role": "assistant", "tool_calls": [{"type": "function"}]}]],
            "max_tokens": wrong, "max_completion_tokens": wrong, "temperature": ["x", -1, 1e308 * 10, [], 1000],
            "top_p": ["x", -0.5, 2, 0, []], "top_k": ["x", -5, 1.5, BIG], "min_p": ["x", -1, 2],
            "presence_penalty": ["x", -3, 3, 1e308 * 10], "frequency_penalty": ["x", -3, 3],
            "repeat_penalty": ["x", -1, 1e308 * 10], "repetition_penalty": ["x", -1], "seed": ["x", 1.5, -BIG, []],
            "stop": [5, [5], ["x"] * 100, [""], {}], "logit_bias": ["x", {"x": 1}, {"5": "x"}, {"-1": 1}, {"999999999": 1}, [1]],
            "n": ["x", 0, -1, 1000, 1.5], "stream": ["x", 1, []], "logprobs": ["x", 5],
            "top_logprobs": ["x", -1, 21, 1.5], "stream_options": ["x", 1, {"include_usage": "x"}],
            "tools": [[{"type": "function"}], "x", [{"type": 5}], [{"type": "function", "function": {"description": "no name"}}],
                      [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}]],
            "tool_choice": ["x", "auto", {"type": 5}, {"type": "function", "function": {"name": "absent"}}],
            "response_format": [{"type": "xml"}, "x", {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": {"uniqueItems": True}}}],
            "grammar": ["root ::= (", 5, 'x ::= "a"', "root ::= root \"a\""], "json_schema": ["x", 5, {"type": "strin"}, {"$ref": "#/$defs/none"}],
            "reasoning_format": ["x", 1], "reasoning_budget": ["x", -2, 1.5], "user": [5, [], {}], "ignore_eos": ["x", 1],
            "prompt_cache_key": [5, []],
        }),
        "/v1/completions": (comp, {
            "prompt": [None, 5, [], [-1], [10 ** 12], [1.5], [[1, 2]], {}, ""],
            "max_tokens": wrong, "logprobs": ["x", -1, 6, True], "echo": [True, "x"], "suffix": ["x"],
            "temperature": ["x", -1], "n": [0, "x"], "best_of": [2],
        }),
        "/v1/responses": ({"input": "hi", "max_output_tokens": 2}, {
            "input": [None, 5, [], {}, [None], ["x"], [{"role": "pilot", "content": "x"}], [{"role": "user", "content": 5}],
                      [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}], [{"type": "web_search_call"}],
                      [{"type": "function_call_output", "call_id": "call_x", "output": "x"}], [{"type": "function_call", "name": "f"}],
                      [{"type": "item_reference", "id": "msg_none"}], [{"type": 5}]],
            "max_output_tokens": wrong, "temperature": ["x", -1, 1e308 * 10, []], "top_p": ["x", 0, 2],
            "instructions": [5, [], {}], "previous_response_id": ["resp_none", 5, []], "store": ["x", 1],
            "stream": ["x", 1], "metadata": ["x", {"k": 5}, {str(i): "v" for i in range(17)}],
            "reasoning": ["x", {"effort": "extreme"}, {"effort": 5}, {"summary": "long"}],
            "text": ["x", {"format": {"type": "xml"}}, {"format": {"type": "json_schema", "name": "n"}},
                     {"format": {"type": "json_schema", "name": "n", "schema": {"uniqueItems": True}}}],
            "tools": ["x", [{"type": "function"}], [{"type": "web_search_preview"}], [{"type": "function", "name": "f", "parameters": 5}]],
            "tool_choice": ["x", "required", {"type": "file_search"}], "parallel_tool_calls": ["x"],
            "include": ["x", ["reasoning.encrypted_content"]], "truncation": ["auto", 5], "background": [True, "x"],
            "service_tier": ["flex", 5], "conversation": ["conv_1"], "prompt": [{"id": "pmpt_1"}], "frobnicate": [1],
        }),
        "/completion": ({"prompt": "hi", "n_predict": 2}, {
            "prompt": [None, 5, [], {}], "n_predict": ["x", BIG, 1.5], "n_probs": ["x", -1, 21],
            "temperature": ["x", -1], "stream": ["x"], "n": [2], "grammar": ["root ::= [", "root ::= undefined"],
            "json_schema": [{"type": "object", "patternProperties": {}}],
        }),
        "/api/chat": ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": False}, {
            # (no messages, [] or null, is Ollama's load idiom: answered at once, not refused)
            "messages": ["x", [{"role": "pilot", "content": "x"}], [{"role": "user", "content": 5}],
                         [{"role": "user", "content": "x", "images": ["aGk="]}]],
            "options": ["x", {"num_predict": "x"}, {"temperature": "x"}, {"top_k": -5}, {"num_gpu": 2},
                        {"num_ctx": 10 ** 9}, {"typical_p": 0.5}], "stream": ["x"], "think": ["x", "max", 1],
            "keep_alive": ["soon", [], "5 m"],
            "format": ["x", 5, {"type": "string", "not": {}}], "tools": [[{"type": "function"}]], "images": [["aGk="]],
        }),
        "/api/generate": ({"model": "tiny", "prompt": "hi", "stream": False}, {
            "prompt": [5, []], "options": ["x", {"num_predict": "x"}, {"num_thread": 3}], "stream": ["x"], "raw": ["x", 1],
            "system": [5, [], {}],
        }),
        "/v1/messages": ({"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}, {
            "model": [None, 5, []], "max_tokens": wrong + [None],
            "messages": [None, "x", 1, [], [1], [{"role": "user"}], [{"role": "assistant", "content": "x"}],
                         [{"role": "system", "content": "x"}], [{"role": "user", "content": 5}], [{"role": "user", "content": ""}],
                         [{"role": "user", "content": []}], [{"role": "user", "content": [{"type": "image", "source": {}}]}],
                         [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]}],
                         [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}],
                         [{"role": "user", "content": "x", "name": "bob"}], [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]],
            "system": [5, [{"type": "image"}], [{"text": "x"}], {}], "temperature": ["x", -1, 2, 1e308 * 10, []],
            "top_p": ["x", -0.5, 2, 0], "top_k": ["x", -5, 1.5, BIG], "stop_sequences": [5, "END", [5], [""], ["x"] * 100],
            "stream": ["x", 1], "metadata": ["x", {"user_id": 5}, {"other": 1}],
            "thinking": ["x", {"type": "enabled"}, {"type": "enabled", "budget_tokens": 10}, {"type": "enabled", "budget_tokens": BIG},
                         {"type": "sometimes"}, {"type": "disabled", "budget_tokens": 2000}],
            "tools": ["x", [{"name": "f"}], [{"name": "bad name", "input_schema": {"type": "object"}}],
                      [{"type": "web_search_20250305", "name": "w"}], [{"name": "f", "input_schema": {"type": "object", "not": {}}}]],
            "tool_choice": ["x", {"type": "any"}, {"type": "tool"}, {"type": "maybe"}, {"type": 5}],
            "cache_control": ["x", {"type": "permanent"}, {"type": 5}, {"type": "ephemeral", "ttl": 5}], "output_config": ["x", {"effort": "huge"}, {"format": {"type": "xml"}}],
            "container": ["x"], "mcp_servers": [[]], "service_tier": ["auto"], "frequency_penalty": [0.5],
        }),
        "/v1/messages/count_tokens": ({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}, {
            "messages": [None, []], "max_tokens": [5], "tools": ["x"], "model": [None],
        }),
        "/tokenize": ({"content": "hi"}, {"content": [None, 5, []], "with_pieces": ["x"], "add_special": ["x"]}),
        "/detokenize": ({"tokens": [1, 2]}, {"tokens": [None, "x", [-1], [10 ** 12], ["x"], [1.5]]}),
        "/v1/answer_now": ({"id": "chatcmpl-none"}, {"id": [None, 5, []]}),
    }
    for path, (base, table) in fields.items():
        for field, values in table.items():
            for v in values:
                b = dict(base)
                b[field] = v
                yield f"{path} {field}={json.dumps(v)[:40]}", path, json.dumps(b, allow_nan=True).encode()


def body_cases():
    for path in ("/v1/chat/completions", "/v1/completions", "/completion", "/api/chat", "/api/generate", "/tokenize",
                 "/detokenize", "/v1/answer_now", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"):
        yield f"{path} empty body", path, b""
        yield f"{path} broken JSON", path, b'{"messages": [{"role": "user", "content": "hi"'
        yield f"{path} a JSON array", path, b"[1, 2, 3]"
        yield f"{path} a JSON string", path, b'"hello"'
        yield f"{path} NaN", path, b'{"max_tokens": NaN, "prompt": "x", "messages": []}'
        yield f"{path} Infinity", path, b'{"temperature": Infinity, "prompt": "x"}'
        yield f"{path} invalid UTF-8", path, b'{"prompt": "\xff\xfe\xc3", "messages": [{"role": "user", "content": "\xc3\x28"}]}'
        yield f"{path} deep nesting", path, b"[" * 100000 + b"]" * 100000
        yield f"{path} trailing garbage", path, b'{"prompt": "x"} trailing'
    yield "chat whose prompt is longer than the context", "/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "word " * 5000}], "max_tokens": 4}).encode()
    yield "completion asking past the context", "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 10 ** 6}).encode()


def several_models(build):
    """Bad input of a server offering two models: an unknown `model` on every route that runs one
    must be a 404 in that API's shape, keep_alive garbage a 400, and bad serve flags a clear exit.
    Returns (count, failures)."""
    ponder = os.path.join(ROOT, build, "ponder")
    models = os.path.join(ROOT, "..", "shared", "models")
    failures, n = [], 0
    for name, args, expect in (
            ("--max-memory lots", ["--max-memory", "lots"], "--max-memory"),
            ("--keep-alive soon", ["--keep-alive", "soon"], "--keep-alive"),
            ("two --alias for one -m", ["--alias", "a", "--alias", "b"], "--alias"),
            ("--models-dir of no models", ["--models-dir", tempfile.mkdtemp()], "no .gguf"),
            ("two models of one name", ["-m", os.path.join(models, "tiny-Q8_0.gguf")], "named")):
        n += 1
        r = subprocess.run([ponder, "serve", "-m", os.path.join(models, "tiny-Q8_0.gguf"), "--port", "0"] + args,
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or expect not in r.stderr:
            failures.append(f"serve {name}: exit {r.returncode}, {r.stderr[-200:]!r}")
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="ponder-bad-models-", suffix=".log", delete=False)
    srv = subprocess.Popen([ponder, "serve", "-m", os.path.join(models, "tiny-Q8_0.gguf"), "--alias", "deepseek-r1:1.5b",
                            "-m", os.path.join(models, "tiny-Q4_K_M.gguf"), "--port", str(port), "--api-key", KEY, "-c", "512",
                            "--no-response-cache"], stdout=log, stderr=log)
    hi = [{"role": "user", "content": "hi"}]
    try:
        wait_until(lambda: send(port, "GET", "/health", timeout=2)[0] == 200, 30, "ponder serve with two models")
        for path, body, shape in (
                ("/v1/chat/completions", {"messages": hi}, "openai"), ("/v1/completions", {"prompt": "x"}, "openai"),
                ("/v1/responses", {"input": "x"}, "openai"), ("/completion", {"prompt": "x"}, "openai"),
                ("/tokenize", {"content": "x"}, "openai"), ("/detokenize", {"tokens": [1]}, "openai"),
                ("/api/chat", {"messages": hi}, "ollama"), ("/api/generate", {"prompt": "x"}, "ollama"),
                ("/api/show", {}, "ollama"), ("/v1/messages", {"max_tokens": 4, "messages": hi}, "anthropic"),
                ("/v1/messages/count_tokens", {"messages": hi}, "anthropic")):
            for model in ("nope", "deepseek-r1:7b", "tiny-Q8_0x", "tiny"):
                n += 1
                status, reply = send(port, "POST", path, json.dumps(dict(body, model=model)).encode())
                try:
                    j = json.loads(reply)
                    ok = status == 404 and {
                        "openai": lambda: j["error"]["code"] == "model_not_found",
                        "ollama": lambda: j == {"error": f"model '{model}' not found"},
                        "anthropic": lambda: j["type"] == "error" and j["error"]["type"] == "not_found_error"}[shape]()
                except (ValueError, KeyError, TypeError):
                    ok = False
                if not ok:
                    failures.append(f"{path} for model {model!r}: status {status}, body {reply[:120]!r}")
        n += 1
        status, reply = send(port, "GET", "/v1/models/nope")
        if status != 404:
            failures.append(f"GET /v1/models/nope: {status}")
        for value in ("soon", [], {}, "5 m", "m5", True):
            n += 1
            status, reply = send(port, "POST", "/api/generate", json.dumps({"model": "deepseek-r1:1.5b", "keep_alive": value}).encode())
            if status != 400 or not isinstance(json.loads(reply).get("error"), str):
                failures.append(f"keep_alive {value!r}: status {status}, body {reply[:120]!r}")
        loaded = json.loads(send(port, "GET", "/api/ps")[1])["models"]
        if loaded:
            failures.append(f"bad requests loaded models: {loaded}")
    finally:
        srv.terminate()
        if srv.wait(30) != 0:
            failures.append(f"ponder serve with two models exited {srv.returncode}")
    if not failures:
        os.unlink(log.name)
    return n, failures


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="ponder-bad-", suffix=".log", delete=False)
    srv = subprocess.Popen([os.path.join(ROOT, build, "ponder"), "serve", "-m", os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf"),
                            "--port", str(port), "--api-key", KEY, "-c", "2048", "--no-response-cache"], stdout=log, stderr=log)
    failures, n = [], 0
    try:
        wait_until(lambda: send(port, "GET", "/health", timeout=2)[0] == 200, 30, "ponder serve")

        def judge(name, status, body):
            nonlocal n
            n += 1
            ok = 400 <= status <= 499
            if ok and body:
                try:
                    j = json.loads(body)
                    ok = isinstance(j.get("error"), (dict, str))
                except ValueError:
                    ok = False
            t0 = time.time()
            alive = send(port, "GET", "/health", timeout=5)[0] == 200 and time.time() - t0 < 1
            if not ok or not alive:
                failures.append(f"{name}: status {status}, body {body[:120]!r}, health after {'ok' if alive else 'FAILED'}")

        for name, path, body in list(field_cases()) + list(body_cases()):
            try:
                status, reply = send(port, "POST", path, body, timeout=20)
            except (OSError, http.client.HTTPException) as e:
                status, reply = 0, str(e).encode()
            judge(name, status, reply)

        # Methods, routes, keys, headers, URIs.
        for method, path in (("GET", "/v1/chat/completions"), ("PUT", "/v1/completions"), ("DELETE", "/v1/models"),
                             ("POST", "/v1/models"), ("PATCH", "/completion"), ("GET", "/api/chat"), ("POST", "/api/tags"),
                             ("POST", "/health"), ("GET", "/v1/nothing"), ("GET", "/../../etc/passwd"), ("GET", "/%2e%2e/%2e%2e/etc/passwd"),
                             ("GET", "/assets/../../../etc/passwd"), ("POST", "/v2/chat/completions"), ("GET", "/api/nothing"),
                             ("GET", "/v1/messages"), ("POST", "/v1/messages/batches")):
            status, reply = send(port, method, path, b"{}" if method != "GET" else b"")
            judge(f"{method} {path}", status, reply)
        for name, headers in (("no key", {"Authorization": ""}), ("a wrong key", {"Authorization": "Bearer nope"}),
                              ("a key of another scheme", {"Authorization": f"Basic {KEY}"}), ("a near-miss key", {"Authorization": f"Bearer {KEY}x"})):
            for path in ("/v1/chat/completions", "/v1/models", "/api/tags", "/tokenize", "/metrics", "/props"):
                status, reply = send(port, "POST" if path in ("/v1/chat/completions", "/tokenize") else "GET", path,
                                     b'{"messages":[{"role":"user","content":"hi"}],"content":"x"}', headers)
                judge(f"{path} with {name}", status, reply)
        # The key on every route but the probes and the page (the route table of src/server/, route by route).
        routes = [("GET", p) for p in ("/api/ps", "/api/tags", "/api/version", "/metrics", "/models", "/props", "/slots", "/v1/models")] + \
                 [("POST", p) for p in ("/api/chat", "/api/generate", "/api/show", "/completion", "/completions", "/detokenize",
                                        "/tokenize", "/v1/answer_now", "/v1/chat/completions", "/v1/completions", "/v1/messages",
                                        "/v1/messages/count_tokens")]
        for method, path in routes:
            status, reply = send(port, method, path, b"{}" if method == "POST" else b"", {"Authorization": ""})
            if status != 401:
                failures.append(f"{method} {path} without the key: {status}")
            judge(f"{method} {path} without the key", status, reply)
        for path in ("/health", "/health/live", "/health/ready", "/v1/health", "/"):
            status, _ = send(port, "GET", path, b"", {"Authorization": ""})
            if status != 200:
                failures.append(f"GET {path} (public) without the key: {status}")
        judge("a 9,000-byte URI", *raw(port, b"GET /health?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"))
        judge("a 40,000-byte header (over 32 KiB)", *raw(port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n"))
        judge("5,000 headers", *raw(port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5000)) + b"\r\n"))
        judge("a 9 MiB body (over the 8 MiB limit), answered before it is all sent", *raw(
            port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
            + KEY.encode() + b"\r\nContent-Length: 9437184\r\n\r\n" + b"{" + b"a" * 65536))
        judge("a body larger than its Content-Length says", *raw(port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                                                             + b"\r\nContent-Length: 5\r\n\r\n{\"content\": \"hi\"}"))
        judge("a Content-Length of 10^15", *raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\n{"))
        judge("a negative Content-Length", *raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}"))
        judge("a bad chunked encoding", *raw(port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"))
        judge("a request line with no version", *raw(port, b"GET /health\r\n\r\n"))
        judge("a method of binary bytes", *raw(port, b"\x00\x01\x02 / HTTP/1.1\r\nHost: x\r\n\r\n"))
        judge("HTTP/2 preface on HTTP/1.1", *raw(port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
    finally:
        srv.terminate()
        rc = srv.wait(30)
    several_n, several_failures = several_models(build)
    n += several_n
    failures += several_failures
    print(f"test_bad_requests: {n} bad requests, {len(failures)} answered wrongly; ponder serve exited {rc}")
    for f in failures[:40]:
        print("  FAIL " + f)
    if failures or rc != 0:
        with open(log.name) as f:
            print(f.read()[-2000:])
        sys.exit(1)
    os.unlink(log.name)
    print("test_bad_requests: all passed")


if __name__ == "__main__":
    main()

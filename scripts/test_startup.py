#!/usr/bin/env python3
"""`ponder serve` refusing to start: a missing, empty, truncated or non-GGUF model file, a bad flag,
a bad flag value, a busy port, an unusable cache directory, a bad Redis URL, a draft model with
another tokenizer or speculative flags that contradict each other. Each must end in a
non-zero exit within seconds, with one clear line on stderr naming the problem, and no core file.
An unusable cache directory is not fatal: the server starts and caches in memory (said in one line).
Usage: scripts/test_startup.py [BUILD_DIR]"""

import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Checks, ROOT, free_port, request, wait_until  # noqa: E402

check = Checks()
failures = check.failures


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    ponder = os.path.join(ROOT, build, "ponder")
    model = os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf")
    tmp = tempfile.mkdtemp(prefix="ponder-startup-")
    empty = os.path.join(tmp, "empty.gguf")
    open(empty, "wb").close()
    truncated = os.path.join(tmp, "truncated.gguf")
    with open(model, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read(200000))
    text = os.path.join(tmp, "notes.gguf")
    with open(text, "w") as f:
        f.write("this is not a model\n")
    # A draft whose tokenizer is not the target's: the same file with one token's text changed
    # (an added token that no merge names, so the file still loads).
    other_vocab = os.path.join(tmp, "other-vocab.gguf")
    with open(model, "rb") as f:
        data = f.read()
    user = "<｜User｜>".encode()
    prefix = len(user).to_bytes(8, "little")
    assert data.count(prefix + user) == 1
    with open(other_vocab, "wb") as g:
        g.write(data.replace(prefix + user, prefix + "<｜Usex｜>".encode(), 1))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    busy_port = busy.getsockname()[1]
    cases = [
        ("a missing model file", ["-m", os.path.join(tmp, "nope.gguf")], "nope.gguf"),
        ("an empty model file", ["-m", empty], "empty.gguf"),
        ("a truncated model file", ["-m", truncated], "truncated.gguf"),
        ("a text file as the model", ["-m", text], "notes.gguf"),
        ("a model that is a directory", ["-m", tmp], tmp),
        ("an unknown flag", ["-m", model, "--no-such-flag"], "--no-such-flag"),
        ("a bad flag value", ["-m", model, "--port", "http"], "--port"),
        ("a negative parallel count", ["-m", model, "--parallel", "0"], "--parallel"),
        ("a busy port", ["-m", model, "--port", str(busy_port)], str(busy_port)),
        ("a bad --cache-url", ["-m", model, "--cache-url", "http://x"], "redis://"),
        ("a bad --replica-id", ["-m", model, "--replica-id", "R 1"], "--replica-id"),
        ("a zero --header-timeout", ["-m", model, "--header-timeout", "0"], "--header-timeout"),
        ("a draft with another tokenizer", ["-m", model, "--draft", other_vocab], "tokenizer differs"),
        ("a draft that is missing", ["-m", model, "--draft", os.path.join(tmp, "no-draft.gguf")],
         "no-draft.gguf"),
        ("--draft with --spec ngram", ["-m", model, "--draft", model, "--spec", "ngram"], "--spec"),
        ("--draft-min above --draft-max", ["-m", model, "--spec", "ngram", "--draft-min", "6",
                                          "--draft-max", "4"], "--draft-min"),
        ("an unknown --spec", ["-m", model, "--spec", "medusa"], "--spec"),
    ]
    for what, args, named in cases:
        r = subprocess.run([ponder, "serve", "--port", "0"] + args if "--port" not in args else [ponder, "serve"] + args,
                           capture_output=True, text=True, timeout=30, cwd=tmp)
        # Progress lines of the model's load ("[info] ...") come before a refusal found after it.
        lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("[info]")]
        cores = [f for f in os.listdir(tmp) if f.startswith("core")]
        check(r.returncode not in (0, -6, -11) and r.returncode > 0 and named in r.stderr and len(lines) <= 3 and not cores,
              f"{what}: exit {r.returncode}, '{lines[-1] if lines else ''}'")
    busy.close()
    # An unusable cache directory (a file where the directory should be): the server still starts.
    blocker = os.path.join(tmp, "cache-is-a-file")
    open(blocker, "w").close()
    port = free_port()
    p = subprocess.Popen([ponder, "serve", "-m", model, "--port", str(port), "--cache-dir", os.path.join(blocker, "sub")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: request(port, "GET", "/health", timeout=2).status == 200, 30, "ponder serve")
        r = request(port, "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0})
        check(r.status == 200, "an unusable cache directory: the server starts and answers")
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    check("memory only" in err, "and says in one line that the cache is in memory only")
    if failures:
        print(f"test_startup: {len(failures)} FAILED")
        sys.exit(1)
    print("test_startup: all passed")


if __name__ == "__main__":
    main()

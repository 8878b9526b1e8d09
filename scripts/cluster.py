"""A Ponder cluster on this machine, for scripts/test_cluster.py and scripts/affinity_bench.py:
a real redis-server, N `ponder serve` replicas (each on its own loopback port, --replica-id rI,
the response cache in that Redis) and a real nginx running deploy/nginx/ponder.conf with only its
ports moved. Everything listens on 127.0.0.1 and is stopped by Cluster.stop() (also at exit).
Standard library only."""

import atexit
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Debian puts nginx in /usr/sbin, which a non-root PATH may lack.
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


def request(port, method, path, body=None, headers=None, timeout=60):
    """One request on a fresh connection; the whole answer (SSE included) read."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        r = c.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace"))
    finally:
        c.close()


def metric(port, name):
    """A Prometheus value from /metrics, summed over its label sets (None when absent)."""
    text = request(port, "GET", "/metrics").body
    values = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    return sum(values) if values else None


def settled_kv_disk_writes(port, timeout=30):
    """Waits until the disk tier's writes (a writer thread) stop growing; the blocks written."""
    last, deadline = -1, time.time() + timeout
    while time.time() < deadline:
        n = metric(port, "ponder_kv_disk_blocks_written_total") or 0
        if n == last and n > 0:
            return n
        last = n
        time.sleep(0.5)
    return last


def _mount(*args):
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def hostile_dirs(prefix):
    """Where this machine allows mounts (root with CAP_SYS_ADMIN): a full disk (a 256 KiB tmpfs)
    and a read-only directory (a read-only bind mount), as (name, directory, read_only) triples;
    none (a line says why) where it does not. Unmounted on exit."""
    base = tempfile.mkdtemp(prefix=prefix)
    full, ro = os.path.join(base, "full"), os.path.join(base, "ro")
    os.makedirs(full)
    os.makedirs(ro)
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", full):
        print("  --   full disk and read-only directory skipped: this machine allows no mounts here")
        yield []
        return
    try:
        places = [("a full disk (256 KiB tmpfs)", full, False)]
        if _mount("--bind", ro, ro) and _mount("-o", "remount,bind,ro", ro, ro):
            places.append(("a read-only directory", ro, True))
        else:
            print("  --   read-only directory skipped: no read-only bind mount here")
        yield places
    finally:
        subprocess.run(["umount", full], capture_output=True)
        subprocess.run(["umount", ro], capture_output=True)


class Cluster:
    def __init__(self, build="build", model=None, replicas=3, ctx=2048, extra=()):
        self.build = os.path.join(ROOT, build)
        self.model = model or os.path.join(ROOT, "..", "shared", "models", "tiny-Q8_0.gguf")
        self.dir = tempfile.mkdtemp(prefix="ponder-cluster-")
        self.redis_port = free_port()
        self.ports = [free_port() for _ in range(replicas)]
        self.front = free_port()
        self.ctx, self.extra = ctx, list(extra)
        self.redis = None
        self.procs = [None] * replicas
        self.nginx = None
        atexit.register(self.stop)

    # --- Redis
    def start_redis(self):
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: socket.create_connection(("127.0.0.1", self.redis_port), 0.2).close() is None, 10, "redis")

    def stop_redis(self):
        if self.redis:
            self.redis.kill()
            self.redis.wait()
            self.redis = None

    # --- replicas
    def replica_name(self, i):
        return f"r{i + 1}"

    def start_replica(self, i, wait=True):
        log = open(os.path.join(self.dir, f"{self.replica_name(i)}.log"), "a")
        cmd = [os.path.join(self.build, "ponder"), "serve", "-m", self.model, "--port", str(self.ports[i]),
               "--replica-id", self.replica_name(i), "--cache-url", f"redis://127.0.0.1:{self.redis_port}/0",
               "-c", str(self.ctx), "-t", "1", "--drain-timeout", "30"] + self.extra
        self.procs[i] = subprocess.Popen(cmd, stdout=log, stderr=log)
        if wait:
            self.wait_ready(i)

    def wait_ready(self, i):
        wait_until(lambda: request(self.ports[i], "GET", "/health/ready", timeout=2).status == 200, 60,
                   f"replica {self.replica_name(i)}")

    def stop_replica(self, i, sig=signal.SIGTERM, timeout=60):
        p = self.procs[i]
        if p is None:
            return None
        p.send_signal(sig)
        rc = p.wait(timeout)
        self.procs[i] = None
        return rc

    def log(self, i):
        with open(os.path.join(self.dir, f"{self.replica_name(i)}.log")) as f:
            return f.read()

    # --- nginx
    def nginx_conf(self):
        """deploy/nginx/ponder.conf with its ports moved, inside a minimal nginx.conf."""
        with open(os.path.join(ROOT, "deploy", "nginx", "ponder.conf")) as f:
            conf = f.read()
        for i, port in enumerate(self.ports):
            assert f"127.0.0.1:{8081 + i}" in conf, "the shipped config names 127.0.0.1:8081.."
            conf = conf.replace(f"127.0.0.1:{8081 + i};", f"127.0.0.1:{port};").replace(f"127.0.0.1:{8081 + i} ", f"127.0.0.1:{port} ")
        conf = conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{self.front};")
        with open(os.path.join(self.dir, "ponder.conf"), "w") as f:
            f.write(conf)
        d = self.dir
        user = "user root;\n" if os.geteuid() == 0 else ""
        main = (f"{user}daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n"
                f"events {{ worker_connections 2048; }}\n"
                f"http {{\n  access_log {d}/nginx-access.log;\n  client_body_temp_path {d}/body;\n"
                f"  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n"
                f"  scgi_temp_path {d}/scgi;\n  include {d}/ponder.conf;\n}}\n")
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(main)
        return path

    def check_nginx_conf(self):
        path = self.nginx_conf()
        r = subprocess.run([NGINX, "-t", "-p", self.dir, "-c", path], capture_output=True, text=True)
        return r.returncode, r.stderr

    def start_nginx(self):
        path = self.nginx_conf()
        self.nginx = subprocess.Popen([NGINX, "-p", self.dir, "-c", path], stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(self.dir, "nginx-stderr.log"), "w"))
        wait_until(lambda: request(self.front, "GET", "/health", timeout=2).status == 200, 20, "nginx")

    def start(self):
        self.start_redis()
        for i in range(len(self.ports)):
            self.start_replica(i, wait=False)
        for i in range(len(self.ports)):
            self.wait_ready(i)
        self.start_nginx()

    def stop(self):
        for i, p in enumerate(self.procs):
            if p is not None:
                p.kill()
                p.wait()
                self.procs[i] = None
        if self.nginx:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()
            self.nginx = None
        self.stop_redis()
        if os.environ.get("PONDER_KEEP_CLUSTER_LOGS") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


class Checks:
    """check(ok, what) prints one line per check and keeps what failed in check.failures."""

    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("  ok   " if ok else "  FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)


def chat(messages, max_tokens=8, temperature=0.0, stream=False, **extra):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature, "stream": stream}
    body.update(extra)
    return body

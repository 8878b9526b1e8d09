#!/usr/bin/env python3
"""The deployment files in deploy/, checked as far as this machine can (no cluster, no image
registry and no systemd are reachable here, so nothing is applied, built or started):
  - every `ponder serve` flag they pass exists (`ponder serve --help`);
  - Kubernetes (deploy/kubernetes/ponder.yaml, parsed with PyYAML): the kinds, the probes on
    /health/ready and /health/live, a grace period longer than --drain-timeout, selectors that
    match labels, the Redis URL naming the Redis Service;
  - the container file: known instructions, stages that exist, JSON exec forms, the port;
  - the systemd unit: sections and hardening keys, `systemd-analyze verify` where it exists.
nginx's configuration is checked by `nginx -t` in scripts/test_cluster.py, which also runs it.
Usage: scripts/test_deploy.py [BUILD_DIR]"""

import configparser
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:  # a Python without PyYAML first in PATH: Debian's has it (scripts/setup.sh)
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from cluster import Checks  # noqa: E402

check = Checks()
failures = check.failures


def serve_flags(build):
    out = subprocess.run([os.path.join(ROOT, build, "ponder"), "serve", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", out))


def flags_in(args):
    return [a.split("=", 1)[0] for a in args if a.startswith("-") and not re.match(r"^-\d", a)]


def check_flags(where, args, known):
    unknown = [f for f in flags_in(args) if f not in known]
    check(not unknown, f"{where}: every ponder serve flag exists" + (f" (unknown: {unknown})" if unknown else ""))


def kubernetes(known):
    with open(os.path.join(ROOT, "deploy", "kubernetes", "ponder.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    check({("Deployment", "ponder"), ("Service", "ponder"), ("Ingress", "ponder"), ("Deployment", "ponder-redis"),
           ("Service", "ponder-redis")} <= set(by), f"kubernetes: the five objects ({sorted(by)})")
    dep = by[("Deployment", "ponder")]["spec"]
    pod = dep["template"]["spec"]
    c = pod["containers"][0]
    check(c["readinessProbe"]["httpGet"]["path"] == "/health/ready", "kubernetes: readiness probe on /health/ready")
    check(c["livenessProbe"]["httpGet"]["path"] == "/health/live", "kubernetes: liveness probe on /health/live")
    args = c["args"]
    check_flags("kubernetes", args, known)
    drain = next(int(a.split("=")[1]) for a in args if a.startswith("--drain-timeout="))
    check(pod["terminationGracePeriodSeconds"] > drain, "kubernetes: the grace period outlasts --drain-timeout")
    check(dep["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, "kubernetes: a rolling update keeps every replica until its successor is ready")
    labels = dep["template"]["metadata"]["labels"]
    for name in ("ponder", "ponder-redis"):
        sel = by[("Service", name)]["spec"]["selector"]
        tl = by[("Deployment", name)]["spec"]["template"]["metadata"]["labels"]
        check(all(tl.get(k) == v for k, v in sel.items()), f"kubernetes: Service {name} selects its Deployment's pods")
    check(all(labels.get(k) == v for k, v in dep["selector"]["matchLabels"].items()), "kubernetes: the Deployment selects its pods")
    url = next(a.split("=", 1)[1] for a in args if a.startswith("--cache-url="))
    check(re.match(r"^redis://ponder-redis:6379(/\d+)?$", url) is not None, f"kubernetes: --cache-url names the Redis Service ({url})")
    port_names = {p["name"] for p in c["ports"]}
    check(c["readinessProbe"]["httpGet"]["port"] in port_names, "kubernetes: probes use a declared port")
    mem = c["resources"]["requests"]["memory"]
    check(mem.endswith("Gi") and float(mem[:-2]) >= 1.5, f"kubernetes: the memory request ({mem}) covers the 1.5B's peak RSS (~1.4 GB)")
    return c["ports"][0]["containerPort"]


def containerfile(known, k8s_port):
    path = os.path.join(ROOT, "deploy", "Containerfile")
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    instructions = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER", "WORKDIR",
                    "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
    bad = [ln.split()[0] for ln in lines if ln.split()[0].upper() not in instructions]
    check(not bad, "containerfile: every instruction is one" + (f" (not: {bad})" if bad else ""))
    stages = [m.group(1) for ln in lines for m in [re.match(r"FROM\s+\S+\s+AS\s+(\S+)", ln, re.I)] if m]
    froms = [m.group(1) for ln in lines for m in [re.match(r"COPY\s+--from=(\S+)", ln)] if m]
    check(froms and all(s in stages for s in froms), f"containerfile: COPY --from names a stage ({froms} of {stages})")
    ep = json.loads(next(ln[len("ENTRYPOINT"):] for ln in lines if ln.startswith("ENTRYPOINT")))
    cmd = json.loads(next(ln[len("CMD"):] for ln in lines if ln.startswith("CMD")))
    check(ep[:2] == ["/usr/local/bin/ponder", "serve"], "containerfile: the entry point is ponder serve")
    check_flags("containerfile", ep[2:] + cmd, known)
    exposed = int(next(ln.split()[1] for ln in lines if ln.startswith("EXPOSE")))
    port = int(ep[ep.index("--port") + 1])
    check(exposed == port == k8s_port, f"containerfile: EXPOSE, --port and the Kubernetes containerPort agree ({exposed})")
    check(any("/health/live" in ln for ln in lines if ln.startswith("HEALTHCHECK")), "containerfile: HEALTHCHECK on /health/live")
    check(any(ln.startswith("USER ") and ln.split()[1] != "root" for ln in lines), "containerfile: runs as its own user")


def systemd(known):
    path = os.path.join(ROOT, "deploy", "systemd", "ponder.service")
    p = configparser.ConfigParser(strict=False, interpolation=None)
    p.optionxform = str
    with open(path) as f:
        p.read_string(f.read())
    check({"Unit", "Service", "Install"} <= set(p.sections()), "systemd: [Unit], [Service] and [Install]")
    s = p["Service"]
    exec_start = s["ExecStart"].replace("\\\n", " ").split()
    check(exec_start[:2] == ["/usr/local/bin/ponder", "serve"], "systemd: ExecStart runs ponder serve")
    check_flags("systemd", exec_start[2:], known)
    for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("PrivateTmp", "yes")):
        check(s.get(key) == want, f"systemd: {key}={want}")
    check(s.get("DynamicUser") == "yes" or s.get("User", "root") != "root", "systemd: its own user")
    drain = int(exec_start[exec_start.index("--drain-timeout") + 1])
    check(int(s["TimeoutStopSec"]) > drain, "systemd: TimeoutStopSec outlasts --drain-timeout")
    if shutil.which("systemd-analyze") and os.path.isdir("/run/systemd/system"):
        r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
        check(r.returncode == 0, "systemd: systemd-analyze verify" + ("" if r.returncode == 0 else ": " + r.stderr))
    else:
        print("  --   systemd-analyze verify skipped: systemd does not run on this machine")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    known = serve_flags(build)
    if "--cache-url" not in known:
        check(False, f"ponder serve --help lists its flags ({len(known)} found)")
    port = kubernetes(known)
    containerfile(known, port)
    systemd(known)
    if failures:
        print(f"test_deploy: {len(failures)} FAILED")
        sys.exit(1)
    print("test_deploy: all passed")


if __name__ == "__main__":
    main()

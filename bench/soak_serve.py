#!/usr/bin/env python3
"""Soak test of `nnsight serve` (docs/testing.md, "Soak test").

Starts `nnsight serve` on the default model with worker processes
(--executor mp, 2 replicas), answers every greedy request of a fixed set alone
first (the solo runs), then runs N clients for D minutes, each looping over a
random mix of:

  completion  whole greedy completion       text must equal its solo run
  stream      streamed greedy completion    text must equal its solo run, one [DONE]
  trace       POST /v1/traces?wait=1        saves (bytes) and text must equal the solo run
  async       POST /v1/traces, poll, fetch  same; its id must be listed and unique
  cancel      a stream the client drops after its first event, or a trace DELETEd
  bad         a malformed request           must get the 4xx it deserves

while a killer thread SIGKILLs one worker process every --kill-every seconds.
A request that meets a killed worker gets a 5xx naming the worker: counted
under "worker killed", not as a failure. It reports throughput, p50/p99
latency by kind, answers by cause, the server's RSS (with its workers) over
time, mismatches against the solo runs, and lost (no answer / id vanished) or
duplicated (an id seen twice) requests. Exits 1 on any mismatch, loss,
duplicate or unexpected answer.

  scripts/setup   # the default model, the venv
  python3 bench/soak_serve.py --clients 16 --minutes 3
  python3 bench/soak_serve.py               # 64 clients, 30 minutes
Only the standard library: it runs with any python3.
"""

import argparse
import collections
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

PROMPTS = [
    "The Eiffel Tower is located in the city of",
    "The capital of Italy is",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "The largest planet in the solar system is",
    "My favourite recipe for pancakes starts with",
]
MAX_TOKENS = [4, 16, 48]
# Zero layer 3's MLP output at every step, save layer 5's MLP output of the prompt.
GRAPH = {
    "format": "nnsight.graph",
    "version": 1,
    "nodes": [
        {"id": 0, "kind": "get", "key": "model.layers.3.mlp.output", "step": 0},
        {"id": 1, "kind": "const", "value": 0.0},
        {"id": 2, "kind": "op", "op": "mul", "args": [0, 1]},
        {"id": 3, "kind": "set", "key": "model.layers.3.mlp.output", "step": 0, "args": [2]},
        {"id": 4, "kind": "get", "key": "model.layers.5.mlp.output", "step": 0},
        {"id": 5, "kind": "save", "name": "mlp5", "args": [4]},
    ],
}
BAD = [
    # (method, path, body, expected status)
    ("POST", "/v1/completions", "{not json", 400),
    ("POST", "/v1/completions", json.dumps({"prompt": [4294967297]}), 400),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "n": 3}), 400),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "stream": "yes"}), 400),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 2.5}), 400),
    ("POST", "/v1/completions", json.dumps({"prompt": "x " * 9000, "max_tokens": 1}), 400),
    ("POST", "/v1/tokenize", json.dumps({"prompt": 5}), 400),
    ("POST", "/v1/traces", json.dumps({"prompts": ["x"], "graphs": [{"nodes": [{"kind": "nope"}]}]}), 400),
    ("GET", "/v1/traces/does-not-exist", None, 404),
    ("GET", "/v1/nothing", None, 404),
    ("BREW", "/health", None, 501),
]


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid, name=None):
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        close = stat.rfind(")")
        comm = stat[stat.find("(") + 1 : close]
        ppid = int(stat[close + 2 :].split()[1])
        if ppid == pid and (name is None or comm.startswith(name)):
            out.append(int(e))
    return out


class Server:
    def __init__(self, binary, model, replicas, clients, extra):
        cmd = [binary, "serve", "--model", model, "--port", "0", "--executor", "mp", "--replicas", str(replicas),
               "--no-progress", "--max-connections-per-address", str(2 * clients + 16),
               "--max-concurrent-traces", str(max(8, clients)), "--max-queued-traces", str(4 * clients)] + extra
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://([^:]+):(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"soak: the server did not start: {line!r} ({' '.join(cmd)})")
        self.host, self.port = m.group(1), int(m.group(2))

    def rss_mb(self):
        pids = [self.proc.pid] + children(self.proc.pid)
        return sum(rss_kb(p) for p in pids) / 1024.0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Client:
    def __init__(self, server, timeout=600):
        self.server = server
        self.timeout = timeout

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection(self.server.host, self.server.port, timeout=self.timeout)
        try:
            c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stream(self, path, body, drop_after_first=False):
        """Returns (status, list of data payloads) of a server-sent-events answer."""
        c = http.client.HTTPConnection(self.server.host, self.server.port, timeout=self.timeout)
        try:
            c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, [r.read().decode(errors="replace")]
            events = []
            buf = b""
            while True:
                chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    if ev.startswith(b"data: "):
                        events.append(ev[6:].decode())
                        if drop_after_first:
                            return 200, events
            return 200, events
        finally:
            c.close()


def completion_body(prompt, max_tokens, stream=False):
    return json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": stream})


def trace_body(prompt, max_tokens):
    return json.dumps({"prompts": [prompt], "graphs": [GRAPH],
                       "sampling_params": {"max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}})


def saves_digest(blob):
    return hashlib.sha256(blob).hexdigest()


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.latency = collections.defaultdict(list)  # kind -> seconds
        self.causes = collections.Counter()  # "kind: cause" -> count
        self.problems = []  # mismatches, losses, duplicates, unexpected answers
        self.tokens = 0
        self.ids = collections.Counter()

    def done(self, kind, seconds, cause="ok", tokens=0):
        with self.mu:
            self.latency[kind].append(seconds)
            self.causes[f"{kind}: {cause}"] += 1
            self.tokens += tokens

    def problem(self, what):
        with self.mu:
            self.problems.append(what)

    def seen_id(self, ident):
        with self.mu:
            self.ids[ident] += 1
            if self.ids[ident] > 1:
                self.problems.append(f"duplicated id {ident}")


def server_error_cause(status, body):
    """A 5xx the soak provokes on purpose (a killed worker) or a real failure."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    if status >= 500 and "worker" in text:
        return "worker killed"
    return None


def run_client(idx, server, solo, deadline, stats, seed):
    rng = random.Random(seed)
    cl = Client(server)
    kinds = ["completion"] * 30 + ["stream"] * 20 + ["trace"] * 15 + ["async"] * 15 + ["cancel"] * 10 + ["bad"] * 10
    while time.time() < deadline:
        kind = rng.choice(kinds)
        prompt = rng.choice(PROMPTS)
        n = rng.choice(MAX_TOKENS)
        t0 = time.time()
        try:
            if kind == "completion":
                status, body = cl.request("POST", "/v1/completions", completion_body(prompt, n))
                if status == 200:
                    j = json.loads(body)
                    stats.seen_id(j["id"])
                    text = j["choices"][0]["text"]
                    if text != solo[("c", prompt, n)]:
                        stats.problem(f"completion differs from its solo run: {prompt!r} {n}: {text!r}")
                    stats.done(kind, time.time() - t0, tokens=j["usage"]["completion_tokens"])
                else:
                    cause = server_error_cause(status, body)
                    if not cause:
                        stats.problem(f"completion answered {status}: {body[:300]!r}")
                    stats.done(kind, time.time() - t0, cause or f"unexpected {status}")
            elif kind == "stream":
                status, events = cl.stream("/v1/completions", completion_body(prompt, n, True))
                if status != 200:
                    cause = server_error_cause(status, events[0])
                    if not cause:
                        stats.problem(f"stream answered {status}: {events[0][:300]!r}")
                    stats.done(kind, time.time() - t0, cause or f"unexpected {status}")
                    continue
                if events.count("[DONE]") != 1 or events[-1] != "[DONE]":
                    stats.problem(f"stream without exactly one final [DONE]: {events[-3:]}")
                chunks = [json.loads(e) for e in events if e != "[DONE]"]
                errors = [c for c in chunks if "error" in c]
                if errors:
                    cause = server_error_cause(errors[0]["error"].get("code", 0), json.dumps(errors[0]))
                    if not cause:
                        stats.problem(f"stream error event: {errors[0]}")
                    stats.done(kind, time.time() - t0, cause or "unexpected error event")
                    continue
                ids = {c["id"] for c in chunks}
                if len(ids) != 1:
                    stats.problem(f"a stream's chunks carry {len(ids)} ids")
                stats.seen_id(ids.pop())
                text = "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))
                if text != solo[("c", prompt, n)]:
                    stats.problem(f"stream differs from its solo run: {prompt!r} {n}: {text!r}")
                stats.done(kind, time.time() - t0, tokens=n)
            elif kind in ("trace", "async"):
                if kind == "trace":
                    status, body = cl.request("POST", "/v1/traces?wait=1", trace_body(prompt, n))
                else:
                    status, body = cl.request("POST", "/v1/traces", trace_body(prompt, n))
                    if status == 202:
                        ident = json.loads(body)["id"]
                        stats.seen_id(ident)
                        st, listed = cl.request("GET", "/v1/traces")
                        if st != 200 or ident not in {t["id"] for t in json.loads(listed)["data"]}:
                            stats.problem(f"trace {ident} is not listed ({st})")
                        status, body = cl.request("GET", f"/v1/traces/{ident}/saves?wait=1")
                        if status == 404 or status == 410:
                            stats.problem(f"trace {ident} lost: {status} {body[:200]!r}")
                if status == 200:
                    if saves_digest(body) != solo[("t", prompt, n)]:
                        stats.problem(f"{kind} saves differ from the solo run: {prompt!r} {n}")
                    stats.done(kind, time.time() - t0, tokens=n)
                else:
                    cause = server_error_cause(status, body)
                    if not cause:
                        stats.problem(f"{kind} answered {status}: {body[:300]!r}")
                    stats.done(kind, time.time() - t0, cause or f"unexpected {status}")
            elif kind == "cancel":
                if rng.random() < 0.5:
                    status, events = cl.stream("/v1/completions", completion_body(prompt, 48, True), True)
                    stats.done(kind, time.time() - t0, f"stream dropped ({status})")
                else:
                    status, body = cl.request("POST", "/v1/traces", trace_body(prompt, 48))
                    if status != 202:
                        cause = server_error_cause(status, body)
                        if not cause:
                            stats.problem(f"cancel's trace answered {status}: {body[:200]!r}")
                        stats.done(kind, time.time() - t0, cause or f"unexpected {status}")
                        continue
                    ident = json.loads(body)["id"]
                    stats.seen_id(ident)
                    time.sleep(rng.random() * 0.2)
                    st, body = cl.request("DELETE", f"/v1/traces/{ident}")
                    state = json.loads(body).get("state") if st == 200 else None
                    # The cancel is asynchronous: the answer may still say queued or running.
                    if st != 200 or state not in ("queued", "running", "cancelled", "done", "failed"):
                        stats.problem(f"DELETE {ident}: {st} {body[:200]!r}")
                    st, body = cl.request("GET", f"/v1/traces/{ident}/saves?wait=1")
                    # cancelled: 410; finished before the DELETE: 200; a killed worker: 503
                    if st not in (200, 410, 503):
                        stats.problem(f"saves of cancelled {ident}: {st} {body[:200]!r}")
                    stats.done(kind, time.time() - t0, {200: "trace finished first", 410: "trace cancelled",
                                                        503: "worker killed"}.get(st, f"unexpected {st}"))
            else:
                method, path, body, want = rng.choice(BAD)
                status, answer = cl.request(method, path, body)
                if status != want:
                    stats.problem(f"bad request {method} {path} {str(body)[:60]!r}: {status}, not {want}: "
                                  f"{answer[:200]!r}")
                stats.done(kind, time.time() - t0, f"{status}")
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            stats.problem(f"{kind}: {type(e).__name__}: {e} (lost)")
            stats.done(kind, time.time() - t0, f"lost ({type(e).__name__})")


def solo_runs(server):
    cl = Client(server)
    solo = {}
    for prompt in PROMPTS:
        for n in MAX_TOKENS:
            status, body = cl.request("POST", "/v1/completions", completion_body(prompt, n))
            if status != 200:
                sys.exit(f"soak: solo completion failed: {status} {body[:300]!r}")
            solo[("c", prompt, n)] = json.loads(body)["choices"][0]["text"]
            status, body = cl.request("POST", "/v1/traces?wait=1", trace_body(prompt, n))
            if status != 200:
                sys.exit(f"soak: solo trace failed: {status} {body[:300]!r}")
            solo[("t", prompt, n)] = saves_digest(body)
    return solo


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.path.join(os.environ.get("NNSIGHT_BUILD_DIR", os.path.join(root, "build")),
                                                     "nnsight"), help="the nnsight program")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=60, help="seconds between worker kills (0 = none)")
    ap.add_argument("--sample-every", type=float, default=10, help="seconds between RSS samples")
    ap.add_argument("--json", help="also write the report here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("serve_args", nargs="*", help="more `nnsight serve` options (after --)")
    a = ap.parse_args()

    server = Server(a.server, a.model, a.replicas, a.clients, a.serve_args)
    try:
        t0 = time.time()
        solo = solo_runs(server)
        print(f"soak: server on port {server.port}, {len(solo)} solo runs in {time.time() - t0:.1f}s; "
              f"{a.clients} clients for {a.minutes} min", flush=True)
        stats = Stats()
        start = time.time()
        deadline = start + a.minutes * 60
        rss = [(0.0, server.rss_mb())]
        kills = []
        stop = threading.Event()

        def monitor():
            next_kill = start + a.kill_every if a.kill_every > 0 else float("inf")
            while not stop.wait(1.0):
                now = time.time()
                if now - start >= len(rss) * a.sample_every:
                    rss.append((now - start, server.rss_mb()))
                    print(f"soak: {now - start:6.0f}s  RSS {rss[-1][1]:7.1f} MB  answers "
                          f"{sum(stats.causes.values())}  problems {len(stats.problems)}", flush=True)
                if now >= next_kill and now < deadline - 5:
                    workers = children(server.proc.pid, "nnsight-worker")
                    if workers:
                        victim = random.Random(len(kills)).choice(workers)
                        os.kill(victim, signal.SIGKILL)
                        kills.append(now - start)
                    next_kill = now + a.kill_every

        mon = threading.Thread(target=monitor, daemon=True)
        mon.start()
        threads = [threading.Thread(target=run_client, args=(i, server, solo, deadline, stats, a.seed * 1000 + i))
                   for i in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - start
        stop.set()
        mon.join()
        rss.append((elapsed, server.rss_mb()))
        if server.proc.poll() is not None:
            stats.problem(f"the server exited ({server.proc.returncode})")
    finally:
        server.stop()

    answered = sum(len(v) for v in stats.latency.values())
    # Memory after warm-up: the growth over the last two thirds of the run.
    warm = [r for t, r in rss if t >= elapsed / 3]
    growth = (warm[-1] - warm[0]) / warm[0] * 100 if len(warm) >= 2 and warm[0] > 0 else float("nan")
    report = {
        "clients": a.clients,
        "seconds": round(elapsed, 1),
        "answers": answered,
        "answers_per_s": round(answered / elapsed, 2),
        "generated_tokens_per_s": round(stats.tokens / elapsed, 1),
        "latency_s": {k: {"n": len(v), "p50": round(percentile(v, 50), 3), "p99": round(percentile(v, 99), 3)}
                      for k, v in sorted(stats.latency.items())},
        "answers_by_cause": dict(sorted(stats.causes.items())),
        "worker_kills": len(kills),
        "rss_mb": [(round(t), round(r, 1)) for t, r in rss],
        "rss_growth_after_warmup_pct": round(growth, 1),
        "problems": stats.problems[:50],
        "problem_count": len(stats.problems),
    }
    print(json.dumps(report, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(1 if stats.problems else 0)


if __name__ == "__main__":
    main()

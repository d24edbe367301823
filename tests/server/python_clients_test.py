"""nnsight serve against clients no one here wrote: the official `openai`
package (completions, streamed chat), curl running the examples of
docs/server.md as written, and Python's `safetensors` reading trace saves,
which must equal what `nnsight trace` writes.

    python_clients_test.py NNSIGHT_CLI SOURCE_DIR WORK_DIR
Prints PASS/FAIL lines; exits non-zero on any failure."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import openai
from safetensors.numpy import load, load_file

cli, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
EIFFEL = "The Eiffel Tower is located in the city of"
KEY = "sk-test-" + os.urandom(12).hex()
failures = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)), flush=True)
    if not ok:
        failures.append(name)


keys = os.path.join(work, "keys.txt")
with open(keys, "w") as f:
    f.write("tester:%s\n" % KEY)
server = subprocess.Popen(
    [cli, "serve", "--model", "smollm2-135m", "--port", "0", "--api-keys", keys, "--no-progress"],
    stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
try:
    line = server.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        print("FAIL server did not start: %r" % line)
        sys.exit(1)
    url = m.group(1)

    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY)
    c = client.completions.create(model="smollm2-135m", prompt=EIFFEL, max_tokens=1, temperature=0)
    check("openai completions says ' Paris'", c.choices[0].text == " Paris", c)

    stream = client.chat.completions.create(
        model="smollm2-135m", temperature=0, max_tokens=24, stream=True,
        messages=[{"role": "user", "content": "What is the capital of France?"}])
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    check("openai streamed chat answers Paris", "Paris" in text, repr(text))

    models = client.models.list()
    check("openai models list", [m.id for m in models.data] == ["smollm2-135m"], models)
    try:
        openai.OpenAI(base_url=url + "/v1", api_key="sk-wrong-0123456789abcdef").models.list()
        check("a wrong key is refused", False, "no error")
    except openai.AuthenticationError:
        check("a wrong key is refused", True)

    # Every sh block of docs/server.md that talks to the server, run as written.
    doc = open(os.path.join(src, "docs/server.md")).read()
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", doc, re.S) if "NNSIGHT_URL" in b]
    env = dict(os.environ, NNSIGHT_URL=url, NNSIGHT_API_KEY=KEY,
               PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"])
    with tempfile.TemporaryDirectory() as d:
        for i, b in enumerate(blocks):
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", b], cwd=d, env=env, capture_output=True, text=True)
            check("docs/server.md curl block %d" % i, r.returncode == 0, r.stderr + r.stdout)
        check("the docs have curl examples", len(blocks) >= 3, len(blocks))

    # A JSON graph through POST /v1/traces?wait=1 equals `nnsight trace`'s file.
    graph_path = os.path.join(src, "tests/data/cli/ablate_mlp.json")
    graph_text = open(graph_path).read()
    body = json.dumps({"prompts": [EIFFEL], "graphs": [graph_text], "graph_names": ["ablate_mlp.json"]}).encode()
    req = urllib.request.Request(url + "/v1/traces?wait=1", data=body, method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    served = load(urllib.request.urlopen(req, timeout=300).read())
    local_file = os.path.join(work, "local.safetensors")
    subprocess.run([cli, "trace", "--model", "smollm2-135m", "--prompt", EIFFEL, "--graph", graph_path,
                    "--out", local_file, "--no-progress"], check=True, capture_output=True)
    local = load_file(local_file)
    check("served saves have nnsight trace's names", sorted(served) == sorted(local), (sorted(served), sorted(local)))
    check("served saves equal nnsight trace's", all(np.array_equal(served[k], local[k]) for k in local))
    remote_file = os.path.join(work, "remote.safetensors")
    r = subprocess.run([cli, "trace", "--remote", url, "--api-key", KEY, "--prompt", EIFFEL, "--graph", graph_path,
                        "--out", remote_file], capture_output=True, text=True)
    check("nnsight trace --remote", r.returncode == 0 and r.stdout.startswith(" Paris"), r.stderr + r.stdout)
    check("nnsight trace --remote writes the same file",
          open(remote_file, "rb").read() == open(local_file, "rb").read())
finally:
    server.terminate()
    try:
        code = server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "hung"
    check("the server stops on SIGTERM", code == 0, code)

sys.exit(1 if failures else 0)

"""Shared by the notebook tests: a kernelspec for the repository's kernel, and
a small client that runs cells in it and collects what the kernel sends.

The kernelspec `nnsight-cpp17` is written into WORK/jupyter and put first on
JUPYTER_PATH, so the tests run src/front/notebook/kernel/nnsight_kernel.py of
this checkout (PYTHONPATH, set by notebook_test.sh) against the library
installed at $NNSIGHT_PREFIX, whatever setup installed elsewhere."""
import json
import os
import sys
import time

KERNEL_NAME = "nnsight-cpp17"


def use_repository_kernel(work):
    import nnsight_kernel

    kdir = os.path.join(work, "jupyter", "kernels", KERNEL_NAME)
    os.makedirs(kdir, exist_ok=True)
    with open(os.path.join(kdir, "kernel.json"), "w") as f:
        json.dump(nnsight_kernel.kernel_json(sys.executable), f, indent=1)
    os.environ["JUPYTER_PATH"] = os.path.join(work, "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(work, "runtime")
    for var in ("NNSIGHT_PREFIX", "PYTHONPATH"):
        if not os.environ.get(var):
            raise SystemExit(f"FAIL: {var} is not set (run the test through notebook_test.sh)")
    if not os.path.dirname(nnsight_kernel.__file__).startswith(os.environ["PYTHONPATH"].split(":")[0]):
        raise SystemExit(f"FAIL: imported {nnsight_kernel.__file__}, not the checkout's kernel")


class Session:
    """One kernel; run() executes a cell and returns (reply content, outputs)."""

    def __init__(self, startup_timeout=120):
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=startup_timeout)

    def run(self, code, timeout=600, interrupt_after=None):
        msg_id = self.kc.execute(code)
        start = time.time()
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            self.km.interrupt_kernel()
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        outputs = []
        while True:
            m = self.kc.get_iopub_msg(timeout=30)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
            if m["msg_type"] in ("stream", "execute_result", "display_data", "error"):
                outputs.append((m["msg_type"], m["content"]))
        return reply["content"], outputs, time.time() - start

    def alive(self):
        return self.km.is_alive()

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def stream_text(outputs, name):
    return "".join(c["text"] for t, c in outputs if t == "stream" and c["name"] == name)


def result_data(outputs):
    for t, c in outputs:
        if t == "execute_result":
            return c["data"]
    return None


class Checks:
    def __init__(self):
        self.failures = 0
        self.passed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {what}", flush=True)
        else:
            self.failures += 1
            print(f"FAIL {what}" + (f"\n     {detail}" if detail else ""), flush=True)
        return ok

    def finish(self):
        print(f"{self.passed} passed, {self.failures} failed")
        return 1 if self.failures else 0

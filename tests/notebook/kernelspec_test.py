"""Notebook.KernelspecInstalled: what scripts/setup leaves for a user.
`jupyter kernelspec list` (the venv's Jupyter) shows nnsight-cpp17, its
kernel.json starts an existing Python with `-m nnsight_kernel` and signal
interrupts, and the module that Python imports is this checkout's kernel
(rerun scripts/setup after changing src/front/notebook/kernel/).

    kernelspec_test.py WORK SOURCE_DIR
"""
import filecmp
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks  # noqa: E402


def main():
    src = sys.argv[2]
    c = Checks()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JUPYTER_PATH")}
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    run = subprocess.run([jupyter, "kernelspec", "list", "--json"], capture_output=True, text=True, env=env)
    specs = json.loads(run.stdout).get("kernelspecs", {}) if run.returncode == 0 else {}
    spec = specs.get("nnsight-cpp17")
    if not c.check(spec is not None, "jupyter kernelspec list shows nnsight-cpp17", run.stdout + run.stderr):
        return c.finish()
    argv = spec["spec"]["argv"]
    c.check(os.path.exists(argv[0]) and argv[1:3] == ["-m", "nnsight_kernel"] and "{connection_file}" in argv,
            f"its argv starts the kernel module ({' '.join(argv)})")
    c.check(spec["spec"].get("interrupt_mode") == "signal", "interrupts are signals (SIGINT)")
    where = subprocess.run([argv[0], "-c", "import nnsight_kernel; print(nnsight_kernel.__file__)"],
                           capture_output=True, text=True, env=env)
    installed = where.stdout.strip()
    repo = os.path.join(src, "src", "front", "notebook", "kernel", "nnsight_kernel.py")
    c.check(where.returncode == 0 and filecmp.cmp(installed, repo, shallow=False),
            f"the installed kernel ({installed}) is this checkout's (else rerun scripts/setup)", where.stderr)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

"""RealModelNotebook.ExecuteExamples: every notebook under examples/notebooks/
executed by Jupyter's own client, as a reader would:

    jupyter nbconvert --to notebook --execute COPY.ipynb

into WORK/executed/ (the committed files are not touched). nbconvert fails on
any cell error. Then the outputs are checked: every code cell ran, none has an
error, and the tour shows what it promises (the logit-lens SVG, the attention
heatmap, the patching
table with the clean and patched answers, the steered text). The committed
notebooks must hold the same kinds of outputs (scripts/notebook stores them),
so what a reader sees on the repository is an executed notebook.

    execute_test.py WORK SOURCE_DIR
"""
import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks, use_repository_kernel  # noqa: E402

EXECUTE = ["jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
           "--ExecutePreprocessor.timeout=900", "--ExecutePreprocessor.record_timing=False"]


def outputs_of(cell, kind):
    """The values of MIME type `kind` (or stream text, for "stream") in the cell's outputs."""
    found = []
    for o in cell.get("outputs", []):
        if kind == "stream" and o["output_type"] == "stream":
            found.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif kind in o.get("data", {}):
            v = o["data"][kind]
            found.append("".join(v) if isinstance(v, list) else v)
    return found


def check_tour(c, nb, label):
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]

    def cell_starting(prefix):
        return next((cell for cell in code if "".join(cell["source"]).startswith(prefix)), None)

    c.check(all(cell.get("execution_count") for cell in code), f"{label}: every code cell has run")
    errors = [o for cell in code for o in cell.get("outputs", []) if o["output_type"] == "error"]
    c.check(not errors, f"{label}: no cell has an error output", errors[:1])
    lens = cell_starting("LogitLens lens")
    svg = outputs_of(lens, "image/svg+xml") if lens else []
    c.check(svg and svg[0].startswith("<svg") and "Paris" in svg[0], f"{label}: the logit-lens cell shows the SVG heatmap")
    heat = cell_starting("const std::string eiffel")
    svg = outputs_of(heat, "image/svg+xml") if heat else []
    ok = svg and svg[0].startswith("<svg") and svg[0].count('<rect class="cell"') == 10 * 10 and "self_attn.pattern" in svg[0]
    c.check(ok, f"{label}: the attention cell shows one head's pattern as a 10 x 10 SVG heatmap", svg[:1])
    patched = cell_starting("TraceResult patched")
    html = outputs_of(patched, "text/html") if patched else []
    ok = html and html[0].count("Colosseum") == 2 and html[0].count("<b> Paris</b>") == 2 and "<b> Rome</b>" in html[0]
    c.check(ok, f"{label}: the patching table shows patched (\" Paris\") and clean (\" Rome\") answers", html[:1])
    steer = cell_starting("const std::string prompt")
    text = outputs_of(steer, "text/plain") if steer else []
    c.check(text and "-- steered --" in text[0], f"{label}: the steering cell shows baseline and steered text", text)
    first = cell_starting("Saved logits")
    c.check(first and any("<table" in h for h in outputs_of(first, "text/html")), f"{label}: the first trace shows its table")


def main():
    work, src = sys.argv[1], sys.argv[2]
    use_repository_kernel(work)
    import nbformat

    c = Checks()
    notebooks = sorted(glob.glob(os.path.join(src, "examples", "notebooks", "*.ipynb")))
    c.check(notebooks, "there are notebooks under examples/notebooks")
    out_dir = os.path.join(work, "executed")
    os.makedirs(out_dir, exist_ok=True)
    for path in notebooks:
        name = os.path.basename(path)
        copy = os.path.join(out_dir, name)
        shutil.copyfile(path, copy)
        run = subprocess.run(EXECUTE + [copy], capture_output=True, text=True)
        if not c.check(run.returncode == 0, f"{name}: jupyter nbconvert --execute succeeds", run.stderr[-4000:]):
            continue
        executed = nbformat.read(copy, as_version=4)
        committed = nbformat.read(path, as_version=4)
        c.check(executed.metadata.kernelspec.name == "nnsight-cpp17", f"{name}: names the nnsight-cpp17 kernel")
        if name == "nnsight_tour.ipynb":
            check_tour(c, executed, f"{name} (executed now)")
            check_tour(c, committed, f"{name} (committed)")
        else:
            check_generic = all(cell.get("execution_count") for cell in committed.cells if cell.cell_type == "code")
            c.check(check_generic, f"{name} (committed): every code cell has run (scripts/notebook)")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

"""Drives cling (the interpreter inside cppyy-cling, the one xeus-cling wraps)
with the cells a notebook user types, one cell per parse unit, and checks
what they compute.

    run_cells.py --prefix PREFIX SOURCE [SOURCE ...]

SOURCE is a Markdown file (its ```cpp cling blocks are the cells, in order)
or a Jupyter notebook (its code cells). The cells are run exactly as written,
except that the install prefix "/usr/local" they name is replaced by PREFIX
(where the test installed the library). Each SOURCE runs in a fresh
interpreter (a child process).

A cell whose last line is an expression without a semicolon is displayed the
way xeus-cling displays it: mime_bundle_repr(value), found by argument-
dependent lookup, with a generic fallback. The bundle must be a JSON object;
bundles of the library's types are checked for their MIME types.

After the cells, the checks listed below for that SOURCE (C++ expressions)
must all be true. Exit status 0 when every cell ran and every check held.
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import time

# Checks per source file name: C++ boolean expressions over the globals the
# cells defined. They are the test's, not the reader's.
CHECKS = {
    "notebooks.md": [
        'out.text() == " Paris"',
        'out[logits].size(0) == 1 && out[logits].size(1) == 49152',
        'lm.decode({static_cast<int32_t>(out[logits].argmax().item<int64_t>())}) == " Paris"',
    ],
    "remote_notebook.md": [
        'out.text() == " Paris"',
        'out[logits].size(1) == 49152',
        'lm.decode({static_cast<int32_t>(out[logits].argmax().item<int64_t>())}) == " Paris"',
        'out[h].size(1) == 576',
    ],
    "nnsight_tour.ipynb": [
        'out.text() == " Paris"',
        'lens.num_layers() == 30',
        'lens.token(lens.num_layers() - 1, -1) == " Paris"',
        'lens.prob(lens.num_layers() - 1, -1) > 0.1',
        'attn[pattern].dim() == 3 && attn[pattern].size(0) == 9 && attn[pattern].size(1) == 10',
        'attn[pattern].sum(-1).sub(1).abs().max().item<double>() < 1e-5',
        'attn[pattern][2].diagonal(-1).mean().item<double>() > 0.6',
        'clean.text() == " Rome"',
        'patched.text(1) == " Paris"',
        'patched.text(2) == " Rome"',
        'steered.text() != baseline.text()',
        'baseline.text().size() > 0 && steered.text().size() > 0',
    ],
}

# What a display of each library type must hold.
EXPECTED_MIME = {
    "nnsight::TraceResult": ["text/plain", "text/html"],
    "nnsight::SavedTensor": ["text/plain", "text/html"],
    "nnsight::LogitLens": ["text/plain", "image/svg+xml"],
    "nnsight::AttentionHeatmap": ["text/plain", "image/svg+xml"],
}

# xeus-cling's display path, reduced: an unqualified mime_bundle_repr call
# that prefers the overload ADL finds, else a generic text/plain fallback.
DISPLAY_SUPPORT = r'''
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
namespace xcpp_emulation {
template <class T, class = void> struct streamable : std::false_type {};
template <class T>
struct streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};
template <class T>
nlohmann::json mime_bundle_repr(const T& value) {
  std::ostringstream s;
  if constexpr (streamable<T>::value) s << value; else s << "<" << typeid(T).name() << ">";
  return {{"text/plain", s.str()}};
}
template <class T>
std::string display(const T& value) {
  using xcpp_emulation::mime_bundle_repr;
  nlohmann::json bundle = mime_bundle_repr(value);
  nlohmann::json out = {{"type", typeid(T).name()}, {"bundle", bundle}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace xcpp_emulation
'''


def cells_of(path):
    if path.endswith(".ipynb"):
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
        if kernel not in ("nnsight-cpp17", "xcpp17"):
            raise SystemExit(f"{path}: the notebook's kernel is {kernel!r}, not 'nnsight-cpp17' or 'xcpp17'")
        return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [m.group(1) for m in re.finditer(r"^```cpp cling[ \t]*\n(.*?)^```[ \t]*$", text, re.S | re.M)]


def display_expression(cell):
    """(body, expr) when the cell ends with an expression to display, else (cell, None)."""
    lines = cell.rstrip().split("\n")
    last = lines[-1].strip()
    if not last or last.startswith(("#", "//")) or last.endswith((";", "}", "{")):
        return cell, None
    return "\n".join(lines[:-1]), last


def demangle_kind(bundle_type):
    for name in EXPECTED_MIME:
        parts = name.split("::")
        mangled = "N" + "".join(f"{len(p)}{p}" for p in parts) + "E"
        if bundle_type in (mangled, name):
            return name
    return None


def run_source(path, prefix):
    import cppyy  # noqa: F401  (a missing cppyy is a failure, reported by the caller)

    interp = cppyy.gbl.gInterpreter
    cells = cells_of(path)
    if not cells:
        print(f"FAIL {path}: no cells found")
        return 1
    if not interp.Declare(DISPLAY_SUPPORT):
        print(f"FAIL {path}: cannot declare the display support (is nlohmann/json.hpp installed?)")
        return 1
    failures = 0
    start = time.time()
    for i, cell in enumerate(cells):
        code = cell.replace("/usr/local", prefix)
        body, expr = display_expression(code)
        if expr is not None:
            body += f"\nstd::string __nnsight_display_{i} = xcpp_emulation::display({expr});"
        err = ctypes.c_int(0)
        t = time.time()
        interp.ProcessLine(body, err)
        took = time.time() - t
        if err.value != 0:
            print(f"FAIL {path} cell {i + 1}: the interpreter reported an error (code {err.value}):\n{cell}")
            return 1
        print(f"ok   {path} cell {i + 1} ({took:.1f} s)", flush=True)
        if expr is not None:
            raw = getattr(cppyy.gbl, f"__nnsight_display_{i}")
            shown = json.loads(bytes(raw).decode("utf-8") if not isinstance(raw, str) else raw)
            bundle = shown["bundle"]
            kind = demangle_kind(shown["type"])
            if not isinstance(bundle, dict) or not bundle:
                print(f"FAIL {path} cell {i + 1}: display of {expr} is not a MIME bundle: {bundle!r}")
                failures += 1
            elif kind:
                missing = [m for m in EXPECTED_MIME[kind] if not isinstance(bundle.get(m), str) or not bundle[m]]
                svg = bundle.get("image/svg+xml")
                if missing:
                    print(f"FAIL {path} cell {i + 1}: display of {kind} lacks {missing}")
                    failures += 1
                elif svg is not None and not (svg.startswith("<svg") and svg.rstrip().endswith("</svg>")):
                    print(f"FAIL {path} cell {i + 1}: image/svg+xml is not an SVG document")
                    failures += 1
                else:
                    print(f"     displayed {kind}: {sorted(bundle)}")
            else:
                print(f"     displayed: {bundle.get('text/plain', '')[:80]!r}")
    for k, check in enumerate(CHECKS.get(os.path.basename(path), [])):
        err = ctypes.c_int(0)
        interp.ProcessLine(f"int __nnsight_check_{k} = ({check}) ? 1 : 0;", err)
        value = getattr(cppyy.gbl, f"__nnsight_check_{k}", None) if err.value == 0 else None
        if value != 1:
            print(f"FAIL {path}: check {check} does not hold")
            failures += 1
        else:
            print(f"ok   {path}: {check}")
    print(f"{path}: {len(cells)} cells, {time.time() - start:.1f} s, {failures} failures")
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--prefix":
        print(__doc__)
        return 2
    prefix, sources = args[1], args[2:]
    if len(sources) > 1:  # one interpreter per source
        status = 0
        for s in sources:
            status |= subprocess.call([sys.executable, __file__, "--prefix", prefix, s])
        return status
    try:
        import cppyy  # noqa: F401
    except ImportError as e:
        print(f"FAIL: cling is not available (import cppyy: {e}); scripts/setup installs it")
        return 1
    return run_source(sources[0], prefix)


if __name__ == "__main__":
    sys.exit(main())

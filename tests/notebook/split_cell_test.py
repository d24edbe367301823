"""Notebook.SplitCell: how the kernel splits a cell into the code cling runs
and the trailing expression it displays (nnsight_kernel.split_cell), with no
interpreter involved.

    split_cell_test.py WORK
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks  # noqa: E402
from nnsight_kernel import split_cell  # noqa: E402

CASES = [
    ("int x = 3;\nx", ("int x = 3;", "x")),
    ("x;", ("x;", None)),
    ("x", ("", "x")),
    ("#include <vector>\nstd::vector<int> v{1, 2}; // c\nv // show v", ("#include <vector>\nstd::vector<int> v{1, 2};", "v")),
    ('#pragma cling load("libnnsight")', ('#pragma cling load("libnnsight")', None)),
    ("std::vector<int>{1, 2, 3}", ("", "std::vector<int>{1, 2, 3}")),
    ("struct S { int a; };\nS{1}.a", ("struct S { int a; };", "S{1}.a")),
    ("int f() { return 1; }\nf()", ("int f() { return 1; }", "f()")),
    ("for (int i = 0; i < 3; ++i) { g(i); }", ("for (int i = 0; i < 3; ++i) { g(i); }", None)),
    ('std::string s = "};"; s', ('std::string s = "};";', "s")),
    ("char c = ';'; c", ("char c = ';';", "c")),
    ('auto r = R"(a; b})"; r', ('auto r = R"(a; b})";', "r")),
    ("/* ; */ int y = 1'000;\ny /* ; */", ("/* ; */ int y = 1'000;", "y")),
    ("lm.trace(p, sp, [&](Tracer&) {\n  x = 1;\n})", ("", "lm.trace(p, sp, [&](Tracer&) {\n  x = 1;\n})")),
    ("out\n", ("", "out")),
    ("// only a comment", ("// only a comment", None)),
    ("namespace n { int z; }\nn::z", ("namespace n { int z; }", "n::z")),
]


def main():
    c = Checks()
    for cell, want in CASES:
        got = split_cell(cell)
        c.check(got == want, f"split_cell({cell!r})", f"got {got!r}, want {want!r}")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

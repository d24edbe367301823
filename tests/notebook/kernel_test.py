"""RealModelNotebook.Kernel: the nnsight-cpp17 kernel driven by jupyter_client,
as a notebook front end drives it.

    kernel_test.py WORK

Checks: a trailing expression is displayed and a `;` hides it; declarations
persist across cells; `#pragma cling` loads the installed library; C-level
output on fd 1 and 2 reaches the notebook as stdout/stderr streams; nnsight's
types display as HTML / SVG bundles; a cell that does not compile, and one
that throws, report an error and the next cell runs; an interrupt stops a long
trace on the default model within seconds, and the kernel and the model keep
working."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks, Session, result_data, stream_text, use_repository_kernel  # noqa: E402

LOAD = '''#pragma cling add_include_path("/usr/local/include")
#pragma cling add_library_path("/usr/local/lib")
#pragma cling load("libnnsight")'''

PROMPT = "The Eiffel Tower is located in the city of"


def main():
    work = sys.argv[1]
    use_repository_kernel(work)
    c = Checks()
    s = Session()
    try:
        # -- plain C++ --
        r, out, _ = s.run("int x = 20;\nx + 1")
        c.check(r["status"] == "ok" and (result_data(out) or {}).get("text/plain") == "21",
                "a trailing expression is displayed", out)
        r, out, _ = s.run("x * 2;")
        c.check(r["status"] == "ok" and result_data(out) is None, "a trailing ';' displays nothing", out)
        r, out, _ = s.run('#include <string>\nstd::string("a b")')
        c.check((result_data(out) or {}).get("text/plain") == '"a b"', "a std::string shows as cling prints it", out)
        r, out, _ = s.run('#include <cstdio>\n#include <iostream>\n'
                          'printf("from printf\\n"); fprintf(stderr, "from fd 2\\n");\n'
                          'std::cout << "from cout" << std::endl; std::cerr << "from cerr\\n";')
        so, se = stream_text(out, "stdout"), stream_text(out, "stderr")
        c.check("from printf" in so and "from cout" in so, "C output on fd 1 arrives as stdout", repr(so))
        c.check("from fd 2" in se and "from cerr" in se, "C output on fd 2 arrives as stderr", repr(se))

        # -- errors keep the kernel --
        r, out, _ = s.run("int broken = no_such_name + 1;")
        errs = [o for t, o in out if t == "error"]
        c.check(r["status"] == "error" and r.get("ename") == "CompileError",
                "a compile error is an error reply (CompileError)", r)
        c.check(errs and any("no_such_name" in line for line in errs[0]["traceback"]),
                "the error output names the undeclared identifier", errs)
        c.check("undeclared identifier" in stream_text(out, "stderr"), "cling's diagnostic is on stderr", out)
        r, out, _ = s.run("x + 2")
        c.check(r["status"] == "ok" and (result_data(out) or {}).get("text/plain") == "22",
                "the cell after a compile error runs, with earlier declarations", out)
        r, out, _ = s.run('#include <stdexcept>\nthrow std::runtime_error("boom in a cell");')
        c.check(r["status"] == "error" and r.get("ename") == "CppException" and r.get("evalue") == "boom in a cell",
                "an exception escaping a cell is an error reply with its what()", r)
        r, out, _ = s.run("x + 3")
        c.check(r["status"] == "ok" and (result_data(out) or {}).get("text/plain") == "23",
                "the cell after an exception runs", out)

        # -- the library --
        r, out, took = s.run(LOAD)
        c.check(r["status"] == "ok", f"#pragma cling load(\"libnnsight\") ({took:.1f} s)", out)
        r, out, took = s.run("#include <nnsight/nnsight.hpp>\n#include <nnsight/display.hpp>\nusing namespace nnsight;")
        c.check(r["status"] == "ok", f"the public headers parse ({took:.1f} s)", out)
        r, out, took = s.run('LanguageModel lm(EngineArgs().model("smollm2-135m"));')
        c.check(r["status"] == "ok", f"the default model loads ({took:.1f} s)", out)
        r, out, _ = s.run(f'Saved logits;\nTraceResult out = lm.trace("{PROMPT}", SamplingParams().temperature(0)'
                          '.max_tokens(1),\n  [&](Tracer&) { logits = lm.logits().save(); });\nout')
        data = result_data(out) or {}
        c.check("<table" in data.get("text/html", "") and " Paris" in data.get("text/html", ""),
                "a TraceResult displays as an HTML table with the generated text", data)
        r, out, _ = s.run(f'LogitLens lens = logit_lens(lm, "{PROMPT}", LogitLensOptions().layers({{27, 29}}));\nlens')
        svg = (result_data(out) or {}).get("image/svg+xml", "")
        c.check(svg.startswith("<svg") and "Paris" in svg, "a LogitLens displays as an SVG heatmap", out)

        # -- interrupt --
        long_trace = ('TraceResult endless = lm.trace("Once upon a time", SamplingParams().temperature(0)'
                      '.max_tokens(1900).ignore_eos(true), [&](Tracer& t) {\n'
                      '  t.all([&](const Step&) { auto l = lm.envoy("model.layers.5"); l.output() = l.output() * 1.0; });\n'
                      '});')
        r, out, took = s.run(long_trace, interrupt_after=4, timeout=120)
        c.check(r["status"] == "error" and r.get("ename") == "KeyboardInterrupt",
                f"an interrupt stops a 1900-token trace (reply after {took:.1f} s)", r)
        c.check(took < 30, "the interrupted cell ends within seconds of the interrupt", f"{took:.1f} s")
        c.check("interrupted" in stream_text(out, "stderr"), "the trace's Interrupted message is on stderr", out)
        c.check(s.alive(), "the kernel survives the interrupt")
        r, out, _ = s.run(f'lm.trace("{PROMPT}", SamplingParams().temperature(0).max_tokens(1), [&](Tracer&) {{}}).text()')
        c.check(r["status"] == "ok" and (result_data(out) or {}).get("text/plain") == '" Paris"',
                "after the interrupt the model still answers \" Paris\"", out)
        r, out, _ = s.run("x + 4")
        c.check((result_data(out) or {}).get("text/plain") == "24", "and earlier declarations are still there", out)
    finally:
        s.close()
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

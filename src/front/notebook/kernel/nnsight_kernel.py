"""nnsight-cpp17: a Jupyter kernel for C++17 with nnsight.

The interpreter is cling, from the PyPI package cppyy-cling (the interpreter
xeus-cling wraps); the Jupyter protocol is Python's ipykernel. Cells behave as
in xeus-cling's xcpp17 kernel:

- a cell is C++ given to cling incrementally: declarations, statements,
  `#include`, `#pragma cling add_include_path/add_library_path/load(...)`;
- when the cell ends with an expression (no `;`), its value is displayed:
  `mime_bundle_repr(value)`, found by argument-dependent lookup, gives rich
  output (nnsight's traces, tensors and logit lenses as HTML tables and SVG);
  other values are shown as cling prints them;
- output to file descriptors 1 and 2 (printf, std::cout, the library's
  logs) is captured while the cell runs and sent to the notebook as it comes;
- a cell that does not compile, or throws, reports the error; the kernel and
  everything earlier cells defined stay;
- an interrupt (SIGINT from Jupyter) stops a running nnsight trace at its next
  wait: the kernel calls nnsight_request_interrupt() from a watcher thread,
  the trace aborts its requests and throws nnsight::Interrupted. C++ code that
  never waits on a trace cannot be stopped (cling has no safe points).

Where the library is: if $NNSIGHT_PREFIX is set (else if $NNSIGHT_HOME/prefix
holds lib/libnnsight.so), its include/ and lib/ are added to cling's search
paths before the first cell, ahead of the paths the cells add themselves.

With NNSIGHT_KERNEL_DEBUG=1 the kernel also shows the diagnostics of a
display wrapper that did not compile (before it hands the expression to cling
unchanged).

    python nnsight_kernel.py -f CONNECTION_FILE      run (as Jupyter does)
    python nnsight_kernel.py install [--prefix P | --user | --sys-prefix]
                                                     write the kernelspec
"""
import codecs
import ctypes
import json
import os
import re
import select
import signal
import sys
import threading

KERNEL_NAME = "nnsight-cpp17"
__version__ = "0.1.0"


# ---- cling's flags, before cppyy is imported ----------------------------------

def _cling_environment():
    """C++17 with the precompiled standard headers scripts/setup-cling builds
    (cppyy's bundled ones are C++20). The same values as scripts/cling_env.sh."""
    os.environ.setdefault("EXTRA_CLING_ARGS", "-std=c++17 -O2")
    os.environ.setdefault("CLING_STANDARD_PCH",
                          os.path.join(sys.prefix, "cling-pch", "allDict.cxx.pch.cxx17"))


def library_prefix():
    """The install prefix of libnnsight the kernel adds to cling's paths, or None."""
    prefix = os.environ.get("NNSIGHT_PREFIX")
    if prefix:
        return prefix
    home = os.environ.get("NNSIGHT_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nnsight")
    candidate = os.path.join(home, "prefix")
    return candidate if os.path.exists(os.path.join(candidate, "lib", "libnnsight.so")) else None


# ---- splitting a cell: the statements, and a trailing expression --------------

_BLOCK_WORDS = {"else", "do", "try", "const", "noexcept", "override", "final", "mutable"}
_BLOCK_STATEMENT = re.compile(r"\b(struct|class|union|enum|namespace|extern)\b")


def _opens_block(statement):
    """Whether a `{` after `statement` (the text since the last top-level
    terminator) opens a block (a body, a class, a compound statement) rather
    than a braced initializer."""
    text = statement.rstrip()
    if not text or text[-1] in ";{})":
        return True
    word = re.search(r"(\w+)$", text)
    if word and word.group(1) in _BLOCK_WORDS:
        return True
    if text[-1] in "=,([" or (word and word.group(1) == "return"):
        return False
    return bool(_BLOCK_STATEMENT.search(text))


def split_cell(code):
    """(body, expression): `expression` is the text after the last top-level
    `;` or `}` (and after preprocessor and cling `.` command lines), without
    comments, when that text is not blank; else None and `body` is the cell.

    A small C++ scanner: string, character and raw string literals and
    comments are skipped; brackets are counted, so a lambda's `}` or `;`
    inside an expression does not end it, and a `}` ends a statement only
    when its `{` opened a block, not a braced initializer (`std::vector<int>{1, 2}`).
    Where the guess is wrong the kernel falls back to cling's own handling."""
    n = len(code)
    i = 0
    depth = 0
    end = 0                  # just past the last top-level terminator
    comments = []            # (start, stop) spans, removed from the expression
    top_brace_is_block = True
    at_line_start = True
    while i < n:
        c = code[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and depth == 0 and (c == "#" or (c == "." and i + 1 < n and code[i + 1].isalpha())):
            # A preprocessor or cling command line, with backslash continuations.
            while i < n and code[i] != "\n":
                if code[i] == "\\" and i + 1 < n and code[i + 1] == "\n":
                    i += 1
                i += 1
            end = i
            continue
        at_line_start = False
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            comments.append((i, j))
            i = j
            continue
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            comments.append((i, j))
            i = j
            continue
        m = re.compile(r'(?:u8|u|U|L)?R"([^()\\ \t\n]{0,16})\(').match(code, i)
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            j = code.find(")" + m.group(1) + '"', m.end())
            i = n if j < 0 else j + len(m.group(1)) + 2
            continue
        if c in "\"'":
            # A ' between digits is a digit separator (1'000), not a literal.
            if c == "'" and i > 0 and code[i - 1].isalnum() and i + 1 < n and code[i + 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            if c == "{" and depth == 0:
                top_brace_is_block = _opens_block(code[end:i])
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
            if c == "}" and depth == 0 and top_brace_is_block:
                end = i + 1
        elif c == ";" and depth == 0:
            end = i + 1
        i += 1
    tail = code[end:]
    for start, stop in reversed(comments):
        if start >= end:
            tail = tail[:start - end] + " " + tail[stop - end:]
    if not tail.strip():
        return code, None
    return code[:end], tail.strip()


# ---- C support code for display ------------------------------------------------

DISPLAY_SUPPORT = r'''
#include <cling/Interpreter/RuntimePrintValue.h>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
namespace nnsight_kernel {
// The last displayed value, as a JSON MIME bundle; and whether the display
// wrapper started to run (false after a wrapper that did not compile).
std::string bundle;
bool started = false;
template <class T, class = void> struct streamable : std::false_type {};
template <class T>
struct streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};
// The fallback, as in xeus-cling: how cling prints the value; a type cling
// only prints as an address, but that has operator<<, is streamed.
template <class T>
nlohmann::json mime_bundle_repr(const T& value) {
  std::string text = cling::printValue(&value);
  if constexpr (streamable<T>::value) {
    if (text.rfind("@0x", 0) == 0) {
      std::ostringstream s;
      s << value;
      text = s.str();
    }
  }
  return {{"text/plain", text}};
}
template <class T>
void display(const T& value) {
  using nnsight_kernel::mime_bundle_repr;  // the overloads ADL finds win over this template
  nlohmann::json b = mime_bundle_repr(value);
  bundle = b.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
// `sink(), (expr)`: a non-void expr takes this operator and is displayed; a
// void one takes the built-in comma and shows nothing.
struct Sink {};
inline Sink& sink() { static Sink s; return s; }
template <class T>
Sink& operator,(Sink& s, const T& value) { display(value); return s; }
}  // namespace nnsight_kernel
'''


# ---- file descriptor capture ------------------------------------------------------

_libc = ctypes.CDLL(None)


def _flush_c_streams():
    _libc.fflush(None)


_CLING_EXCEPTION = re.compile(r"^compilation failed(: | with unknown error)", re.M)


def _rename_exception(m):
    return "C++ exception: " if m.group(1) == ": " else "C++ exception of a type not derived from std::exception"


class _FdPump:
    """Points fd 1 or 2 at a pipe while a cell runs; a thread sends what
    arrives to the notebook (or keeps it, when `hold` is set)."""

    def __init__(self, fd, name, send):
        self.fd, self.name, self.send = fd, name, send
        self.hold = False
        self.held = []
        self.seen = []  # everything, for the error message
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._saved = os.dup(fd)
        self._r, w = os.pipe()
        self._stop_r, self._stop_w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self._thread = threading.Thread(target=self._run, name=f"nnsight-{name}", daemon=True)
        self._thread.start()

    def _emit(self, data, final=False):
        text = self._decoder.decode(data, final)
        if not text:
            return
        if self.fd == 2:
            # cling reports an exception that escaped the cell as "compilation
            # failed: <what()>"; say what happened.
            text = _CLING_EXCEPTION.sub(_rename_exception, text)
        self.seen.append(text)
        if len(self.seen) > 256:  # the error message needs the last lines only
            self.seen = ["".join(self.seen)[-65536:]]
        if self.hold:
            self.held.append(text)
        else:
            self.send(self.name, text)

    def _run(self):
        while True:
            ready, _, _ = select.select([self._r, self._stop_r], [], [])
            if self._r in ready:
                data = os.read(self._r, 65536)
                if not data:
                    break
                # Gather what follows within 20 ms into one message (the
                # notebook would otherwise hold many small stream outputs).
                while len(data) < 65536 and select.select([self._r], [], [], 0.02)[0]:
                    more = os.read(self._r, 65536)
                    if not more:
                        break
                    data += more
                self._emit(data)
                continue
            # Stopping: take what is there without waiting for writers that
            # outlive the cell (a child process that inherited the fd).
            os.set_blocking(self._r, False)
            try:
                while True:
                    data = os.read(self._r, 65536)
                    if not data:
                        break
                    self._emit(data)
            except BlockingIOError:
                pass
            break
        self._emit(b"", final=True)

    def release_held(self):
        """Sends what was held and stops holding."""
        self.hold = False
        held, self.held = "".join(self.held), []
        if held:
            self.send(self.name, held)

    def drop_held(self):
        self.hold = False
        dropped, self.held = "".join(self.held), []
        seen = "".join(self.seen)
        self.seen = [seen[:len(seen) - len(dropped)]] if dropped and seen.endswith(dropped) else [seen]
        return dropped

    def close(self):
        _flush_c_streams()
        os.dup2(self._saved, self.fd)
        os.close(self._saved)
        os.write(self._stop_w, b"x")
        self._thread.join()
        for f in (self._r, self._stop_r, self._stop_w):
            os.close(f)


# ---- interrupt -------------------------------------------------------------------

def _interrupt_function():
    """nnsight_request_interrupt() of the loaded libnnsight, or None."""
    try:
        return ctypes.CDLL(None).nnsight_request_interrupt
    except AttributeError:
        pass
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libnnsight.so"):
                    return ctypes.CDLL(path).nnsight_request_interrupt
    except (OSError, AttributeError):
        pass
    return None


class _CellWatch:
    """While a cell runs: SIGINT only sets a flag (no KeyboardInterrupt at a
    random point of the kernel), and a thread woken by the signal (through
    Python's wakeup fd: written by the C-level handler even while the main
    thread is inside C++) calls nnsight_request_interrupt() every 100 ms until
    the cell ends, so the trace waiting now, and any the cell starts later,
    stop. The same thread flushes C stdio so partial output is not held back."""

    def __init__(self):
        self.interrupted = False
        self.interrupt_reached_library = False
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._stop_r, self._stop_w = os.pipe()
        self._old_handler = signal.signal(signal.SIGINT, self._on_sigint)
        self._old_wakeup = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._run, name="nnsight-interrupt", daemon=True)
        self._thread.start()

    def _on_sigint(self, signum, frame):
        self.interrupted = True

    def _run(self):
        while True:
            timeout = 0.1 if self.interrupted else 0.5
            ready, _, _ = select.select([self._r, self._stop_r], [], [], timeout)
            if self._stop_r in ready:
                return
            if self._r in ready:
                data = os.read(self._r, 64)
                if signal.SIGINT in data:
                    self.interrupted = True
            if self.interrupted:
                fn = _interrupt_function()
                if fn is not None:
                    fn()
                    self.interrupt_reached_library = True
            _flush_c_streams()

    def close(self):
        os.write(self._stop_w, b"x")
        self._thread.join()
        signal.set_wakeup_fd(self._old_wakeup)
        signal.signal(signal.SIGINT, self._old_handler)
        for f in (self._r, self._w, self._stop_r, self._stop_w):
            os.close(f)


# ---- the kernel ------------------------------------------------------------------

def _kernel_class():
    from ipykernel.kernelbase import Kernel

    class NnsightCppKernel(Kernel):
        implementation = KERNEL_NAME
        implementation_version = __version__
        # As xeus-cling's xcpp17, so notebooks move between the two kernels.
        language_info = {
            "name": "c++",
            "version": "17",
            "mimetype": "text/x-c++src",
            "file_extension": ".cpp",
            "codemirror_mode": "text/x-c++src",
        }
        banner = ("nnsight-cpp17: C++17 through cling (cppyy-cling) for nnsight. "
                  "A cell's last expression without ';' is displayed.")

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            _cling_environment()
            import cppyy  # noqa: F401  (starts cling)
            self._cppyy = cppyy
            self._interp = cppyy.gbl.gInterpreter
            # Other kernel threads (output, heartbeat, control) run while C++ does.
            self._interp.ProcessLine.__release_gil__ = True
            self._display_ready = False
            self._prefix = library_prefix()
            # Line-buffered C stdout, as on a terminal: lines reach the notebook as printed.
            try:
                stdout_file = ctypes.c_void_p.in_dll(_libc, "stdout")
                _libc.setvbuf(stdout_file, None, 1, 0)  # _IOLBF
            except (ValueError, AttributeError):
                pass
            if self._prefix:
                self._process(f'#pragma cling add_include_path("{self._prefix}/include")')
                self._process(f'#pragma cling add_library_path("{self._prefix}/lib")')

        # -- helpers --
        def _process(self, code):
            err = ctypes.c_int(0)
            self._interp.ProcessLine(code, err)
            return err.value

        def _send_stream(self, parent):
            def send(name, text):
                self.session.send(self.iopub_socket, "stream", {"name": name, "text": text},
                                  parent=parent, ident=self._topic("stream"))
            return send

        def _error(self, parent, ename, evalue, details=()):
            content = {"ename": ename, "evalue": evalue,
                       "traceback": [f"{ename}: {evalue}", *details]}
            self.session.send(self.iopub_socket, "error", content, parent=parent, ident=self._topic("error"))
            return {"status": "error", "execution_count": self.execution_count, **content}

        def _prepare_display(self):
            if not self._display_ready:
                if not self._interp.Declare(DISPLAY_SUPPORT):
                    raise RuntimeError("the display support does not compile (is nlohmann/json.hpp installed?)")
                self._display_ready = True

        # -- Jupyter's requests --
        def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False):
            parent = self.get_parent("shell")
            body, expr = split_cell(code)
            send = self._send_stream(parent)
            bundle = None
            failed = None  # the stderr text of a failed step
            watch = _CellWatch()
            out = _FdPump(1, "stdout", send)
            err = _FdPump(2, "stderr", send)
            try:
                if expr is not None:
                    self._prepare_display()
                if body.strip() and self._process(body) != 0:
                    failed = "body"
                if failed is None and expr is not None:
                    # The display wrapper's diagnostics are held back: when it
                    # does not compile (a declaration without ';', say), the
                    # expression runs as cling runs it, and only those count.
                    gbl = self._cppyy.gbl
                    gbl.nnsight_kernel.started = False
                    gbl.nnsight_kernel.bundle = ""
                    err.hold = True
                    status = self._process("{ nnsight_kernel::started = true;\n"
                                           f"nnsight_kernel::sink(), ({expr}\n);\n}}")
                    if status == 0:
                        err.release_held()
                        raw = bytes(gbl.nnsight_kernel.bundle).decode("utf-8", "replace")
                        bundle = json.loads(raw) if raw else None
                    elif bool(gbl.nnsight_kernel.started):
                        err.release_held()
                        failed = "expression"
                    else:
                        dropped = err.drop_held()
                        if os.environ.get("NNSIGHT_KERNEL_DEBUG"):
                            send("stderr", "[display wrapper did not compile]\n" + dropped)
                        if self._process(expr) != 0:
                            failed = "expression"
            except Exception as e:  # the kernel's own failure: report it, keep serving
                failed = f"kernel: {type(e).__name__}: {e}"
            finally:
                out.close()
                err.close()
                watch.close()
            if failed is not None:
                return self._report_failure(parent, watch, failed, "".join(err.seen))
            if bundle and not silent:
                self.session.send(self.iopub_socket, "execute_result",
                                  {"execution_count": self.execution_count, "data": bundle, "metadata": {}},
                                  parent=parent, ident=self._topic("execute_result"))
            return {"status": "ok", "execution_count": self.execution_count,
                    "payload": [], "user_expressions": {}}

        def _report_failure(self, parent, watch, failed, stderr_text):
            """The error of a failed cell. cling printed its diagnostics (a
            compile error) or "C++ exception: <what()>" (an exception escaped
            the cell; cling's words are replaced on the way) to the cell's
            stderr, which the notebook already shows; the error repeats the
            lines that say what went wrong."""
            lines = stderr_text.splitlines()
            diagnostics = [l for l in lines if re.search(r"\b(fatal )?error: ", l)]
            thrown = [l[len("C++ exception"):].lstrip(": ") for l in lines if l.startswith("C++ exception")]
            if failed.startswith("kernel: "):
                return self._error(parent, "KernelError", failed[len("kernel: "):])
            if watch.interrupted:
                how = ("the running trace was stopped" if watch.interrupt_reached_library
                       else "libnnsight is not loaded, so nothing could stop the cell")
                return self._error(parent, "KeyboardInterrupt", f"interrupted: {how}", thrown)
            if diagnostics:
                return self._error(parent, "CompileError", "the cell does not compile", diagnostics)
            if thrown:
                return self._error(parent, "CppException", thrown[-1])
            return self._error(parent, "CppError", "cling reported an error", lines[-10:])

        def do_complete(self, code, cursor_pos):
            # Identifiers seen in the code so far that start like the word at the cursor.
            start = cursor_pos
            while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
                start -= 1
            word = code[start:cursor_pos]
            seen = sorted({w for w in re.findall(r"[A-Za-z_]\w*", code) if w.startswith(word) and w != word})
            return {"status": "ok", "matches": seen, "cursor_start": start, "cursor_end": cursor_pos,
                    "metadata": {}}

        def do_shutdown(self, restart):
            return {"status": "ok", "restart": restart}

    return NnsightCppKernel


# ---- the kernelspec ----------------------------------------------------------------

def kernel_json(python=None):
    return {
        "argv": [python or sys.executable, "-m", "nnsight_kernel", "-f", "{connection_file}"],
        "display_name": "C++17 (nnsight)",
        "language": "C++17",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }


def install(argv):
    """install [--prefix P | --user | --sys-prefix] [--python PY] [--name NAME]"""
    import argparse
    import tempfile

    from jupyter_client.kernelspec import KernelSpecManager

    p = argparse.ArgumentParser(prog="nnsight_kernel.py install")
    p.add_argument("--prefix")
    p.add_argument("--user", action="store_true")
    p.add_argument("--sys-prefix", action="store_true")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--name", default=KERNEL_NAME)
    a = p.parse_args(argv)
    prefix = sys.prefix if a.sys_prefix else a.prefix
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "kernel.json"), "w") as f:
            json.dump(kernel_json(a.python), f, indent=1)
        dest = KernelSpecManager().install_kernel_spec(d, a.name, user=a.user, prefix=prefix)
    print(dest)


def main(argv):
    if argv[:1] == ["install"]:
        return install(argv[1:])
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=argv, kernel_class=_kernel_class())


if __name__ == "__main__":
    main(sys.argv[1:])

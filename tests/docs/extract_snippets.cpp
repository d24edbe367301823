// Extracts the C++ code blocks of the user guide (docs/*.md) into one
// translation unit, so that a test can compile and link it against the
// library: the guide cannot drift from the API. With --each, also one unit
// per block holding only <nnsight/nnsight.hpp> and the block's own #include
// lines, so that each block compiles exactly as written.
//
//   extract_snippets OUT.cpp DOC.md [DOC.md ...]
//   extract_snippets --each OUT_DIR DOC.md [DOC.md ...]
//
// Block kinds, by the fence's info string (docs/index.md explains them to
// writers):
//   ```cpp          statements. Each block becomes the body of its own
//                   function, with `using namespace nnsight;` and
//                   `nnsight::LanguageModel& lm` in scope.
//   ```cpp program  namespace-scope code (functions, types, a main), in a
//                   namespace of its own; `main` is renamed.
//   ```cpp cling    notebook cells: run by the cling test, not compiled here
//                   (allowed only in docs/notebooks.md).
// #include lines of a block move to the top of its unit. Any other
// ```cpp info string is an error, so no block escapes the compiler.
// `#line` directives make compiler errors point into the Markdown file.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Block {
  std::string file;  // as given on the command line
  std::string kind;  // "", "program" or "cling"
  int line = 0;      // first code line, 1-based
  std::vector<std::string> lines;
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A C identifier made from a file name ("hooks.md" -> "hooks_md").
std::string ident(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

bool read_blocks(const std::string& path, std::vector<Block>& out) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "extract_snippets: cannot read " << path << "\n";
    return false;
  }
  std::string line;
  int n = 0;
  Block* open = nullptr;
  bool other_fence = false;  // inside a non-C++ fenced block
  Block cur;
  while (std::getline(in, line)) {
    ++n;
    const std::string t = trim(line);
    if (open) {
      if (t == "```") {
        out.push_back(cur);
        open = nullptr;
      } else {
        cur.lines.push_back(line);
      }
      continue;
    }
    if (other_fence) {
      if (t == "```") other_fence = false;
      continue;
    }
    if (t.rfind("```", 0) != 0) continue;
    const std::string info = trim(t.substr(3));
    if (info == "cpp" || info.rfind("cpp ", 0) == 0 || info == "c++") {
      const std::string kind = info.size() > 4 ? trim(info.substr(4)) : "";
      if (kind != "" && kind != "program" && kind != "cling") {
        std::cerr << path << ":" << n << ": unknown C++ block kind '" << kind
                  << "' (use ```cpp, ```cpp program or ```cpp cling)\n";
        return false;
      }
      if (kind == "cling" && base_name(path) != "notebooks.md") {
        std::cerr << path << ":" << n
                  << ": ```cpp cling blocks belong in docs/notebooks.md (the cling test runs those)\n";
        return false;
      }
      cur = Block{path, kind, n + 1, {}};
      open = &cur;
    } else {
      other_fence = true;
    }
  }
  if (open || other_fence) {
    std::cerr << path << ": a fenced block is not closed\n";
    return false;
  }
  return true;
}

bool is_include(const std::string& line) {
  const std::string t = trim(line);
  return t.rfind("#include", 0) == 0;
}

// A string literal for #line.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Writes `text` to `path` unless the file already holds it (no needless recompiles).
bool write_if_changed(const std::string& path, const std::string& text) {
  {
    std::ifstream old(path);
    std::stringstream ss;
    ss << old.rdbuf();
    if (old && ss.str() == text) return true;
  }
  std::ofstream f(path);
  if (!(f << text)) {
    std::cerr << "extract_snippets: cannot write " << path << "\n";
    return false;
  }
  return true;
}

std::string block_name(const Block& b) { return "docs_" + ident(base_name(b.file)) + "_" + std::to_string(b.line); }

// The block's own text, wrapped as its kind says; its #include lines are left out
// (the caller puts them at the top of the unit).
void write_block(std::ostream& out, const Block& b, bool rename_main) {
  const std::string name = block_name(b);
  if (b.kind == "program") {
    if (rename_main) out << "#define main " << name << "_main\n";
    out << "namespace " << name << " {\n";
  } else {
    out << "[[maybe_unused]] static void " << name << "(nnsight::LanguageModel& lm) {\n"
        << "  using namespace nnsight;\n  (void)lm;\n  {\n";
  }
  out << "#line " << b.line << " " << quoted(b.file) << "\n";
  for (const auto& l : b.lines) out << (is_include(l) ? "" : l) << "\n";
  if (b.kind == "program") {
    out << "}  // namespace " << name << "\n";
    if (rename_main) out << "#undef main\n";
    out << "\n";
  } else {
    out << "  }\n}\n\n";
  }
}

const char* kWarningPragmas =
    "\n#pragma GCC diagnostic ignored \"-Wunused-variable\"\n"
    "#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"\n"
    "#pragma GCC diagnostic ignored \"-Wunused-parameter\"\n"
    "#pragma GCC diagnostic ignored \"-Wshadow\"\n\n";

// The one translation unit the build compiles and links: every block, with the
// includes of all of them.
int write_combined(const std::string& path, const std::vector<Block>& blocks) {
  std::set<std::string> includes = {"#include <nnsight/nnsight.hpp>", "#include <cstdio>"};
  for (const auto& b : blocks)
    for (const auto& l : b.lines)
      if (b.kind != "cling" && is_include(l)) includes.insert(trim(l));

  std::ostringstream out;
  out << "// Generated by tests/docs/extract_snippets.cpp from the guide's C++ blocks. Do not edit.\n";
  for (const auto& inc : includes) out << inc << "\n";
  out << kWarningPragmas;
  int statements = 0, programs = 0, cling = 0;
  std::vector<std::string> functions;
  for (const Block& b : blocks) {
    if (b.kind == "cling") {
      ++cling;
      continue;
    }
    (b.kind == "program" ? programs : statements)++;
    if (b.kind != "program") functions.push_back(block_name(b));
    write_block(out, b, /*rename_main=*/true);
  }
  // Referenced from main so that linking resolves every function the blocks call.
  out << "#line 1 \"extract_snippets-main\"\n"
      << "int main(int argc, char**) {\n"
      << "  using Fn = void (*)(nnsight::LanguageModel&);\n"
      << "  Fn blocks[] = {nullptr";
  for (const auto& f : functions) out << ",\n    " << f;
  out << "};\n"
      << "  // Never called (the blocks need a model): only compiled and linked. The\n"
      << "  // addresses escape so that no block is optimized away before linking.\n"
      << "  if (argc > 1000)\n"
      << "    for (Fn f : blocks) std::printf(\"%p\\n\", reinterpret_cast<void*>(f));\n"
      << "  return 0;\n}\n";
  if (!write_if_changed(path, out.str())) return 1;
  std::cerr << "extract_snippets: " << statements << " statement blocks, " << programs << " program blocks, " << cling
            << " cling cells (run by the cling test)\n";
  return 0;
}

// One translation unit per block, holding nothing but <nnsight/nnsight.hpp> and
// the block's own #include lines: a block that uses what it does not include
// fails to compile, as it would for a reader who copies it.
int write_each(const std::string& dir, const std::vector<Block>& blocks) {
  int n = 0;
  for (const Block& b : blocks) {
    if (b.kind == "cling") continue;
    std::set<std::string> includes = {"#include <nnsight/nnsight.hpp>"};
    for (const auto& l : b.lines)
      if (is_include(l)) includes.insert(trim(l));
    std::ostringstream out;
    out << "// Generated by tests/docs/extract_snippets.cpp from " << b.file << ":" << b.line << ". Do not edit.\n";
    for (const auto& inc : includes) out << inc << "\n";
    out << kWarningPragmas;
    write_block(out, b, /*rename_main=*/false);
    if (!write_if_changed(dir + "/" + block_name(b) + ".cpp", out.str())) return 1;
    ++n;
  }
  std::cerr << "extract_snippets: " << n << " blocks, one file each, in " << dir << "\n";
  return 0;
}

}  // namespace

//   extract_snippets OUT.cpp DOC.md...         one unit with every block
//   extract_snippets --each DIR DOC.md...      one unit per block in DIR
int main(int argc, char** argv) {
  const bool each = argc > 1 && std::string(argv[1]) == "--each";
  const int first_doc = each ? 3 : 2;
  if (argc <= first_doc) {
    std::cerr << "usage: extract_snippets OUT.cpp DOC.md [DOC.md ...]\n"
                 "       extract_snippets --each OUT_DIR DOC.md [DOC.md ...]\n";
    return 2;
  }
  std::vector<Block> blocks;
  for (int i = first_doc; i < argc; ++i)
    if (!read_blocks(argv[i], blocks)) return 1;
  return each ? write_each(argv[2], blocks) : write_combined(argv[1], blocks);
}

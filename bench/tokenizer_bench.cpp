// tokenizer_bench: encoding speed of the library's byte-level BPE tokenizer on
// a corpus, for comparison with Hugging Face's Rust `tokenizers` on the same
// corpus and thread count (bench/tokenizer_bench_hf.py;
// bench/tokenizer_side_by_side.sh runs both, alternating). Results are in
// docs/benchmarks.md and docs/tokenizer.md.
//
//   ./build/bench/tokenizer_bench --tokenizer DIR/tokenizer.json|FILE.gguf
//       --corpus FILE [--threads 1] [--rounds 5] [--cold]
//
// The corpus is cut into documents at blank lines; each document is encoded
// without BOS/EOS. With N threads, thread t encodes documents t, t+N, ....
// Each round encodes the whole corpus with one shared Tokenizer (whose piece
// cache is warm after the first round; --cold loads a fresh one per round and
// times only the encoding). Prints one line per round and the median as
// "median_s <seconds> MB/s <rate> tokens <count>"; the token count is the
// check that both implementations produced the same number of ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "support/bench_support.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_loader.h"

namespace {

nnsight::Tokenizer load(const std::string& path) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
    return nnsight::load_tokenizer_for_model(path);
  }
  return nnsight::Tokenizer::from_hf_json(path);
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, corpus_path;
  int threads = 1, rounds = 5;
  bool cold = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer") {
      tokenizer_path = next();
    } else if (a == "--corpus") {
      corpus_path = next();
    } else if (a == "--threads") {
      threads = std::stoi(next());
    } else if (a == "--rounds") {
      rounds = std::stoi(next());
    } else if (a == "--cold") {
      cold = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (tokenizer_path.empty() || corpus_path.empty() || threads < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: tokenizer_bench --tokenizer PATH --corpus FILE [--threads N] [--rounds R] [--cold]\n");
    return 2;
  }
  std::ifstream in(corpus_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", corpus_path.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> docs = nnsight::bench::corpus_documents(text);

  nnsight::Tokenizer tokenizer = load(tokenizer_path);
  std::vector<double> seconds;
  size_t tokens = 0;
  for (int r = 0; r < rounds; ++r) {
    if (cold) tokenizer = load(tokenizer_path);
    std::vector<size_t> counts(size_t(threads), 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        size_t n = 0;
        for (size_t d = size_t(t); d < docs.size(); d += size_t(threads)) n += tokenizer.encode(docs[d], false).size();
        counts[size_t(t)] = n;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tokens = 0;
    for (size_t c : counts) tokens += c;
    seconds.push_back(s);
    std::printf("round %d: %.4f s, %.2f MB/s\n", r, s, double(text.size()) / s / 1e6);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf("median_s %.4f MB/s %.2f tokens %zu documents %zu bytes %zu threads %d\n", median,
              double(text.size()) / median / 1e6, tokens, docs.size(), text.size(), threads);
  return 0;
}

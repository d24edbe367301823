// pre_tokenizer_engines: PCRE2 (what the library runs, through onig_compat)
// against Oniguruma (what Hugging Face `tokenizers` runs) on the patterns of
// the llama.cpp pre-tokenizer names: are the pieces identical, and which
// engine is faster? Kept so that the decision recorded in docs/design.md
// ("Pre-tokenizer regex engine") can be measured again. Built only when
// pkg-config finds oniguruma (Debian libonig-dev); not used by the library.
//
//   ./build/bench/pre_tokenizer_engines --corpus FILE [--rounds 5] [NAME ...]
//
// The corpus is cut into documents at blank lines, as tokenizer_bench does.
// Oniguruma runs each pattern the way Hugging Face's Split does: Ruby syntax,
// UTF-8, the search restarting where the last match ended, an empty match
// touching the previous match skipped, every match and gap a piece. Names
// whose pipelines have steps on the byte alphabet (falcon) are skipped.
#include <oniguruma.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/bench_support.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/tokenizer_pipeline.h"

namespace {

using nnsight::Piece;

class OnigSplitter {
 public:
  explicit OnigSplitter(const std::vector<std::string>& patterns) {
    for (const std::string& p : patterns) {
      OnigRegex re = nullptr;
      OnigErrorInfo info;
      const auto* b = reinterpret_cast<const OnigUChar*>(p.data());
      const int rc = onig_new(&re, b, b + p.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &info);
      if (rc != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &info);
        std::fprintf(stderr, "oniguruma: '%s': %s\n", p.c_str(), reinterpret_cast<char*>(msg));
        std::exit(1);
      }
      regexes_.push_back(re);
    }
    region_ = onig_region_new();
  }
  ~OnigSplitter() {
    for (OnigRegex re : regexes_) onig_free(re);
    onig_region_free(region_, 1);
  }

  // Pieces as [begin, end) byte ranges of `text`.
  void split(const std::string& text, std::vector<std::pair<size_t, size_t>>& out) {
    cur_.assign(1, {0, text.size()});
    for (OnigRegex re : regexes_) {
      next_.clear();
      for (const auto& [pb, pe] : cur_) split_one(re, text, pb, pe);
      std::swap(cur_, next_);
    }
    out = cur_;
  }

 private:
  void split_one(OnigRegex re, const std::string& text, size_t pb, size_t pe) {
    const auto* s = reinterpret_cast<const OnigUChar*>(text.data()) + pb;
    const size_t n = pe - pb;
    size_t prev = 0, search = 0;
    bool have = false;
    size_t last_end = 0;
    auto emit = [&](size_t b, size_t e) {
      if (e > b) next_.emplace_back(pb + b, pb + e);
    };
    while (search <= n) {
      const int r = onig_search(re, s, s + n, s + search, s + n, region_, ONIG_OPTION_NONE);
      if (r < 0) break;
      const size_t mb = size_t(region_->beg[0]), me = size_t(region_->end[0]);
      if (mb == me && have && last_end == me) {
        if (search >= n) break;
        const OnigUChar c = s[search];  // the corpus is valid UTF-8
        search += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        continue;
      }
      emit(prev, mb);
      emit(mb, me);
      prev = search = last_end = me;
      have = true;
    }
    emit(prev, n);
  }

  std::vector<OnigRegex> regexes_;
  OnigRegion* region_ = nullptr;
  std::vector<std::pair<size_t, size_t>> cur_, next_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus_path;
  int rounds = 5;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--corpus" && i + 1 < argc) {
      corpus_path = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::stoi(argv[++i]);
    } else {
      names.push_back(a);
    }
  }
  if (corpus_path.empty()) {
    std::fprintf(stderr, "usage: pre_tokenizer_engines --corpus FILE [--rounds R] [NAME ...]\n");
    return 2;
  }
  if (names.empty()) {
    names = {"gpt-2",       "smollm",     "llama-bpe",  "qwen2",    "qwen35",    "deepseek-llm", "deepseek-coder",
             "deepseek-v3", "tekken",     "gpt-4o",     "tiny_aya", "bloom",     "kimi-k2",      "superbpe",
             "bailingmoe",  "seed-coder", "exaone-moe", "jais-2",   "chameleon", "default"};
  }
  std::ifstream in(corpus_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> docs = nnsight::bench::corpus_documents(text);
  OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
  onig_initialize(encodings, 1);

  std::printf("%-16s %10s %10s %7s  %s\n", "name", "PCRE2 MB/s", "Onig MB/s", "ratio", "pieces");
  for (const std::string& name : names) {
    const nnsight::TokenizerPipeline pipeline = nnsight::TokenizerPipeline::for_pre_name(name);
    std::vector<std::string> patterns;
    bool byte_level = false;
    for (const auto& step : pipeline.pre_tokenizer.steps) {
      byte_level = byte_level || step.byte_level_view;
      patterns.push_back(step.pattern);
    }
    if (byte_level) {
      std::printf("%-16s skipped (steps on the byte alphabet)\n", name.c_str());
      continue;
    }
    const nnsight::PreTokenizer pcre(pipeline.pre_tokenizer);
    nnsight::PreTokenizerScratch scratch;
    OnigSplitter onig(patterns);

    // Exactness: every document's pieces.
    size_t same = 0;
    std::vector<Piece> a;
    std::vector<std::pair<size_t, size_t>> b;
    for (const std::string& d : docs) {
      a.clear();
      pcre.split(d, a, scratch);
      onig.split(d, b);
      bool equal = a.size() == b.size();
      for (size_t k = 0; equal && k < a.size(); ++k) equal = a[k].begin == b[k].first && a[k].end == b[k].second;
      same += equal;
    }
    // Speed: the two alternate, round by round.
    std::vector<double> tp, to;
    size_t sink = 0;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (const std::string& d : docs) {
        a.clear();
        pcre.split(d, a, scratch);
        sink += a.size();
      }
      auto t1 = std::chrono::steady_clock::now();
      for (const std::string& d : docs) {
        onig.split(d, b);
        sink += b.size();
      }
      auto t2 = std::chrono::steady_clock::now();
      tp.push_back(std::chrono::duration<double>(t1 - t0).count());
      to.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    const double mp = double(text.size()) / median(tp) / 1e6, mo = double(text.size()) / median(to) / 1e6;
    std::printf("%-16s %10.2f %10.2f %7.2f  %zu/%zu documents identical%s\n", name.c_str(), mp, mo, mp / mo, same,
                docs.size(), sink == 0 ? " (empty)" : "");
  }
  onig_end();
  return 0;
}

#include "core/tokenizer/spm_pipeline.h"

namespace nnsight {

SpmPipeline SpmPipeline::sentencepiece(bool add_dummy_prefix) {
  SpmPipeline p;
  p.merge_by_score = true;
  p.byte_fallback = true;
  // Escape first, then prefix: both ways give "▁" + text with spaces escaped.
  p.normalizer.push_back(NormalizeRule::replace(" ", "\xE2\x96\x81"));
  if (add_dummy_prefix) p.normalizer.push_back(NormalizeRule::prepend("\xE2\x96\x81"));
  p.leading_space = add_dummy_prefix ? LeadingSpace::kStripOne : LeadingSpace::kKeep;
  return p;
}

}  // namespace nnsight

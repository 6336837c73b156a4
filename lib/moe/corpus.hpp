// Byte-level text data for moe_train: a text file (or a built-in generated corpus, so the
// quickstart needs no download), split into train/validation, and batches of next-byte
// prediction windows drawn from a counter RNG keyed by (seed, iteration, rank): no sampler
// state, so a resumed run draws exactly the batches it would have drawn.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace skew::moe {

// Deterministic English-like text (a small grammar over a few hundred words) of about `bytes`.
std::string builtin_corpus(std::size_t bytes, std::uint64_t seed);
// Reads a text file whole. Before it reads, it refuses a device (/dev/zero never ends) and a
// regular file larger than `max_bytes` or than MemAvailable; a pipe is refused once it has sent
// more than that. Each error names the path, the sizes and data.max_memory_mb (0 = MemAvailable
// alone).
std::string read_text(const std::string& path, std::int64_t max_memory_mb);

// Entropy in nats of the byte unigram distribution of `text`: the loss of the best model that
// ignores context, which a trained model must beat.
double unigram_entropy(const std::string& text);

class ByteCorpus {
 public:
  // `source` names where the text came from, for the error when it is too short.
  ByteCorpus(std::string text, int seq_len, const std::string& source);
  // Sequences [first, first + count) of a batch: tokens and next-byte targets, seq_len each.
  void sample(std::uint64_t seed, std::int64_t iteration, std::int64_t first, int count,
              std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;
  // Appends evenly spaced window i of `total` (validation batches).
  void window(std::int64_t i, std::int64_t total, std::vector<std::int32_t>& tokens,
              std::vector<std::int32_t>& targets) const;
  const std::string& text() const { return text_; }

 private:
  void append(std::size_t start, std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;
  std::string text_;
  int seq_len_;
};

}  // namespace skew::moe

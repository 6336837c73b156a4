#include "lib/moe/corpus.hpp"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/memory_limits.hpp"
#include "core/rng.hpp"

namespace skew::moe {

namespace {
template <std::size_t N>
const char* pick(Rng& rng, const std::array<const char*, N>& words) {
  return words[static_cast<std::size_t>(rng.below(N))];
}
const std::array<const char*, 16> kNouns = {"river",  "garden",  "engine",  "market",  "teacher", "window",
                                            "letter", "forest",  "captain", "village", "machine", "doctor",
                                            "island", "kitchen", "signal",  "winter"};
const std::array<const char*, 12> kVerbs = {"watched", "carried",  "followed", "opened",    "painted",    "found",
                                            "crossed", "repaired", "visited",  "described", "remembered", "built"};
const std::array<const char*, 12> kAdjs = {"old",   "quiet",   "bright",  "narrow", "heavy", "small",
                                           "green", "distant", "careful", "broken", "warm",  "strange"};
const std::array<const char*, 6> kDets = {"the", "a", "every", "that", "one", "this"};
const std::array<const char*, 8> kPreps = {"near", "behind", "under", "across", "beside", "after", "before", "inside"};
const std::array<const char*, 6> kNames = {"Anna", "Tomas", "Mira", "Jonas", "Elena", "Paul"};

void noun_phrase(Rng& rng, std::ostringstream& os) {
  os << pick(rng, kDets) << ' ';
  if (rng.below(2)) os << pick(rng, kAdjs) << ' ';
  os << pick(rng, kNouns);
}
}  // namespace

std::string builtin_corpus(std::size_t bytes, std::uint64_t seed) {
  Rng rng(seed, 0xC0FFEE);
  std::ostringstream os;
  while (static_cast<std::size_t>(os.tellp()) < bytes) {
    std::ostringstream s;
    if (rng.below(3) == 0)
      s << pick(rng, kNames);
    else
      noun_phrase(rng, s);
    s << ' ' << pick(rng, kVerbs) << ' ';
    noun_phrase(rng, s);
    if (rng.below(2)) {
      s << ' ' << pick(rng, kPreps) << ' ';
      noun_phrase(rng, s);
    }
    std::string sentence = s.str();
    sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
    os << sentence << (rng.below(4) == 0 ? ".\n" : ". ");
  }
  return os.str();
}

std::string read_text(const std::string& path, std::int64_t max_memory_mb) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) SKEW_THROW("cannot open text file '" << path << "': " << std::strerror(errno));
  SKEW_CHECK(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode),
             "text file '" << path << "' is a device, not a file: it would be read without end");
  SKEW_CHECK(!S_ISDIR(st.st_mode), "text file '" << path << "' is a directory; give a text file inside it");
  const MemoryLimit limit{max_memory_mb, "data.max_memory_mb", "give a smaller text file"};
  if (S_ISREG(st.st_mode)) require_memory("moe_train", {{"text " + path, double(st.st_size)}}, limit);
  std::ifstream in(path, std::ios::binary);
  if (!in) SKEW_THROW("cannot open text file '" << path << "': " << std::strerror(errno));
  // A pipe has no size to check first: it is read in blocks, checked as it grows.
  const std::int64_t available = available_memory_bytes();
  const double bound = max_memory_mb > 0 ? double(max_memory_mb) * double(1 << 20)
                       : available >= 0  ? double(available)
                                         : 1e300;
  std::string text;
  std::vector<char> block(std::size_t(1) << 20);
  while (in.read(block.data(), std::streamsize(block.size())) || in.gcount() > 0) {
    text.append(block.data(), std::size_t(in.gcount()));
    if (double(text.size()) > bound)
      require_memory("moe_train", {{"text " + path + " (so far)", double(text.size())}}, limit);
  }
  SKEW_CHECK(!in.bad(), "reading text file '" << path << "' failed: " << std::strerror(errno));
  return text;
}

double unigram_entropy(const std::string& text) {
  std::array<double, 256> counts{};
  for (unsigned char c : text) counts[c] += 1;
  double h = 0;
  for (double c : counts)
    if (c > 0) h -= c / static_cast<double>(text.size()) * std::log(c / static_cast<double>(text.size()));
  return h;
}

ByteCorpus::ByteCorpus(std::string text, int seq_len, const std::string& source)
    : text_(std::move(text)), seq_len_(seq_len) {
  SKEW_CHECK(text_.size() > static_cast<std::size_t>(seq_len) + 1,
             source << ": " << text_.size() << " bytes is too short for model.seq_len " << seq_len
                    << " (needs at least " << seq_len + 2 << ")");
}

void ByteCorpus::append(std::size_t start, std::vector<std::int32_t>& tokens,
                        std::vector<std::int32_t>& targets) const {
  for (int i = 0; i < seq_len_; ++i) {
    tokens.push_back(static_cast<unsigned char>(text_[start + static_cast<std::size_t>(i)]));
    targets.push_back(static_cast<unsigned char>(text_[start + static_cast<std::size_t>(i) + 1]));
  }
}

void ByteCorpus::sample(std::uint64_t seed, std::int64_t iteration, std::int64_t first, int count,
                        std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const {
  tokens.clear(), targets.clear();
  const std::uint64_t starts = text_.size() - static_cast<std::size_t>(seq_len_) - 1;
  for (int b = 0; b < count; ++b) {
    Rng rng(seed, (1ULL << 40) + static_cast<std::uint64_t>(iteration), 2 * static_cast<std::uint64_t>(first + b));
    append(static_cast<std::size_t>(rng.below(starts)), tokens, targets);
  }
}

void ByteCorpus::window(std::int64_t i, std::int64_t total, std::vector<std::int32_t>& tokens,
                        std::vector<std::int32_t>& targets) const {
  const std::size_t starts = text_.size() - static_cast<std::size_t>(seq_len_) - 1;
  append(static_cast<std::size_t>(i) * starts / static_cast<std::size_t>(std::max<std::int64_t>(total, 1)), tokens,
         targets);
}

}  // namespace skew::moe

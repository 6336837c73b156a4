// libsvm text reader: parse_text on the input, failing on the first bad line and skipping bad
// lines. A rejection must be a skew::Error naming FILE:LINE:COL; a parsed dataset must be
// consistent (see wide_check.hpp).
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/error.hpp"
#include "tests/fuzz/wide_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool skip : {false, true}) {
    skew::wide::ReadOptions o;
    o.skip_bad_lines = skip;
    skew::wide::ReadReport report;
    try {
      const auto d = skew::wide::parse_text(text, "fuzz.libsvm", skew::wide::TextFormat::Libsvm, o, &report);
      skew::fuzz::check_dataset(d);
      FUZZ_ASSERT(report.skipped_lines == 0 || report.first_bad_line.rfind("fuzz.libsvm:", 0) == 0);
    } catch (const skew::Error& e) {
      FUZZ_ASSERT(!skip);
      FUZZ_ASSERT(std::string(e.what()).rfind("fuzz.libsvm:", 0) == 0);
    }
  }
  return 0;
}

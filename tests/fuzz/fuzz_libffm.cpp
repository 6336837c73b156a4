// libffm text reader: see fuzz_text_reader (wide_check.hpp).
#include <cstdint>

#include "tests/fuzz/wide_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  skew::fuzz::fuzz_text_reader(data, size, skew::wide::TextFormat::Libffm, "fuzz.libffm");
  return 0;
}

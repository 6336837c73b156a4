// Routing-trace reader (placement simulator): read_trace_jsonl on the input written to a scratch
// file. A rejection must be a skew::Error naming the file (and line where there is one); a trace
// read must be rectangular (every iteration the same layers x experts, at least one expert) with
// counts >= 0, and trace_balance_ratio must run on it.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "lib/placement/trace.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path =
      skew::fuzz::write_scratch("trace.jsonl", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const auto trace = skew::placement::read_trace_jsonl(path, "tokens_per_expert");
    FUZZ_ASSERT(!trace.empty() && !trace.front().empty());
    const std::size_t layers = trace.front().size(), experts = trace.front().front().size();
    FUZZ_ASSERT(experts >= 1);
    for (const auto& it : trace) {
      FUZZ_ASSERT(it.size() == layers);
      for (const auto& layer : it) {
        FUZZ_ASSERT(layer.size() == experts);
        for (const auto c : layer) FUZZ_ASSERT(c >= 0);
      }
    }
    for (const int world : {1, 2}) {
      try {
        FUZZ_ASSERT(std::isfinite(skew::placement::trace_balance_ratio(trace, world)));
      } catch (const skew::Error&) {
        FUZZ_ASSERT(experts % static_cast<std::size_t>(world) != 0);
      }
    }
  } catch (const skew::Error& e) {
    FUZZ_ASSERT(std::string(e.what()).find(path) != std::string::npos);
  }
  return 0;
}

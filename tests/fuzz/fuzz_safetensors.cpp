// safetensors reader (checkpoints): parse_safetensors on the input as a whole file. A rejection
// must be a skew::Error naming the file; every tensor read must own exactly its shape's bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/safetensors.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const skew::TensorFile f = skew::parse_safetensors(bytes, "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors) {
      std::size_t numel = 1;
      for (const auto d : t.shape()) {
        FUZZ_ASSERT(d >= 0);
        numel *= static_cast<std::size_t>(d);
      }
      FUZZ_ASSERT(t.nbytes() == numel * skew::dtype_size(t.dtype()));
      FUZZ_ASSERT(t.nbytes() <= size);
      FUZZ_ASSERT(f.has(name));
    }
  } catch (const skew::Error& e) {
    FUZZ_ASSERT(std::string(e.what()).find("fuzz.safetensors") != std::string::npos);
  }
  return 0;
}

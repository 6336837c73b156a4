// Test helper: damages a written safetensors file the way a bad disk or a stray write would.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/fileio.hpp"

namespace skew::test {

// Flips one bit of byte `at` inside tensor `name`'s data in the safetensors file `path`; the
// header stays valid, so only a checksum can tell.
inline void flip_tensor_byte(const std::string& path, const std::string& name, std::size_t at) {
  std::string bytes = read_file(path);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const std::size_t where = 8 + n + header[name]["data_offsets"][0].get<std::size_t>() + at;
  bytes[where] = static_cast<char>(bytes[where] ^ 0x10);
  write_file_atomic(path, bytes);
}

}  // namespace skew::test

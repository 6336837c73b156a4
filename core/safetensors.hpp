// safetensors files (8-byte little-endian header length, JSON header, raw little-endian
// tensor bytes) readable by PyTorch and numpy. Written atomically (see fileio.hpp); the
// reader rejects truncated or inconsistent files with a message naming the file and fault.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace skew {

struct TensorFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // host tensors, in file order
  std::map<std::string, std::string> metadata;          // the header's __metadata__
  const Tensor& get(const std::string& name) const;     // throws naming the missing tensor
  bool has(const std::string& name) const;
};

// Tensors on the GPU are copied to the host for writing.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
TensorFile load_safetensors(const std::string& path);
// The same from the file's bytes in memory; `origin` names the file in errors.
TensorFile parse_safetensors(std::string_view bytes, const std::string& origin);

}  // namespace skew

#include "core/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace skew {

const Tensor& TensorFile::get(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  SKEW_THROW("tensor '" << name << "' not found in checkpoint");
}

bool TensorFile::has(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return true;
  return false;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  std::vector<Tensor> host;
  for (const auto& [name, t] : tensors) {
    SKEW_CHECK(name != "__metadata__", "tensor name __metadata__ is reserved");
    SKEW_CHECK(!header.contains(name), "duplicate tensor name '" << name << "' writing " << path);
    host.push_back(t.device() == Device::Host ? t : t.to(Device::Host));
    header[name] = {
        {"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  std::string head(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) head[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  head += text;
  // The tensors go to the file from their own memory: a model of a gigabyte is not first copied
  // into one buffer with its header.
  std::vector<std::string_view> parts{head};
  for (const auto& t : host) parts.emplace_back(static_cast<const char*>(t.raw()), t.nbytes());
  write_file_atomic(path, parts);
}

// Parsed from the page cache: reading a model of a gigabyte into a string first would copy it
// twice more before the tensors take their own copy.
TensorFile load_safetensors(const std::string& path) {
  return parse_safetensors(MappedFile(path).view(), path);
}

TensorFile parse_safetensors(std::string_view bytes, const std::string& path) {
  const auto fail = [&](const std::string& why) -> void {
    throw Error("corrupt safetensors file '" + path + "': " + why);
  };
  if (bytes.size() < 8) fail("shorter than the 8-byte header length (" + std::to_string(bytes.size()) + " bytes)");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  if (n > bytes.size() - 8)
    fail("header length " + std::to_string(n) + " exceeds the file (" + std::to_string(bytes.size()) +
         " bytes): truncated?");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(bytes.substr(8, static_cast<std::size_t>(n)));
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");
  if (header.contains("__metadata__") && !header["__metadata__"].is_object()) fail("__metadata__ is not a JSON object");
  const std::size_t data_begin = 8 + n, data_size = bytes.size() - data_begin;
  TensorFile out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;  // each tensor's [begin, end)
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) fail("metadata value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    try {
      if (!info.is_object()) fail("tensor '" + name + "' entry is not a JSON object");
      const std::string dtype_text = info.at("dtype").get<std::string>();
      DType dtype = DType::F32;
      try {
        dtype = dtype_from_name(dtype_text);
      } catch (const Error& e) {
        fail("tensor '" + name + "': " + e.what());
      }
      // Integers only: nlohmann's get<int64_t> of a float such as 1e300 is an out-of-range
      // conversion (undefined behaviour), not an exception. (Plain references: clang 14 cannot
      // capture structured bindings.)
      const std::string& tensor = name;
      const auto& entry = info;
      const auto integers = [&](const char* field) {
        const auto& a = entry.at(field);
        if (!a.is_array()) fail("tensor '" + tensor + "': " + field + " is not an array");
        std::vector<std::int64_t> v;
        for (const auto& x : a) {
          if (!x.is_number_integer())
            fail("tensor '" + tensor + "': " + field + " holds " + x.dump() + ", not an integer");
          v.push_back(x.get<std::int64_t>());
        }
        return v;
      };
      const auto shape = integers("shape");
      const auto offsets = integers("data_offsets");
      if (offsets.size() != 2 || offsets[0] < 0 || offsets[0] > offsets[1])
        fail("tensor '" + name + "' has bad data_offsets");
      const auto begin = static_cast<std::uint64_t>(offsets[0]), end = static_cast<std::uint64_t>(offsets[1]);
      if (end > data_size)
        fail("tensor '" + name + "' ends at byte " + std::to_string(end) + " of a " + std::to_string(data_size) +
             "-byte data section: truncated?");
      // Size from the shape, checked before allocating so a corrupt shape cannot ask for
      // more memory than the file holds (or overflow).
      std::uint64_t need = dtype_size(dtype);
      for (const std::int64_t d : shape) {
        if (d < 0) fail("tensor '" + name + "' has a negative dimension " + std::to_string(d) + " in its shape");
        if (d != 0 && need > data_size / static_cast<std::uint64_t>(d))
          fail("tensor '" + name + "' has a shape larger than the file's data section");
        need *= static_cast<std::uint64_t>(d);
      }
      if (need != end - begin)
        fail("tensor '" + name + "' has " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
             std::to_string(need));
      Tensor t = Tensor::empty(shape, dtype);
      std::memcpy(t.raw(), bytes.data() + data_begin + begin, t.nbytes());
      extents.emplace_back(begin, end);
      out.tensors.emplace_back(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      fail("tensor '" + name + "' entry is malformed: " + e.what());
    }
  }
  // The format requires the tensors to cover the data section exactly, with no hole, overlap
  // or trailing byte: anything else is a damaged (or doctored) file.
  std::sort(extents.begin(), extents.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : extents) {
    if (begin != covered)
      fail(begin > covered
               ? "the data section has unused bytes " + std::to_string(covered) + " to " + std::to_string(begin)
               : "two tensors overlap at byte " + std::to_string(begin) + " of the data section");
    covered = end;
  }
  if (covered != data_size)
    fail("the data section has " + std::to_string(data_size - covered) + " bytes after its last tensor");
  return out;
}

}  // namespace skew

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

namespace {

using Extent = std::pair<std::uint64_t, std::uint64_t>;  // a tensor's [begin, end) in the data section

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  throw Error("corrupt safetensors file '" + path + "': " + why);
}

// The JSON header after the 8-byte little-endian length; `data_begin` is set past it.
nlohmann::ordered_json parse_header(std::string_view bytes, const std::string& path, std::size_t& data_begin) {
  if (bytes.size() < 8)
    corrupt(path, "shorter than the 8-byte header length (" + std::to_string(bytes.size()) + " bytes)");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  if (n > bytes.size() - 8)
    corrupt(path, "header length " + std::to_string(n) + " exceeds the file (" + std::to_string(bytes.size()) +
                      " bytes): truncated?");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(bytes.substr(8, static_cast<std::size_t>(n)));
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) corrupt(path, "header is not a JSON object");
  if (header.contains("__metadata__") && !header["__metadata__"].is_object())
    corrupt(path, "__metadata__ is not a JSON object");
  data_begin = 8 + n;
  return header;
}

// Integers only: nlohmann's get<int64_t> of a float such as 1e300 is an out-of-range conversion
// (undefined behaviour), not an exception.
std::vector<std::int64_t> integer_field(const nlohmann::ordered_json& entry, const char* field,
                                        const std::string& tensor, const std::string& path) {
  const auto& a = entry.at(field);
  if (!a.is_array()) corrupt(path, "tensor '" + tensor + "': " + field + " is not an array");
  std::vector<std::int64_t> v;
  for (const auto& x : a) {
    if (!x.is_number_integer())
      corrupt(path, "tensor '" + tensor + "': " + field + " holds " + x.dump() + ", not an integer");
    v.push_back(x.get<std::int64_t>());
  }
  return v;
}

// Bytes the shape and dtype need, checked against the data section before anything is
// allocated, so a corrupt shape cannot ask for more memory than the file holds (or overflow).
std::uint64_t shape_bytes(const std::vector<std::int64_t>& shape, DType dtype, std::uint64_t data_size,
                          const std::string& name, const std::string& path) {
  std::uint64_t need = dtype_size(dtype);
  for (const std::int64_t d : shape) {
    if (d < 0) corrupt(path, "tensor '" + name + "' has a negative dimension " + std::to_string(d) + " in its shape");
    if (d != 0 && need > data_size / static_cast<std::uint64_t>(d))
      corrupt(path, "tensor '" + name + "' has a shape larger than the file's data section");
    need *= static_cast<std::uint64_t>(d);
  }
  return need;
}

// One tensor entry of the header, its bytes copied out of `data`; its extent goes to `extent`.
Tensor parse_tensor(const std::string& name, const nlohmann::ordered_json& info, std::string_view data,
                    const std::string& path, Extent& extent) {
  if (!info.is_object()) corrupt(path, "tensor '" + name + "' entry is not a JSON object");
  const std::string dtype_text = info.at("dtype").get<std::string>();
  DType dtype = DType::F32;
  try {
    dtype = dtype_from_name(dtype_text);
  } catch (const Error& e) {
    corrupt(path, "tensor '" + name + "': " + e.what());
  }
  const auto shape = integer_field(info, "shape", name, path);
  const auto offsets = integer_field(info, "data_offsets", name, path);
  if (offsets.size() != 2 || offsets[0] < 0 || offsets[0] > offsets[1])
    corrupt(path, "tensor '" + name + "' has bad data_offsets");
  const auto begin = static_cast<std::uint64_t>(offsets[0]), end = static_cast<std::uint64_t>(offsets[1]);
  if (end > data.size())
    corrupt(path, "tensor '" + name + "' ends at byte " + std::to_string(end) + " of a " + std::to_string(data.size()) +
                      "-byte data section: truncated?");
  const std::uint64_t need = shape_bytes(shape, dtype, data.size(), name, path);
  if (need != end - begin)
    corrupt(path, "tensor '" + name + "' has " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
                      std::to_string(need));
  Tensor t = Tensor::empty(shape, dtype);
  std::memcpy(t.raw(), data.data() + begin, t.nbytes());
  t.set_origin("tensor '" + name + "' of " + path);
  extent = {begin, end};
  return t;
}

// The format requires the tensors to cover the data section exactly, with no hole, overlap or
// trailing byte: anything else is a damaged (or doctored) file.
void check_coverage(std::vector<Extent> extents, std::uint64_t data_size, const std::string& path) {
  std::sort(extents.begin(), extents.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : extents) {
    if (begin != covered)
      corrupt(path, begin > covered ? "the data section has unused bytes " + std::to_string(covered) + " to " +
                                          std::to_string(begin)
                                    : "two tensors overlap at byte " + std::to_string(begin) + " of the data section");
    covered = end;
  }
  if (covered != data_size)
    corrupt(path, "the data section has " + std::to_string(data_size - covered) + " bytes after its last tensor");
}

}  // namespace

TensorFile parse_safetensors(std::string_view bytes, const std::string& path) {
  std::size_t data_begin = 0;
  const nlohmann::ordered_json header = parse_header(bytes, path, data_begin);
  const std::string_view data = bytes.substr(data_begin);
  TensorFile out;
  std::vector<Extent> extents;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) corrupt(path, "metadata value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    try {
      Extent extent;
      Tensor t = parse_tensor(name, info, data, path, extent);
      extents.push_back(extent);
      out.tensors.emplace_back(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      corrupt(path, "tensor '" + name + "' entry is malformed: " + e.what());
    }
  }
  check_coverage(std::move(extents), data.size(), path);
  return out;
}

}  // namespace skew

#include "core/error.hpp"

#include <filesystem>

namespace skew::detail {

void throw_error(const char* file, int line, const std::string& what) {
  throw Error(what + " [" + std::filesystem::path(file).filename().string() + ":" + std::to_string(line) + "]");
}

}  // namespace skew::detail

#include "core/error.hpp"

#include <filesystem>

namespace skew::detail {

void throw_error(const char* file, int line, const std::string& what, const char* condition) {
  std::string where = std::filesystem::path(file).filename().string() + ":" + std::to_string(line);
  if (condition) where += ": check failed: " + std::string(condition);
  throw Error(what, std::move(where));
}

}  // namespace skew::detail

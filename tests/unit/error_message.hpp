// Test helpers for checking what an error says.
#pragma once
#include <string>

#include "core/error.hpp"

namespace skew::test {

// The message of the skew::Error that `fn` throws ("" when it throws none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const skew::Error& e) {
    return e.what();
  }
  return "";
}

// "'path'", as the messages quote a path (built in steps: GCC 12 warns on "'" + s + "'").
inline std::string quoted(const std::string& path) {
  std::string q = "'";
  q += path;
  q += '\'';
  return q;
}

}  // namespace skew::test

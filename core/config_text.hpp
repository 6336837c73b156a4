// Text helpers shared by the config sources (schema, parsing, printing); not for callers.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/config.hpp"

namespace skew::config_text {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

inline bool parse_bool_text(const std::string& text, bool* out) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  if (t == "1" || t == "true" || t == "yes" || t == "on") return *out = true, true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return *out = false, true;
  return false;
}

// The number `text` spells to its end (std::stoll / std::stod: leading white space is
// skipped), or nothing when it has other characters, no digits or is out of range.
template <class T>
std::optional<T> whole_number(const std::string& text) {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>);
  try {
    std::size_t pos = 0;
    T v;
    if constexpr (std::is_same_v<T, double>)
      v = std::stod(text, &pos);
    else
      v = std::stoll(text, &pos);
    if (pos == text.size()) return v;
  } catch (const std::logic_error&) {
  }
  return std::nullopt;
}

// Defined in config_parse.cpp, the one place a value's text is checked against its key:
// What a value of key `k` (an int, float, bool or choice key) must be when `text` is not one
// ("an integer in [1, 64]"); empty when it is, or when `k` is of another type.
std::string value_mismatch(const Schema::Key& k, const std::string& text);
// For an int list or float list key, what is wrong with `text` as its value ("item 2 '1e300'
// is not a finite number in [1, 1e+06]"); empty when nothing is, or when `k` is of another type.
std::string list_mismatch(const Schema::Key& k, const std::string& text);
// The items of a comma-separated list, trimmed; "" (or blanks) is no items, an empty item is kept.
std::vector<std::string> list_items(const std::string& text);

inline std::string format_double(double v) {
  std::ostringstream oss;
  oss.precision(10);
  oss << v;
  return oss.str();
}

}  // namespace skew::config_text

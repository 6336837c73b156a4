// Text helpers shared by the config sources (schema, parsing, printing); not for callers.
#pragma once
#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>

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

inline std::string format_double(double v) {
  std::ostringstream oss;
  oss.precision(10);
  oss << v;
  return oss.str();
}

}  // namespace skew::config_text

// Numbers read from data files (trace and CSV fields), as strictly as config values: the whole
// field is one number, and a number that is not finite is refused with the junk.
#pragma once
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

namespace skew {

// The finite number `field` spells, blanks around it allowed; nothing when it holds anything
// else ("2x"), no digits, "nan" or "inf", or a number that overflows a double ("1e400").
inline std::optional<double> finite_number(std::string_view field) {
  const auto first = field.find_first_not_of(" \t\r"), last = field.find_last_not_of(" \t\r");
  if (first == std::string_view::npos) return std::nullopt;
  field = field.substr(first, last - first + 1);
  if (field.front() == '+') field.remove_prefix(1);  // from_chars takes no plus sign
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace skew

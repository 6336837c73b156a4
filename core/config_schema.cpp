// The schema half of core/config.hpp: Schema (keys with type, default and help, the
// closest spellings of an unknown key) and Config's typed reads of the values it holds.
// Parsing is in config_parse.cpp, --help and --print-config in config_print.cpp.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/config.hpp"
#include "core/config_text.hpp"
#include "core/error.hpp"

namespace po = boost::program_options;

namespace skew {
namespace {

using config_text::format_double;

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string IntRange::text() const {
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  if (min == lowest && max == kMaxInt64) return "any";
  if (max == kMaxInt64) return ">= " + std::to_string(min);
  if (min == lowest) return "<= " + std::to_string(max);
  return "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

bool FloatRange::contains(double v) const {
  if (!std::isfinite(v)) return nonfinite;
  return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
}

std::string FloatRange::text() const {
  const bool low = std::isfinite(min), high = std::isfinite(max);
  if (!low && !high) return nonfinite ? "any, nan/inf too" : "any finite";
  std::string t;
  if (!high)
    t = (min_open ? "> " : ">= ") + format_double(min);
  else if (!low)
    t = (max_open ? "< " : "<= ") + format_double(max);
  else
    t = "in " + std::string(min_open ? "(" : "[") + format_double(min) + ", " + format_double(max) +
        (max_open ? ")" : "]");
  return nonfinite ? t + ", nan/inf too" : t;
}

std::string Schema::Key::range_text() const {
  return int_range ? int_range->text() : float_range ? float_range->text() : "";
}

Schema::Schema(std::string app, std::string summary)
    : app_(std::move(app)), summary_(std::move(summary)), desc_(std::make_unique<po::options_description>()) {}
Schema::~Schema() = default;
Schema::Schema(Schema&&) noexcept = default;

void Schema::add(Key key) {
  SKEW_CHECK(find(key.name) == nullptr, "duplicate config key '" << key.name << "'");
  // Values are stored as text and converted on access, so the raw text (for --print-config)
  // and the typed value cannot disagree; validation happens in Config::store.
  desc_->add_options()(key.name.c_str(), po::value<std::string>(), key.help.c_str());
  keys_.push_back(std::move(key));
}

Schema& Schema::add_string(const std::string& k, const std::string& d, const std::string& h) {
  add({k, "string", d, h, {}, {}, {}});
  return *this;
}
Schema& Schema::add_int(const std::string& k, std::int64_t d, IntRange r, const std::string& h) {
  SKEW_CHECK(r.min <= r.max && r.contains(d), "default " << d << " of key '" << k << "' is not " << r.text());
  add({k, "int", std::to_string(d), h, {}, r, {}});
  return *this;
}
Schema& Schema::add_float(const std::string& k, double d, FloatRange r, const std::string& h) {
  SKEW_CHECK(!(r.min > r.max) && r.contains(d),
             "default " << format_double(d) << " of key '" << k << "' is not " << r.text());
  add({k, "float", format_double(d), h, {}, {}, r});
  return *this;
}
Schema& Schema::add_int_list(const std::string& k, const std::string& d, IntRange r, const std::string& h) {
  add({k, "int list", d, h, {}, r, {}});
  SKEW_CHECK(config_text::list_mismatch(keys_.back(), d).empty(),
             "default '" << d << "' of key '" << k << "' is not " << config_text::list_mismatch(keys_.back(), d));
  return *this;
}
Schema& Schema::add_float_list(const std::string& k, const std::string& d, FloatRange r, const std::string& h) {
  add({k, "float list", d, h, {}, {}, r});
  SKEW_CHECK(config_text::list_mismatch(keys_.back(), d).empty(),
             "default '" << d << "' of key '" << k << "' is not " << config_text::list_mismatch(keys_.back(), d));
  return *this;
}
Schema& Schema::add_bool(const std::string& k, bool d, const std::string& h) {
  add({k, "bool", d ? "true" : "false", h, {}, {}, {}});
  return *this;
}
Schema& Schema::add_choice(const std::string& k, const std::string& d, const std::vector<std::string>& choices,
                           const std::string& h) {
  SKEW_CHECK(std::find(choices.begin(), choices.end(), d) != choices.end(),
             "default '" << d << "' of key '" << k << "' is not among its choices");
  add({k, "choice", d, h, choices, {}, {}});
  return *this;
}

const Schema::Key* Schema::find(const std::string& key) const {
  for (const auto& k : keys_)
    if (k.name == key) return &k;
  return nullptr;
}

std::vector<std::string> Schema::close_spellings(const std::string& key) const {
  // A candidate: close in spelling (the whole name or its leaf), or its leaf holds the key's leaf
  // or the other way round ("threads" in "blas_threads"). Keys of the key's own section come
  // first, and a key of another section is offered only where it is closer than every key of the
  // own section: a misspelt train.threads means train.blas_threads, not model.heads.
  struct Candidate {
    bool other_section;
    std::size_t distance;
    std::string name;
    auto operator<=>(const Candidate&) const = default;
  };
  const auto leaf = [](const std::string& s) { return s.substr(s.rfind('.') + 1); };
  const auto section = [](const std::string& s) {
    return s.substr(0, s.find('.') == std::string::npos ? 0 : s.find('.'));
  };
  const auto holds = [](const std::string& longer, const std::string& shorter) {
    return shorter.size() >= 4 && longer.find(shorter) != std::string::npos;
  };
  std::vector<Candidate> scored;
  std::size_t best_own_section = std::numeric_limits<std::size_t>::max();
  for (const auto& k : keys_) {
    const std::string a = leaf(key), b = leaf(k.name);
    std::size_t d = std::min(edit_distance(key, k.name), edit_distance(a, b));
    if (d > std::max<std::size_t>(2, key.size() / 4)) {
      if (!holds(a, b) && !holds(b, a)) continue;
      d = 1;  // a leaf inside the other: as close as one typo
    }
    const bool other = section(key) != section(k.name);
    if (!other) best_own_section = std::min(best_own_section, d);
    scored.push_back({other, d, k.name});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const Candidate& c : scored)
    if (out.size() < 3 && (!c.other_section || c.distance < best_own_section)) out.push_back(c.name);
  return out;
}

namespace {
const std::string& lookup(const std::map<std::string, std::string>& raw, const Schema& schema, const std::string& key,
                          const char* want) {
  const Schema::Key* k = schema.find(key);
  SKEW_CHECK(k != nullptr, "program error: config key '" << key << "' is not in the schema of " << schema.app());
  const std::string t = k->type == "choice" ? "string" : k->type;
  SKEW_CHECK(t == want, "program error: config key '" << key << "' is " << k->type << ", read as " << want);
  return raw.at(key);
}
}  // namespace

std::string Config::get_string(const std::string& key) const {
  return lookup(raw_, *schema_, key, "string");
}
std::int64_t Config::get_int(const std::string& key) const {
  return std::stoll(lookup(raw_, *schema_, key, "int"));
}
double Config::get_float(const std::string& key) const {
  return std::stod(lookup(raw_, *schema_, key, "float"));
}
bool Config::get_bool(const std::string& key) const {
  bool b = false;
  config_text::parse_bool_text(lookup(raw_, *schema_, key, "bool"), &b);
  return b;
}

std::vector<std::string> Config::get_string_list(const std::string& key) const {
  std::vector<std::string> out;
  std::stringstream ss(get_string(key));
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = config_text::trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<double> Config::get_float_list(const std::string& key) const {
  std::vector<double> out;
  for (const std::string& item : config_text::list_items(lookup(raw_, *schema_, key, "float list")))
    out.push_back(std::stod(item));
  return out;
}

std::vector<std::int64_t> Config::get_int_list(const std::string& key) const {
  std::vector<std::int64_t> out;
  for (const std::string& item : config_text::list_items(lookup(raw_, *schema_, key, "int list")))
    out.push_back(std::stoll(item));
  return out;
}

void Config::narrowing_error(const std::string& key, std::int64_t value, const std::string& min,
                             const std::string& max) const {
  throw Error(source(key) + ": value " + std::to_string(value) + " of key '" + key + "' does not fit the range [" +
              min + ", " + max + "] of the variable it sets");
}

std::string Config::source(const std::string& key) const {
  const auto it = source_.find(key);
  SKEW_CHECK(it != source_.end(), "program error: config key '" << key << "' is not in the schema");
  return it->second;
}

}  // namespace skew

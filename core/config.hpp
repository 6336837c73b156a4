// Configuration: one Schema per app (key, type, default, help) on Boost.Program_options, filled
// from defaults < INI files (--config FILE, repeatable: merged in order, a later file's value
// winning; [section] key = value becomes section.key) < command line (--section.key=value or
// --section.key value; a key given twice there is refused, as in one INI file). Every error names the key and
// where its value came from (file:line or the command line). Every int and float key declares
// the range of values it accepts (IntRange, FloatRange), checked when the value is read from the
// file or the command line; float keys never accept nan or inf unless their range says so.
// Implemented in three parts:
// config_schema.cpp (keys, types, close spellings, typed reads), config_parse.cpp (INI file and
// command line) and config_print.cpp (--help, --print-config).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace boost::program_options {
class options_description;
class variables_map;
}  // namespace boost::program_options

namespace skew {

inline constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

// The values an int key accepts: min <= value <= max.
struct IntRange {
  std::int64_t min, max;
  static IntRange at_least(std::int64_t min) { return {min, kMaxInt64}; }
  bool contains(std::int64_t v) const { return v >= min && v <= max; }
  std::string text() const;  // "in [1, 64]", ">= 0", "any"
};

// The values a float key accepts: finite numbers from min to max, each end closed unless marked
// open ({.min = 0, .max = 1, .max_open = true} is [0, 1)); nan and +-inf only with `nonfinite`.
struct FloatRange {
  double min, max;
  bool min_open = false, max_open = false, nonfinite = false;
  static FloatRange at_least(double min) { return {min, std::numeric_limits<double>::infinity()}; }
  static FloatRange above(double min) { return {min, std::numeric_limits<double>::infinity(), true}; }
  bool contains(double v) const;
  std::string text() const;  // "in [0, 1)", "> 0", ">= -1", "any finite"
};

class Schema {
 public:
  Schema(std::string app, std::string summary);
  ~Schema();
  Schema(Schema&&) noexcept;

  Schema& add_string(const std::string& key, const std::string& def, const std::string& help);
  // Numeric keys declare their range; a value outside it is an error naming the key, the value,
  // the range and the source. The default must lie inside it.
  Schema& add_int(const std::string& key, std::int64_t def, IntRange range, const std::string& help);
  Schema& add_float(const std::string& key, double def, FloatRange range, const std::string& help);
  Schema& add_bool(const std::string& key, bool def, const std::string& help);
  // Comma-separated lists ("1,1,1,4"; "" is the empty list): every item is checked as a value of
  // an int or float key with `range` is (junk, nan/inf, range), and an empty item ("8,,8") is
  // refused; an error names the key, the item's position and text, and the source.
  Schema& add_int_list(const std::string& key, const std::string& def, IntRange range, const std::string& help);
  Schema& add_float_list(const std::string& key, const std::string& def, FloatRange range, const std::string& help);
  // A string restricted to `choices`; anything else is an error naming the key.
  Schema& add_choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices,
                     const std::string& help);

  const std::string& app() const { return app_; }
  std::string help_text() const;  // what --help prints: every key, its type, default and help

  struct Key {
    std::string name, type, default_text, help;
    std::vector<std::string> choices;
    std::optional<IntRange> int_range;      // int and int list keys (always set for them)
    std::optional<FloatRange> float_range;  // float and float list keys (always set for them)
    std::string range_text() const;         // "in [1, 64]"; empty for the other types
  };
  const std::vector<Key>& keys() const { return keys_; }
  const Key* find(const std::string& key) const;
  // Up to three keys an unknown `key` may have meant: its own section's first, another
  // section's only where closer than all of those.
  std::vector<std::string> close_spellings(const std::string& key) const;
  boost::program_options::options_description& description() const { return *desc_; }

 private:
  void add(Key key);
  std::string app_, summary_;
  std::vector<Key> keys_;
  std::unique_ptr<boost::program_options::options_description> desc_;
};

class Config {
 public:
  // Parses argv against the schema. Besides the schema's keys it understands --config FILE (any
  // number of times), --help and --print-config (reported by help_requested()/print_config_requested()).
  static Config parse(const Schema& schema, int argc, const char* const* argv);
  // Same, from an INI text (tests, presets) plus optional command-line style overrides.
  static Config parse_ini_text(const Schema& schema, const std::string& ini_text, const std::string& origin,
                               const std::vector<std::string>& overrides = {});
  // An INI text and where it came from (a file name: errors and sources say "origin:line").
  struct IniText {
    std::string text, origin;
  };
  // Same, from several INI texts merged in order (a key in a later one wins over an earlier one).
  static Config parse_ini_texts(const Schema& schema, const std::vector<IniText>& files,
                                const std::vector<std::string>& overrides = {});

  bool help_requested() const { return help_; }
  bool print_config_requested() const { return print_config_; }
  // Writes the --help text or the --print-config INI to `out` when asked for (and `print` is
  // true: typically rank 0 only) and returns true if either was asked for, so every app ends
  // there without running.
  bool answer_help_or_print(std::ostream& out, bool print) const;

  std::string get_string(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  // get_int narrowed to T (int, std::size_t, ...): a value that does not fit T is an error
  // naming the key, the value and its source, never a silent wrap.
  template <class T>
  T get_int_as(const std::string& key) const {
    const std::int64_t v = get_int(key);
    if (!std::in_range<T>(v))
      narrowing_error(key, v, std::to_string(std::numeric_limits<T>::min()),
                      std::to_string(std::numeric_limits<T>::max()));
    return static_cast<T>(v);
  }
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  // A comma-separated list in a string key ("a, b"); items trimmed, empty items and an empty
  // string give nothing.
  std::vector<std::string> get_string_list(const std::string& key) const;
  // The items of an int list or float list key, checked when it was set.
  std::vector<double> get_float_list(const std::string& key) const;
  std::vector<std::int64_t> get_int_list(const std::string& key) const;

  // "default", "FILE:LINE" or "command line".
  std::string source(const std::string& key) const;
  // The effective configuration as INI text, grouped by section, reproducible as --config.
  std::string to_ini() const;
  const Schema& schema() const { return *schema_; }

 private:
  void store(const std::string& key, const std::string& value, const std::string& where);
  void finish();
  [[noreturn]] void narrowing_error(const std::string& key, std::int64_t value, const std::string& min,
                                    const std::string& max) const;
  const Schema* schema_ = nullptr;
  std::shared_ptr<boost::program_options::variables_map> vm_;
  std::map<std::string, std::string> raw_;     // key -> value text as given
  std::map<std::string, std::string> source_;  // key -> where it was set
  bool help_ = false, print_config_ = false;
};

}  // namespace skew

// INI parser: Config::parse_ini_text over a schema with one key of every type. Any skew::Error
// is a clean rejection and must name the origin; anything else escaping is a crash.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/config.hpp"
#include "core/error.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {
const skew::Schema& schema() {
  static const skew::Schema s = [] {
    skew::Schema s("fuzz", "every key type");
    s.add_string("data.train", "", "a path");
    s.add_string("data.list", "1,2,3", "a list");
    s.add_float_list("data.floats", "0.5,2", {-1e6, 1e6}, "a float list in a range");
    s.add_int_list("data.ints", "1,2,3", {0, 1000}, "an int list in a range");
    s.add_int("train.iterations", 10, {1, 1000}, "an int in a range");
    s.add_float("train.lr", 0.1, skew::FloatRange::above(0), "a float in a range");
    s.add_bool("train.verbose", false, "a bool");
    s.add_choice("model.kind", "lr", {"lr", "fm", "ffm"}, "a choice");
    return s;
  }();
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  skew::Config c = [&] {
    try {
      return skew::Config::parse_ini_text(schema(), text, "fuzz.ini");
    } catch (const skew::Error& e) {  // a clean rejection names the file
      FUZZ_ASSERT(std::string(e.what()).find("fuzz.ini") != std::string::npos);
      return skew::Config::parse_ini_text(schema(), "", "empty.ini");
    }
  }();
  // Values that parsed must read back as their type without throwing.
  (void)c.get_string("data.train");
  (void)c.get_int("train.iterations");
  (void)c.get_float("train.lr");
  (void)c.get_bool("train.verbose");
  (void)c.get_string("model.kind");
  FUZZ_ASSERT(!c.source("train.lr").empty());
  // A list key's items were checked as the file was read: each is in its range.
  (void)c.get_string_list("data.list");
  for (const double v : c.get_float_list("data.floats")) FUZZ_ASSERT(v >= -1e6 && v <= 1e6);
  for (const std::int64_t v : c.get_int_list("data.ints")) FUZZ_ASSERT(v >= 0 && v <= 1000);
  // What to_ini prints (--print-config) must parse back to the same values.
  const skew::Config again = skew::Config::parse_ini_text(schema(), c.to_ini(), "again.ini");
  for (const char* key : {"data.train", "data.list", "model.kind"})
    FUZZ_ASSERT(again.get_string(key) == c.get_string(key));
  FUZZ_ASSERT(again.get_int("train.iterations") == c.get_int("train.iterations"));
  const double lr = c.get_float("train.lr"), lr_again = again.get_float("train.lr");
  FUZZ_ASSERT(lr_again == lr || (std::isnan(lr) && std::isnan(lr_again)));
  FUZZ_ASSERT(again.get_bool("train.verbose") == c.get_bool("train.verbose"));
  FUZZ_ASSERT(again.get_float_list("data.floats") == c.get_float_list("data.floats"));
  FUZZ_ASSERT(again.get_int_list("data.ints") == c.get_int_list("data.ints"));
  return 0;
}

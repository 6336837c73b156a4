// The benchmarks' printed tables and machine records (apps/bench/table.hpp, machine.hpp):
// significant digits against the rounding bound, column alignment, /proc parsing and the load
// warning's rule (1-minute load over nproc minus the cores the bench uses).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "apps/bench/machine.hpp"
#include "apps/bench/table.hpp"

using skew::bench::significant;

namespace {

// The significant digits a fixed or scientific text shows (leading zeros excluded, and an
// integer's trailing zeros: "123500" shows 4).
int digits_shown(const std::string& text) {
  std::string mantissa = text.substr(0, text.find('e'));
  if (mantissa.find('.') == std::string::npos)
    while (mantissa.size() > 1 && mantissa.back() == '0') mantissa.pop_back();
  int count = 0;
  bool leading = true;
  for (char c : mantissa) {
    if (c < '0' || c > '9') continue;
    if (c == '0' && leading) continue;
    leading = false;
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("bench: figures to four significant digits, fixed from 1e-3 to 1e6", "[bench]") {
  CHECK(significant(1234.5678) == "1235");
  CHECK(significant(12.345678) == "12.35");
  CHECK(significant(0.0012345678) == "0.001235");
  CHECK(significant(123456.7) == "123500");
  CHECK(significant(9.9996) == "10.00");  // rounding carries into the next power of ten
  CHECK(significant(999999.6) == "1.000e+06");
  CHECK(significant(12345678.9) == "1.235e+07");
  CHECK(significant(0.00012345678) == "1.235e-04");
  CHECK(significant(-0.5) == "-0.5000");
  CHECK(significant(2.0 / 3.0, 3) == "0.667");
  CHECK(significant(0.0) == "0");
  CHECK(significant(std::nan("")) == "nan");
  CHECK(significant(-INFINITY) == "-inf");
}

TEST_CASE("bench: the printed figure is within half a unit of its last digit", "[bench]") {
  std::mt19937_64 rng(34);
  std::uniform_real_distribution<double> mantissa(1.0, 10.0);
  std::uniform_int_distribution<int> exponent(-9, 12);
  for (int i = 0; i < 2000; ++i) {
    const double v = (i % 2 ? -1 : 1) * mantissa(rng) * std::pow(10.0, exponent(rng));
    for (int d : {3, 4}) {
      const std::string text = significant(v, d);
      const double back = std::strtod(text.c_str(), nullptr);
      // Relative error of rounding to d significant digits: at most half of 10^(1-d).
      CHECK(std::abs(back - v) <= 0.5 * std::pow(10.0, 1 - d) * std::abs(v) * (1 + 1e-12));
      CHECK(digits_shown(text) <= d);
      CHECK(text.size() <= 11);  // never a double's 17 digits
    }
  }
}

TEST_CASE("bench: tables align text left and numbers right", "[bench]") {
  skew::bench::TextTable t({"policy", "step ms", "tokens/s"});
  t.row({"static", significant(29.183285572403204), significant(2280.4)});
  t.row({"deepspeed", significant(103.09998887895038), significant(645.99)});
  t.row({"flexmoe", significant(20.85364456165831), significant(31999.2)});
  CHECK(t.text("# ") ==
        "# policy     step ms  tokens/s\n"
        "# static       29.18      2280\n"
        "# deepspeed    103.1     646.0\n"
        "# flexmoe      20.85     32000\n");
  CHECK_THROWS(t.row({"short"}));
}

TEST_CASE("bench: the machine's CPU model and load averages", "[bench]") {
  CHECK(skew::bench::cpu_model_of("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) "
                                  "Platinum 8375C CPU @ 2.90GHz  \nmodel name\t: other\n") ==
        "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz");
  CHECK(skew::bench::cpu_model_of("processor : 0\n") == "unknown");
  skew::bench::Machine m;
  skew::bench::read_load_averages("3.14 2.00 1.50 3/456 7890\n", m);
  CHECK(m.load_1m == 3.14);
  CHECK(m.load_5m == 2.0);
  CHECK(m.load_15m == 1.5);
  m.cpu_model = "Test CPU";
  m.cores = 4;
  CHECK(skew::bench::machine_line(m) == "machine: Test CPU, 4 cores, load 3.14 2.00 1.50 (1, 5, 15 min)");
  const skew::Json j = skew::bench::machine_json(m);
  CHECK(j["cpu_model"] == "Test CPU");
  CHECK(j["cores"] == 4);
  CHECK(j["load_1m"] == 3.14);
  CHECK(j["load_15m"] == 1.5);
}

TEST_CASE("bench: the load warning when the 1-minute load exceeds the cores left free", "[bench]") {
  skew::bench::Machine m;
  m.cores = 4;
  m.load_1m = 2.0;
  CHECK_FALSE(skew::bench::load_warning(m, 2));  // 2 free, load 2: fits
  CHECK(skew::bench::load_warning(m, 3) ==
        "WARNING: load 2.00 over the 1 core(s) this run leaves free (4 cores, 3 used): timings are not comparable");
  m.load_1m = 0.01;
  CHECK(skew::bench::load_warning(m, 8));  // more used than there are: none free
  m.load_1m = 0.0;
  CHECK_FALSE(skew::bench::load_warning(m, 8));
}

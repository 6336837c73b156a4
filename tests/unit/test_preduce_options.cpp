// preduce_train's schema: every numeric key declares its range, bad values are rejected at parse
// time naming the key, and the rules spanning keys (group size against the workers) name them;
// the MNIST CSV reader rejects labels that would size an absurd output layer.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/config.hpp"
#include "lib/core/error.hpp"
#include "lib/preduce/data.hpp"
#include "lib/preduce/options.hpp"

using namespace skew::preduce;

TEST_CASE("preduce schema: out-of-range values are rejected at parse time", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const auto parse = [&](const std::string& arg) {
    return skew::Config::parse_ini_text(schema, "[train]\nsteps = 5\n", "p.ini", {arg});
  };
  for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
           {"--preduce.group_size=1",
            "bad value '1' for key 'preduce.group_size': expected an integer in [2, 1048576]"},
           {"--train.lr=nan", "bad value 'nan' for key 'train.lr': expected a finite number > 0"},
           {"--train.lr=inf", "bad value 'inf' for key 'train.lr'"},
           {"--train.batch=0", "bad value '0' for key 'train.batch'"},
           {"--train.seed=-1", "bad value '-1' for key 'train.seed': expected an integer >= 0"},
           {"--data.rows=0", "bad value '0' for key 'data.rows'"},
           {"--data.classes=1", "bad value '1' for key 'data.classes'"},
           {"--data.rows=4294967297", "bad value '4294967297' for key 'data.rows'"},
           {"--preduce.alpha=0", "bad value '0' for key 'preduce.alpha': expected a finite number in (0, 1]"},
           {"--hetero.jitter_prob=1.5", "bad value '1.5' for key 'hetero.jitter_prob'"},
           {"--sim.workers=0", "bad value '0' for key 'sim.workers'"},
           {"--sim.bandwidth_gbs=0", "bad value '0' for key 'sim.bandwidth_gbs'"},
           {"--train.eval_interval_s=1e-300", "bad value '1e-300' for key 'train.eval_interval_s'"},
       }) {
    INFO(arg);
    CHECK_THROWS_WITH(parse(arg), Catch::Contains("command line: " + message));
  }
  CHECK_THROWS_WITH(skew::Config::parse_ini_text(schema, "[sim]\nworkers = -2\n", "p.ini"),
             Catch::Contains("p.ini:2: bad value '-2' for key 'sim.workers'"));
  CHECK_THROWS_WITH(read_options(parse("--model.hidden=64,0")),
             Catch::Contains("command line: width 0 in key 'model.hidden' is not in [1, 65536]"));
  const TrainOptions o = read_options(parse("--train.seed=9223372036854775807"));
  CHECK(o.seed == 9223372036854775807ull);
}

TEST_CASE("preduce: a group larger than the workers is an error naming the keys", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const TrainOptions o = read_options(skew::Config::parse_ini_text(schema, "", "x", {"--preduce.group_size=5"}));
  CHECK_THROWS_WITH(group_options(o, 4),
             Catch::Contains("preduce.group_size 5 is more than the 4 workers (sim.workers with --simulate"));
  CHECK(group_options(o, 5).group_size == 5);
  CHECK(group_options(o, 1).group_size == 5);  // a lone worker trains alone
  TrainOptions eager = o;
  eager.mode = SyncMode::Eager;  // every worker is invited: the group size does not apply
  CHECK(group_options(eager, 4).group_size == 4);
}

TEST_CASE("MNIST CSV: a label past the class limit names the file and line", "[preduce]") {
  const std::string path = "test_preduce_big_label.csv";
  for (const std::string label : {"2147483647", "65536", "99999999999999999999"}) {
    INFO(label);
    std::ofstream(path) << "1,0.5,0.25\n0,0.1,0.2\n" << label << ",0.3,0.4\n";
    CHECK_THROWS_WITH(load_csv(path, 10),
               Catch::Contains(path + ":3: label " + label + " is out of range [0, 65535]"));
  }
  std::ofstream(path) << "1,0.5,0.25\n65535,0.1,0.2\n";
  CHECK(load_csv(path, 10).classes == 65536);
  std::remove(path.c_str());
}

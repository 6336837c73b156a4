// preduce_train's schema: every numeric key declares its range, bad values are rejected at parse
// time naming the key, and the rules spanning keys (group size against the workers) name them;
// the MNIST CSV reader rejects labels that would size an absurd output layer.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "apps/preduce_train_options.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "lib/preduce/data.hpp"
#include "lib/preduce/sync/sync_mode.hpp"
#include "lib/preduce/task.hpp"

using namespace skew::preduce;

TEST_CASE("preduce schema: out-of-range values are rejected at parse time", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const auto parse = [&](const std::string& arg) {
    return skew::Config::parse_ini_text(schema, "[train]\nsteps = 5\n", "p.ini", {arg});
  };
  for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
           {"--preduce.group_size=-1",
            "bad value '-1' for key 'preduce.group_size': expected an integer in [0, 1048576]"},
           {"--hetero.tail_index=1", "bad value '1' for key 'hetero.tail_index': expected a finite number > 1"},
           {"--hetero.factor=0.5", "bad value '0.5' for key 'hetero.factor'"},
           {"--hetero.model=weibull", "bad value 'weibull' for key 'hetero.model'"},
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
  CHECK_THROWS_WITH(
      read_options(parse("--model.hidden=64,0")),
      Catch::Contains("command line: key 'model.hidden' = '64,0': item 2 of 2 '0' is not an integer in [1, "
                      "65536]"));
  for (const auto& [arg, item] :
       std::vector<std::pair<std::string, std::string>>{{"--hetero.slowdown=1,inf", "'inf'"},
                                                        {"--hetero.slowdown=1,1e300", "'1e300'"},
                                                        {"--hetero.slowdown=1,0.5", "'0.5'"},
                                                        {"--hetero.link_ms=0,inf", "'inf'"},
                                                        {"--hetero.link_ms=0,-1", "'-1'"}}) {
    INFO(arg);
    CHECK_THROWS_WITH(parse(arg), Catch::Contains("command line: key '" + arg.substr(2, arg.find('=') - 2) + "'") &&
                                      Catch::Contains("item 2 of 2 " + item + " is not a finite number"));
  }
  CHECK(read_options(parse("--hetero.slowdown=1, 4")).hetero.slowdown == std::vector<double>{1, 4});
  CHECK_THROWS_WITH(read_options(parse("--preduce.group_size=1")),
                    Catch::Contains("preduce.group_size must be 0 (auto) or >= 2"));
  const TrainOptions o = read_options(parse("--train.seed=9223372036854775807"));
  CHECK(o.seed == 9223372036854775807ull);
}

TEST_CASE("preduce: a group larger than the workers is an error naming the keys", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const TrainOptions o = read_options(skew::Config::parse_ini_text(schema, "", "x", {"--preduce.group_size=5"}));
  const auto preduce = make_sync_mode(o);
  CHECK_THROWS_WITH(preduce->group_options(4),
                    Catch::Contains("preduce.group_size 5 is more than the 4 workers (sim.workers with --simulate"));
  CHECK(preduce->group_options(5).group_size == 5);
  CHECK(preduce->group_options(1).group_size == 5);  // a lone worker trains alone
  TrainOptions eager = o;
  eager.mode = "eager";  // every worker is invited: the group size does not apply
  CHECK(make_sync_mode(eager)->group_options(4).group_size == 4);
  TrainOptions unknown = o;  // only a run built without the schema can name one
  unknown.mode = "gossip";
  CHECK_THROWS_WITH(make_sync_mode(unknown),
                    Catch::Contains("sync.mode: unknown mode 'gossip' (allreduce, preduce, adpsgd, eager, local)"));
}

TEST_CASE("MNIST CSV: classes are the data set's declared 10, a label outside names the file and line", "[preduce]") {
  const std::string path = "test_preduce_big_label.csv";
  for (const std::string label : {"10", "200", "65536", "2147483647", "99999999999999999999"}) {
    INFO(label);
    std::ofstream(path) << "1,0.5,0.25\n0,0.1,0.2\n" << label << ",0.3,0.4\n";
    CHECK_THROWS_WITH(
        load_csv(path, skew::kMnistClasses),
        Catch::Contains(path + ":3: label " + label + " is not among the 10 classes of the data set (labels 0..9)"));
  }
  // Labels 0..3 only: still MNIST's 10 classes (the output layer's width), not 4.
  std::ofstream(path) << "1,0.5,0.25\n3,0.1,0.2\n9,0.1,0.2\n";
  CHECK(load_csv(path, skew::kMnistClasses).classes == 10);
  std::ofstream(path) << "1,0.5,0.25\n3,0.1,0.2\n";
  CHECK(load_csv(path, skew::kMnistClasses).classes == 10);
  std::remove(path.c_str());
}

TEST_CASE("MNIST: a missing file names scripts/fetch_data.sh, the README's command", "[preduce]") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_mnist_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CHECK_THROWS_WITH(skew::load_mnist_csv(dir.string()),
                    Catch::Contains((dir / "train.csv").string() + " does not exist") &&
                        Catch::Contains("scripts/fetch_data.sh mnist"));
  std::ofstream(dir / "train.csv") << "0,0.5\n7,0.25\n";
  CHECK_THROWS_WITH(skew::load_mnist_csv(dir.string()), Catch::Contains((dir / "test.csv").string()));
  std::ofstream(dir / "test.csv") << "9,0.5\n";  // 9: among MNIST's classes, though train has none
  const skew::LabelledSplits mnist = skew::load_mnist_csv(dir.string());
  CHECK(mnist.train.classes == 10);
  CHECK(mnist.test.classes == 10);
  CHECK(mnist.test.y == std::vector<int>{9});
  std::filesystem::remove_all(dir);
}

TEST_CASE("MNIST CSV: a feature that is not a finite float names the file and line", "[preduce]") {
  const std::string path = "test_preduce_nonfinite.csv";
  for (const std::string feature : {"nan", "inf", "-inf", "1e400", "-1e400"}) {
    INFO(feature);
    std::ofstream(path) << "0,0.1,0.2\n1," << feature << ",0.3\n";
    CHECK_THROWS_WITH(load_csv(path, 2), Catch::Contains(path + ":2: field 2 '" + feature + "' is not a finite float"));
  }
  // The largest float and a value that underflows to zero are finite: read, not refused.
  std::ofstream(path) << "0,3.4e38,0.2\n1,1e-50,0.3\n";
  const Dataset d = load_csv(path, 2);
  CHECK(d.x == std::vector<float>{3.4e38f, 0.2f, 0.0f, 0.3f});
  std::remove(path.c_str());
}

TEST_CASE("MNIST CSV: test data is read against the training data's width and classes", "[preduce]") {
  const std::string train_path = "test_preduce_train.csv", test_path = "test_preduce_test.csv";
  std::ofstream(train_path) << "0,0.1,0.2,0.3\n3,0.9,0.1,0.4\n";
  const Dataset train = load_csv(train_path, 4);
  REQUIRE(train.classes == 4);
  std::ofstream(test_path) << "0,0.1,0.2\n";
  CHECK_THROWS_WITH(load_csv(test_path, train),
                    Catch::Contains(test_path + ":1: 2 features, expected 3 (the width of the training data)"));
  std::ofstream(test_path) << "0,0.1,0.2,0.3\n4,0.1,0.2,0.3\n";
  CHECK_THROWS_WITH(load_csv(test_path, train),
                    Catch::Contains(test_path + ":2: label 4 is not among the 4 classes of the training data"));
  // A test file with fewer classes than the training data is scored on the training classes.
  std::ofstream(test_path) << "1,0.5,0.5,0.5\n";
  const Dataset test = load_csv(test_path, train);
  CHECK(test.classes == 4);
  CHECK(test.y == std::vector<int>{1});
  std::remove(train_path.c_str());
  std::remove(test_path.c_str());
}

TEST_CASE("preduce: model.hidden with an empty item is an error naming the key", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const auto hidden_of = [&](const std::string& arg) {
    return read_options(skew::Config::parse_ini_text(schema, "", "x", {arg})).hidden;
  };
  for (const std::string arg :
       {"--model.hidden=8,,8", "--model.hidden=8,", "--model.hidden=,8", "--model.hidden=8, ,8"}) {
    INFO(arg);
    CHECK_THROWS_WITH(hidden_of(arg),
                      Catch::Contains("command line: key 'model.hidden'") && Catch::Contains("is empty"));
  }
  CHECK(hidden_of("--model.hidden=8, 16") == std::vector<int>{8, 16});
  CHECK(hidden_of("--model.hidden=").empty());  // no hidden layer: logistic regression
}

TEST_CASE("preduce: fewer training rows than workers is an error naming the source of the rows", "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const TrainOptions o = read_options(skew::Config::parse_ini_text(schema, "", "x", {"--data.rows=1"}));
  CHECK_THROWS_WITH(make_task(o, 2), Catch::Contains("data.rows = 1 cannot be shared by 2 workers"));
  CHECK(make_task(o, 1) != nullptr);
  const std::string dir = ".";
  std::ofstream("train.csv") << "0,0.1\n1,0.2\n";
  std::ofstream("test.csv") << "1,0.3\n";
  TrainOptions mnist = o;
  mnist.source = "mnist";
  mnist.mnist_dir = dir;
  CHECK_THROWS_WITH(make_task(mnist, 3), Catch::Contains("./train.csv: 2 rows cannot be shared by 3 workers"));
  CHECK(make_task(mnist, 2) != nullptr);
  std::remove("train.csv");
  std::remove("test.csv");
}

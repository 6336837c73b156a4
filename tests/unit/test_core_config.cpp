// Config: precedence defaults < INI file < command line, every error path and its message,
// --help and --print-config.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace {

// Ranges that accept every value of the type: these tests are about parsing, not ranges.
const skew::IntRange kAnyInt{std::numeric_limits<std::int64_t>::min(), skew::kMaxInt64};
const skew::FloatRange kAnyFinite{-HUGE_VAL, HUGE_VAL};

skew::Schema test_schema() {
  skew::Schema s("demo_app", "A demo application for the config tests.");
  s.add_string("data.path", "data/train.txt", "training data file")
      .add_int("train.steps", 100, kAnyInt, "number of optimizer steps")
      .add_float("train.lr", 0.01, kAnyFinite, "learning rate")
      .add_bool("train.shuffle", true, "shuffle every epoch")
      .add_choice("train.device", "cpu", {"cpu", "cuda"}, "where to compute")
      .add_float_list("train.weights", "1,1,1,4", {0, 100}, "per-worker speed weights")
      .add_int_list("train.widths", "8", {1, 64}, "layer widths")
      .add_string("train.names", "a, b", "names")
      .add_string("output.dir", "", "output directory (empty: none)")
      .add_int("seed", 7, kAnyInt, "global seed");
  return s;
}

skew::Config parse_args(const skew::Schema& s, std::vector<std::string> args) {
  args.insert(args.begin(), "demo_app");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return skew::Config::parse(s, static_cast<int>(argv.size()), argv.data());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const skew::Error& e) {
    return e.what();
  }
  return "<no error>";
}

struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& text) : path("/tmp/skew_core_test_" + name) {
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("config: defaults apply when nothing is given", "[config]") {
  const auto s = test_schema();
  const auto c = parse_args(s, {});
  CHECK(c.get_string("data.path") == "data/train.txt");
  CHECK(c.get_int("train.steps") == 100);
  CHECK(c.get_float("train.lr") == Approx(0.01));
  CHECK(c.get_bool("train.shuffle"));
  CHECK(c.get_string("train.device") == "cpu");
  CHECK(c.get_string("output.dir").empty());
  CHECK(c.get_int("seed") == 7);
  CHECK(c.source("train.steps") == "default");
  CHECK_FALSE(c.help_requested());
  CHECK_FALSE(c.print_config_requested());
}

TEST_CASE("config: precedence defaults < file < command line", "[config]") {
  const auto s = test_schema();
  TempFile ini("prec.ini",
               "# comment line\n"
               "seed = 11\n"
               "[train]\n"
               "steps = 200   # trailing comment\n"
               "lr = 0.5\n"
               "device = cuda\n"
               "\n"
               "; another comment\n"
               "[data]\n"
               "path = \"quoted/path.txt\"\n");
  const auto c = parse_args(s, {"--config", ini.path, "--train.steps=300", "--train.shuffle", "false"});
  CHECK(c.get_int("train.steps") == 300);
  CHECK(c.source("train.steps") == "command line");
  CHECK(c.get_float("train.lr") == Approx(0.5));
  CHECK(c.source("train.lr") == ini.path + ":5");
  CHECK(c.get_string("train.device") == "cuda");
  CHECK(c.get_string("data.path") == "quoted/path.txt");
  CHECK(c.get_int("seed") == 11);
  CHECK(c.source("seed") == ini.path + ":2");
  CHECK_FALSE(c.get_bool("train.shuffle"));
  CHECK(c.get_string("output.dir").empty());
  CHECK(c.source("output.dir") == "default");

  // A key given twice on the command line is refused, as one set twice in an INI file is.
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--train.steps=1", "--config", ini.path, "--train.steps", "2"});
             }),
             Catch::Contains("command line: key 'train.steps' is given twice ('1', then '2')"));

  // --config=FILE form, and a bare bool flag meaning true.
  const auto c2 = parse_args(s, {"--train.shuffle", "--config=" + ini.path});
  CHECK(c2.get_bool("train.shuffle"));
  CHECK(c2.get_int("train.steps") == 200);
}

TEST_CASE("config: several --config files merge in order, a later file winning, --print-config names each file",
          "[config]") {
  const auto s = test_schema();
  TempFile a("merge_a.ini", "[train]\nsteps = 10\nlr = 0.5\n[data]\npath = a.txt\n");
  TempFile b("merge_b.ini", "# b\n[train]\nsteps = 20\nshuffle = false\n");
  const auto c = parse_args(s, {"--config", a.path, "--config=" + b.path, "--data.path=cli.txt"});
  CHECK(c.get_int("train.steps") == 20);  // both files: the later one's
  CHECK(c.source("train.steps") == b.path + ":3");
  CHECK(c.get_float("train.lr") == 0.5);  // a.ini alone
  CHECK(c.source("train.lr") == a.path + ":3");
  CHECK_FALSE(c.get_bool("train.shuffle"));       // b.ini alone
  CHECK(c.get_string("data.path") == "cli.txt");  // the command line over both
  CHECK(c.get_int("seed") == 7);
  const std::string printed = c.to_ini();
  CHECK_THAT(printed, Catch::Contains("steps = 20  # from " + b.path + ":3") &&
                          Catch::Contains("lr = 0.5  # from " + a.path + ":3") &&
                          Catch::Contains("shuffle = false  # from " + b.path + ":4") &&
                          Catch::Contains("path = cli.txt  # from command line"));
  // The other order: a.ini's steps win.
  CHECK(parse_args(s, {"--config", b.path, "--config", a.path}).get_int("train.steps") == 10);
  // A bad value in an overridden file is still an error naming its file and line.
  TempFile bad("merge_bad.ini", "[train]\nsteps = x\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", bad.path, "--config", a.path});
             }),
             Catch::Contains(bad.path + ":2: bad value 'x' for key 'train.steps'"));
}

TEST_CASE("config: lists", "[config]") {
  const auto s = test_schema();
  const auto c = parse_args(s, {"--train.weights= 1, 2.5 ,3", "--train.widths=8, 64,1"});
  CHECK(c.get_float_list("train.weights") == std::vector<double>{1, 2.5, 3});
  CHECK(c.get_int_list("train.widths") == std::vector<std::int64_t>{8, 64, 1});
  const auto d = parse_args(s, {"--train.widths="});  // the empty list
  CHECK(d.get_float_list("train.weights") == std::vector<double>{1, 1, 1, 4});
  CHECK(d.get_int_list("train.widths").empty());
  CHECK(d.get_string_list("train.names") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("config: a list's items are checked as the scalar key's values, naming the key and the item", "[config]") {
  const auto s = test_schema();
  for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
           {"--train.weights=1,inf", "item 2 of 2 'inf' is not a finite number in [0, 100]"},
           {"--train.weights=1,nan", "item 2 of 2 'nan' is not a finite number in [0, 100]"},
           {"--train.weights=1,1e300", "item 2 of 2 '1e300' is not a finite number in [0, 100]"},
           {"--train.weights=1,1e400", "item 2 of 2 '1e400' is not a number"},
           {"--train.weights=1,2x", "item 2 of 2 '2x' is not a number"},
           {"--train.weights=-1", "item 1 of 1 '-1' is not a finite number in [0, 100]"},
           {"--train.weights=1,,4", "item 2 of 3 is empty: expected numbers separated by commas"},
           {"--train.weights=1,", "item 2 of 2 is empty"},
           {"--train.widths=8,2.5", "item 2 of 2 '2.5' is not an integer"},
           {"--train.widths=8,65", "item 2 of 2 '65' is not an integer in [1, 64]"},
           {"--train.widths=0x10", "item 1 of 1 '0x10' is not an integer"},
       }) {
    INFO(arg);
    const std::string key = arg.substr(2, arg.find('=') - 2), value = arg.substr(arg.find('=') + 1);
    CHECK_THAT(error_of([&] { parse_args(s, {arg}); }),
               Catch::Contains("command line: key '" + key + "' = '" + value + "': " + message));
  }
  // From a file: the file and line, as for a scalar.
  TempFile ini("lists.ini", "[train]\nwidths = 4\nweights = 1, inf\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", ini.path});
             }),
             Catch::Contains(ini.path + ":3: key 'train.weights' = '1, inf': item 2 of 2 'inf'"));
  // A default is held to the same rules.
  skew::Schema bad("demo_app", "bad default");
  CHECK_THROWS_WITH(bad.add_int_list("x.sizes", "1,0", {1, 8}, "sizes"),
                    Catch::Contains("default '1,0' of key 'x.sizes'") && Catch::Contains("item 2 of 2 '0'"));
}

TEST_CASE("config: unknown key suggests close spellings", "[config]") {
  const auto s = test_schema();
  const std::string cli = error_of([&] { parse_args(s, {"--train.stpes=5"}); });
  CHECK_THAT(cli, Catch::Contains("command line: unknown key 'train.stpes'"));
  CHECK_THAT(cli, Catch::Contains("did you mean 'train.steps'"));
  CHECK_THAT(cli, Catch::Contains("demo_app --help"));

  TempFile ini("unknown.ini", "[train]\nsteps = 3\nshufle = true\n");
  const std::string file = error_of([&] { parse_args(s, {"--config", ini.path}); });
  CHECK_THAT(file, Catch::Contains(ini.path + ":3: unknown key 'train.shufle'"));
  CHECK_THAT(file, Catch::Contains("'train.shuffle'"));

  // Nothing close: no suggestion.
  const std::string far = error_of([&] { parse_args(s, {"--completely.unrelated=1"}); });
  CHECK_THAT(far, Catch::Contains("unknown key 'completely.unrelated'"));
  CHECK_THAT(far, !Catch::Contains("did you mean"));
}

TEST_CASE("config: spelling hints rank the key's own section first", "[config]") {
  skew::Schema s("demo_app", "Sections with near leaves.");
  s.add_int("train.blas_threads", 0, kAnyInt, "BLAS threads")
      .add_int("train.steps", 100, kAnyInt, "steps")
      .add_int("model.heads", 4, kAnyInt, "attention heads")
      .add_int("model.layers", 2, kAnyInt, "layers");
  // "threads" is two edits from model.heads' leaf but lies inside train.blas_threads: the key's
  // own section wins, and the other section's nearer spelling is not offered.
  CHECK(s.close_spellings("train.threads") == std::vector<std::string>{"train.blas_threads"});
  // Another section's key is offered where it is closer than all of the own section's.
  CHECK(s.close_spellings("model.threads") == std::vector<std::string>{"model.heads", "train.blas_threads"});
  CHECK(s.close_spellings("model.steps") == std::vector<std::string>{"train.steps"});
  CHECK(s.close_spellings("train.stpes") == std::vector<std::string>{"train.steps"});
  CHECK(s.close_spellings("optimizer.momentum").empty());
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.threads=2"}); }),
             Catch::Contains("unknown key 'train.threads' (did you mean 'train.blas_threads'?)"));
}

TEST_CASE("config: malformed lines name file and line", "[config]") {
  const auto s = test_schema();
  TempFile no_eq("noeq.ini", "[train]\nsteps 3\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", no_eq.path});
             }),
             Catch::Contains(no_eq.path + ":2: malformed line 'steps 3' (expected key = value)"));
  TempFile bad_section("section.ini", "seed = 1\n[train\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", bad_section.path});
             }),
             Catch::Contains(bad_section.path + ":2: malformed section header '[train'"));
  TempFile empty_key("emptykey.ini", "\n\n = 4\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", empty_key.path});
             }),
             Catch::Contains(empty_key.path + ":3: malformed line '= 4' (empty key)"));
  TempFile open_quote("openquote.ini", "[data]\npath = \"no end\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", open_quote.path});
             }),
             Catch::Contains(open_quote.path + ":2: malformed line 'path = \"no end' (unterminated quoted value)"));
  TempFile after_quote("afterquote.ini", "[data]\npath = \"a\" b\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", after_quote.path});
             }),
             Catch::Contains(after_quote.path + ":2: malformed line"));
  TempFile twice("twice.ini", "[train]\nsteps = 3\nlr = 0.1\nsteps = 4\n");
  CHECK_THAT(
      error_of([&] {
        parse_args(s, {"--config", twice.path});
      }),
      Catch::Contains(twice.path + ":4: key 'train.steps' is set twice in the file (first at " + twice.path + ":2)"));
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", "/nonexistent/dir/x.ini"});
             }),
             Catch::Contains("cannot open config file '/nonexistent/dir/x.ini'"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--config"}); }), Catch::Contains("--config needs a file name"));
  CHECK_THAT(error_of([&] { parse_args(s, {"stray"}); }), Catch::Contains("command line: unexpected argument 'stray'"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.steps"}); }),
             Catch::Contains("command line: key 'train.steps' has no value"));
  // An unknown bare option is a misspelling, not a key that lost its value.
  CHECK_THAT(error_of([&] { parse_args(s, {"--frobnicate"}); }),
             Catch::Contains("command line: unknown key 'frobnicate'"));
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--train.stepz", "3"});
             }),
             Catch::Contains("unknown key 'train.stepz' (did you mean 'train.steps'?)"));
}

TEST_CASE("config: bad values name key, source and what was expected", "[config]") {
  const auto s = test_schema();
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.steps=3.5"}); }),
             Catch::Contains("command line: bad value '3.5' for key 'train.steps': expected an integer"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.steps=99999999999999999999999"}); }),
             Catch::Contains("expected an integer"));
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--train.lr", "fast"});
             }),
             Catch::Contains("command line: bad value 'fast' for key 'train.lr': expected a number"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.shuffle=maybe"}); }),
             Catch::Contains("bad value 'maybe' for key 'train.shuffle': expected true/false"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.device=tpu"}); }),
             Catch::Contains("bad value 'tpu' for key 'train.device': expected one of cpu, cuda"));
  TempFile ini("badvalue.ini", "[train]\n\nlr = 1e-3x\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", ini.path});
             }),
             Catch::Contains(ini.path + ":3: bad value '1e-3x' for key 'train.lr': expected a number"));
  // Accepted spellings of bools and numbers.
  const auto c = parse_args(s, {"--train.shuffle=OFF", "--train.lr=-2.5e-3", "--train.steps=-4"});
  CHECK_FALSE(c.get_bool("train.shuffle"));
  CHECK(c.get_float("train.lr") == Approx(-2.5e-3));
  CHECK(c.get_int("train.steps") == -4);
}

TEST_CASE("config: program errors reading keys", "[config]") {
  const auto s = test_schema();
  const auto c = parse_args(s, {});
  CHECK_THROWS_WITH(c.get_int("train.nothing"), Catch::Contains("config key 'train.nothing' is not in the schema"));
  CHECK_THROWS_WITH(c.get_string("train.steps"), Catch::Contains("'train.steps' is int, read as string"));
  skew::Schema dup("x", "y");
  dup.add_int("a.b", 1, kAnyInt, "h");
  CHECK_THROWS_WITH(dup.add_float("a.b", 1, kAnyFinite, "h"), Catch::Contains("duplicate config key 'a.b'"));
  CHECK_THROWS_WITH(dup.add_choice("a.c", "z", {"x", "y"}, "h"), Catch::Contains("default 'z' of key 'a.c'"));
}

TEST_CASE("config: --help lists every key with its default", "[config]") {
  const auto s = test_schema();
  const auto c = parse_args(s, {"--help", "--train.steps=notanumber"});
  CHECK(c.help_requested());
  const std::string help = s.help_text();
  CHECK_THAT(help, Catch::Contains("usage: demo_app"));
  CHECK_THAT(help, Catch::Contains("A demo application"));
  for (const auto& k : s.keys()) {
    CHECK_THAT(help, Catch::Contains("--" + k.name + " (" + k.type));
    CHECK_THAT(help, Catch::Contains(k.help));
  }
  CHECK_THAT(help, Catch::Contains("--train.steps (int, any, default 100)"));
  CHECK_THAT(help, Catch::Contains("--train.device (choice: cpu|cuda, default cpu)"));
  CHECK_THAT(help, Catch::Contains("--output.dir (string, default \"\")"));
  CHECK_THAT(help, Catch::Contains("[train]"));
  CHECK_THAT(help, Catch::Contains("[general]"));
}

TEST_CASE("config: apps answer --help and --print-config, then stop", "[config]") {
  const auto s = test_schema();
  std::ostringstream help_out, quiet_out, ini_out, run_out;
  CHECK(parse_args(s, {"--help"}).answer_help_or_print(help_out, true));
  CHECK(help_out.str() == s.help_text());
  CHECK(parse_args(s, {"--help"}).answer_help_or_print(quiet_out, false));  // other ranks print nothing
  CHECK(quiet_out.str().empty());
  const auto printing = parse_args(s, {"--print-config", "--train.steps=42"});
  CHECK(printing.answer_help_or_print(ini_out, true));
  CHECK(ini_out.str() == printing.to_ini());
  CHECK_FALSE(parse_args(s, {"--train.steps=42"}).answer_help_or_print(run_out, true));
  CHECK(run_out.str().empty());
}

TEST_CASE("config: --print-config output parses back to the same config", "[config]") {
  const auto s = test_schema();
  TempFile ini("print.ini", "[train]\nlr = 0.25\n");
  const auto c = parse_args(
      s, {"--config", ini.path, "--print-config", "--train.steps=42", "--output.dir=out dir # with hash; and semicolon",
          "--data.path=\"literally quoted\"", "--train.names=  padded "});
  REQUIRE(c.print_config_requested());
  const std::string text = c.to_ini();
  CHECK_THAT(text, Catch::Contains("# effective configuration of demo_app"));
  CHECK_THAT(text, Catch::Contains("steps = 42  # from command line"));
  CHECK_THAT(text, Catch::Contains("# from " + ini.path + ":2"));
  const auto back = skew::Config::parse_ini_text(s, text, "printed.ini");
  for (const auto& k : s.keys()) {
    INFO("key " << k.name);
    if (k.type == "int") CHECK(back.get_int(k.name) == c.get_int(k.name));
    if (k.type == "float") CHECK(back.get_float(k.name) == c.get_float(k.name));
    if (k.type == "bool") CHECK(back.get_bool(k.name) == c.get_bool(k.name));
    if (k.type == "string" || k.type == "choice") CHECK(back.get_string(k.name) == c.get_string(k.name));
  }
  CHECK(back.get_string("output.dir") == "out dir # with hash; and semicolon");
  CHECK(back.get_string("data.path") == "\"literally quoted\"");
  CHECK(back.get_string("train.names") == "  padded ");
  // Printing the re-parsed config gives the same values again (sources differ).
  CHECK(back.to_ini().find("lr = 0.25") != std::string::npos);
}

namespace {

// The same kind of keys with declared ranges: every value outside is an error at parse time.
skew::Schema ranged_schema() {
  skew::Schema s("ranged_app", "Keys with declared ranges.");
  s.add_int("train.epochs", 5, {1, skew::kMaxInt32}, "epochs")
      .add_int("train.threads", 1, {1, 1024}, "worker threads")
      .add_int("train.seed", 1, skew::IntRange::at_least(0), "seed")
      .add_int("train.offset", 0, {std::numeric_limits<std::int64_t>::min(), skew::kMaxInt64}, "anything")
      .add_float("train.lr", 0.1, skew::FloatRange::above(0), "learning rate")
      .add_float("train.smoothing", 0.3, {.min = 0, .max = 1, .max_open = true}, "smoothing in [0, 1)")
      .add_float("train.latency", -1, skew::FloatRange::at_least(-1), "seconds; -1 = measure")
      .add_float("train.shift", 0, {-HUGE_VAL, HUGE_VAL}, "any finite number")
      .add_float("train.cap", HUGE_VAL, {.min = 0, .max = HUGE_VAL, .nonfinite = true}, "inf = no cap");
  return s;
}

}  // namespace

TEST_CASE("config: values outside a key's range name key, value, range and source", "[config]") {
  const auto s = ranged_schema();
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.threads=0"}); }),
             Catch::Contains("command line: bad value '0' for key 'train.threads': expected an integer in [1, 1024]"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.threads=1025"}); }), Catch::Contains("in [1, 1024]"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.epochs=4294967297"}); }),
             Catch::Contains("bad value '4294967297' for key 'train.epochs': expected an integer in [1, 2147483647]"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.seed=-1"}); }),
             Catch::Contains("bad value '-1' for key 'train.seed': expected an integer >= 0"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.lr=0"}); }),
             Catch::Contains("bad value '0' for key 'train.lr': expected a finite number > 0"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.smoothing=1"}); }),
             Catch::Contains("bad value '1' for key 'train.smoothing': expected a finite number in [0, 1)"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.latency=-1.5"}); }),
             Catch::Contains("expected a finite number >= -1"));
  TempFile ini("range.ini", "[train]\nlr = 0.5\n\nthreads = -3   # too few\n");
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", ini.path});
             }),
             Catch::Contains(ini.path + ":4: bad value '-3' for key 'train.threads': expected an integer in [1, "
                                        "1024]"));
  // The command line is checked too when it overrides a good file value, and a good command
  // line value does not hide a bad one in the file.
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", ini.path, "--train.threads=2"});
             }),
             Catch::Contains(ini.path + ":4: bad value '-3'"));
  // Both ends are inclusive unless declared open.
  const auto c = parse_args(s, {"--train.threads=1024", "--train.epochs=2147483647", "--train.smoothing=0",
                                "--train.latency=-1", "--train.lr=1e-300", "--train.offset=-9223372036854775808"});
  CHECK(c.get_int("train.threads") == 1024);
  CHECK(c.get_int("train.epochs") == 2147483647);
  CHECK(c.get_float("train.smoothing") == 0.0);
  CHECK(c.get_float("train.latency") == -1.0);
  CHECK(c.get_int("train.offset") == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("config: nan and inf are rejected unless a range allows them", "[config]") {
  const auto s = ranged_schema();
  for (const std::string v : {"nan", "NaN", "-nan", "inf", "-inf", "infinity"}) {
    INFO(v);
    CHECK_THAT(error_of([&] { parse_args(s, {"--train.lr=" + v}); }),
               Catch::Contains("bad value '" + v + "' for key 'train.lr': expected"));
    CHECK_THAT(error_of([&] { parse_args(s, {"--train.shift=" + v}); }),
               Catch::EndsWith("bad value '" + v + "' for key 'train.shift': expected a finite number"));
  }
  // A key without a declared range still takes finite numbers only.
  const auto legacy = test_schema();
  CHECK_THAT(error_of([&] { parse_args(legacy, {"--train.lr=nan"}); }),
             Catch::Contains("command line: bad value 'nan' for key 'train.lr': expected a finite number"));
  CHECK_THAT(error_of([&] { parse_args(legacy, {"--train.lr=-inf"}); }), Catch::Contains("expected a finite number"));
  // A range that allows them says so.
  CHECK(std::isinf(parse_args(s, {}).get_float("train.cap")));
  CHECK(std::isinf(parse_args(s, {"--train.cap=inf"}).get_float("train.cap")));
  CHECK(parse_args(s, {"--train.cap=2.5"}).get_float("train.cap") == 2.5);
  CHECK_THAT(error_of([&] { parse_args(s, {"--train.cap=-1"}); }),
             Catch::Contains("bad value '-1' for key 'train.cap': expected a number >= 0, nan/inf too"));
}

TEST_CASE("config: a default outside its declared range is a program error", "[config]") {
  skew::Schema s("x", "y");
  CHECK_THROWS_WITH(s.add_int("a.n", 0, {1, 8}, "h"), Catch::Contains("default 0 of key 'a.n' is not in [1, 8]"));
  CHECK_THROWS_WITH(s.add_float("a.x", 0, skew::FloatRange::above(0), "h"),
                    Catch::Contains("default 0 of key 'a.x' is not > 0"));
  CHECK_THROWS_WITH(s.add_float("a.y", NAN, {0, 1}, "h"), Catch::Contains("default nan of key 'a.y'"));
  CHECK_THROWS_WITH(s.add_int("a.m", 3, {4, 2}, "h"), Catch::Contains("key 'a.m'"));
  CHECK(s.keys().empty());
}

TEST_CASE("config: get_int_as narrows with a check naming the key and source", "[config]") {
  const auto s = ranged_schema();
  TempFile ini("narrow.ini", "[train]\noffset = 4294967297\n");
  const auto c = parse_args(s, {"--config", ini.path, "--train.seed=3000000000"});
  CHECK_THAT(error_of([&] { c.get_int_as<int>("train.offset"); }),
             Catch::Contains(ini.path + ":2: value 4294967297 of key 'train.offset' does not fit the range "
                                        "[-2147483648, 2147483647]"));
  CHECK(c.get_int_as<std::int64_t>("train.offset") == 4294967297LL);
  CHECK_THAT(error_of([&] { c.get_int_as<int>("train.seed"); }),
             Catch::Contains("command line: value 3000000000 of key 'train.seed' does not fit"));
  CHECK(c.get_int_as<unsigned>("train.seed") == 3000000000u);
  CHECK(c.get_int_as<std::uint64_t>("train.seed") == 3000000000u);
  const auto neg = parse_args(s, {"--train.offset=-1"});
  CHECK_THAT(error_of([&] { neg.get_int_as<std::size_t>("train.offset"); }),
             Catch::Contains("command line: value -1 of key 'train.offset' does not fit the range [0, "));
  CHECK(neg.get_int_as<int>("train.offset") == -1);
  CHECK(parse_args(s, {}).get_int_as<int>("train.threads") == 1);
}

TEST_CASE("config: --help shows each numeric key's range", "[config]") {
  const std::string help = ranged_schema().help_text();
  CHECK_THAT(help, Catch::Contains("--train.threads (int in [1, 1024], default 1)"));
  CHECK_THAT(help, Catch::Contains("--train.seed (int >= 0, default 1)"));
  CHECK_THAT(help, Catch::Contains("--train.offset (int, any, default 0)"));
  CHECK_THAT(help, Catch::Contains("--train.lr (float > 0, default 0.1)"));
  CHECK_THAT(help, Catch::Contains("--train.smoothing (float in [0, 1), default 0.3)"));
  CHECK_THAT(help, Catch::Contains("--train.latency (float >= -1, default -1)"));
  CHECK_THAT(help, Catch::Contains("--train.shift (float, any finite, default 0)"));
  CHECK_THAT(help, Catch::Contains("--train.cap (float >= 0, nan/inf too, default inf)"));
  // --print-config of a ranged schema parses back (inf included).
  const auto s = ranged_schema();
  const auto c = parse_args(s, {"--train.threads=7"});
  const auto back = skew::Config::parse_ini_text(c.schema(), c.to_ini(), "printed.ini");
  CHECK(back.get_int("train.threads") == 7);
  CHECK(std::isinf(back.get_float("train.cap")));
}

TEST_CASE("config: --config naming a directory or an unreadable file is a clear error", "[config]") {
  const auto s = test_schema();
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", "/tmp"});
             }),
             Catch::Contains("--config '/tmp' is a directory, expected an INI file"));
  CHECK_THAT(error_of([&] { parse_args(s, {"--config=/tmp/"}); }), Catch::Contains("is a directory"));
  CHECK_THAT(error_of([&] {
               parse_args(s, {"--config", "/nonexistent/x.ini"});
             }),
             Catch::Contains("cannot open config file '/nonexistent/x.ini': No such file or directory"));
  TempFile locked("locked.ini", "seed = 3\n");
  std::filesystem::permissions(locked.path, std::filesystem::perms::none);
  if (!std::ifstream(locked.path)) {  // root reads it anyway
    CHECK_THAT(error_of([&] {
                 parse_args(s, {"--config", locked.path});
               }),
               Catch::Contains("cannot open config file '" + locked.path + "': Permission denied"));
  }
}

TEST_CASE("config: a UTF-8 byte order mark at the start of an INI file is skipped", "[config]") {
  const auto s = test_schema();
  TempFile section("bom_section.ini", "\xEF\xBB\xBF[train]\nsteps = 12\n");
  const auto c = parse_args(s, {"--config", section.path});
  CHECK(c.get_int("train.steps") == 12);
  CHECK(c.source("train.steps") == section.path + ":2");
  TempFile key("bom_key.ini", "\xEF\xBB\xBFseed = 9\n");
  CHECK(parse_args(s, {"--config", key.path}).get_int("seed") == 9);
  // Only at the start of the file: elsewhere it is part of the line (here, of the key).
  TempFile later("bom_later.ini", "seed = 9\n\xEF\xBB\xBF[train]\n");
  CHECK_THAT(error_of([&] { parse_args(s, {"--config", later.path}); }), Catch::Contains(later.path + ":2"));
}

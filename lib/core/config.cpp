#include "lib/core/config.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <fstream>
#include <sstream>

#include "lib/core/error.hpp"

namespace po = boost::program_options;

namespace skew {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

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

bool parse_bool_text(const std::string& text, bool* out) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  if (t == "1" || t == "true" || t == "yes" || t == "on") return *out = true, true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return *out = false, true;
  return false;
}

// Quotes a value whose text the INI reader would otherwise alter (surrounding spaces, comment
// markers, a leading quote), so --print-config output parses back to the same value.
std::string ini_value_text(const std::string& v) {
  const bool needs_quotes = !v.empty() && (v != trim(v) || v.find_first_of("#;") != std::string::npos || v.front() == '"');
  return needs_quotes ? "\"" + v + "\"" : v;
}

std::string format_double(double v) {
  std::ostringstream oss;
  oss.precision(10);
  oss << v;
  return oss.str();
}

}  // namespace

Schema::Schema(std::string app, std::string summary)
    : app_(std::move(app)), summary_(std::move(summary)),
      desc_(std::make_unique<po::options_description>()) {}
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
  add({k, "string", d, h, {}});
  return *this;
}
Schema& Schema::add_int(const std::string& k, std::int64_t d, const std::string& h) {
  add({k, "int", std::to_string(d), h, {}});
  return *this;
}
Schema& Schema::add_float(const std::string& k, double d, const std::string& h) {
  add({k, "float", format_double(d), h, {}});
  return *this;
}
Schema& Schema::add_bool(const std::string& k, bool d, const std::string& h) {
  add({k, "bool", d ? "true" : "false", h, {}});
  return *this;
}
Schema& Schema::add_choice(const std::string& k, const std::string& d,
                           const std::vector<std::string>& choices, const std::string& h) {
  SKEW_CHECK(std::find(choices.begin(), choices.end(), d) != choices.end(),
             "default '" << d << "' of key '" << k << "' is not among its choices");
  add({k, "choice", d, h, choices});
  return *this;
}

const Schema::Key* Schema::find(const std::string& key) const {
  for (const auto& k : keys_)
    if (k.name == key) return &k;
  return nullptr;
}

std::vector<std::string> Schema::close_spellings(const std::string& key) const {
  std::vector<std::pair<std::size_t, std::string>> scored;
  const auto leaf = [](const std::string& s) { return s.substr(s.rfind('.') + 1); };
  for (const auto& k : keys_) {
    const std::size_t d = std::min(edit_distance(key, k.name), edit_distance(leaf(key), leaf(k.name)));
    if (d <= std::max<std::size_t>(2, key.size() / 4)) scored.push_back({d, k.name});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::string Schema::help_text() const {
  std::ostringstream os;
  os << "usage: " << app_ << " [--config FILE] [--section.key=value ...] [--print-config] [--help]\n\n"
     << summary_ << "\n\nEvery key can be set in the INI file ([section] then key = value) or on the\n"
     << "command line as --section.key=value; the command line wins over the file, the file over\n"
     << "the default.\n\n";
  std::string section = "\x01";
  for (const auto& k : keys_) {
    const auto dot = k.name.find('.');
    const std::string sec = dot == std::string::npos ? "" : k.name.substr(0, dot);
    if (sec != section) {
      section = sec;
      os << (sec.empty() ? "[general]" : "[" + sec + "]") << "\n";
    }
    os << "  --" << k.name << " (" << k.type;
    if (!k.choices.empty()) {
      os << ": ";
      for (std::size_t i = 0; i < k.choices.size(); ++i) os << (i ? "|" : "") << k.choices[i];
    }
    os << ", default " << (k.default_text.empty() ? "\"\"" : k.default_text) << ")\n      " << k.help << "\n";
  }
  return os.str();
}

void Config::store(const std::string& key, const std::string& value, const std::string& where) {
  const Schema::Key* k = schema_->find(key);
  if (!k) {
    std::ostringstream msg;
    msg << where << ": unknown key '" << key << "'";
    const auto close = schema_->close_spellings(key);
    if (!close.empty()) {
      msg << " (did you mean";
      for (std::size_t i = 0; i < close.size(); ++i) msg << (i ? ", " : " ") << "'" << close[i] << "'";
      msg << "?)";
    }
    msg << "; see " << schema_->app() << " --help";
    throw Error(msg.str());
  }
  const auto bad = [&](const std::string& expected) {
    throw Error(where + ": bad value '" + value + "' for key '" + key + "': expected " + expected);
  };
  if (k->type == "int") {
    try {
      std::size_t pos = 0;
      (void)std::stoll(value, &pos);
      if (pos != value.size()) bad("an integer");
    } catch (const std::logic_error&) { bad("an integer"); }
  } else if (k->type == "float") {
    try {
      std::size_t pos = 0;
      (void)std::stod(value, &pos);
      if (pos != value.size()) bad("a number");
    } catch (const std::logic_error&) { bad("a number"); }
  } else if (k->type == "bool") {
    bool b;
    if (!parse_bool_text(value, &b)) bad("true/false, yes/no, on/off or 1/0");
  } else if (k->type == "choice") {
    if (std::find(k->choices.begin(), k->choices.end(), value) == k->choices.end()) {
      std::string list;
      for (const auto& c : k->choices) list += (list.empty() ? "" : ", ") + c;
      bad("one of " + list);
    }
  }
  // First value stored wins (command line is stored before the file).
  if (source_.count(key)) return;
  po::parsed_options parsed(&schema_->description());
  parsed.options.emplace_back(key, std::vector<std::string>{value});
  po::store(parsed, *vm_);
  raw_[key] = value;
  source_[key] = where;
}

namespace {

struct IniEntry {
  std::string key, value, where;
};

std::vector<IniEntry> read_ini(std::istream& in, const std::string& origin) {
  std::vector<IniEntry> out;
  std::string line, section;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = origin + ":" + std::to_string(lineno);
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t[0] == '[') {
      if (t.back() != ']' || t.size() < 3)
        throw Error(where + ": malformed section header '" + t + "' (expected [name])");
      section = trim(t.substr(1, t.size() - 2));
      continue;
    }
    const auto eq = t.find('=');
    if (eq == std::string::npos)
      throw Error(where + ": malformed line '" + t + "' (expected key = value)");
    std::string key = trim(t.substr(0, eq));
    std::string value = trim(t.substr(eq + 1));
    if (key.empty()) throw Error(where + ": malformed line '" + t + "' (empty key)");
    if (!value.empty() && value.front() == '"') {
      // A quoted value runs to the last quote and is taken verbatim (spaces, '#', ';' and
      // inner quotes included); only a comment may follow it.
      const auto close = value.rfind('"');
      const std::string rest = trim(value.substr(close + 1));
      if (close == 0 || !(rest.empty() || rest[0] == '#' || rest[0] == ';'))
        throw Error(where + ": malformed line '" + t + "' (unterminated quoted value)");
      value = value.substr(1, close - 1);
    } else {
      // Trailing comments after whitespace: "key = 3   # why".
      for (const char* marker : {" #", "\t#", " ;", "\t;"}) {
        const auto c = value.find(marker);
        if (c != std::string::npos) value = trim(value.substr(0, c));
      }
    }
    const std::string full = section.empty() ? key : section + "." + key;
    for (const auto& e : out)
      if (e.key == full) throw Error(where + ": key '" + full + "' is set twice in the file (first at " + e.where + ")");
    out.push_back({full, value, where});
  }
  return out;
}

}  // namespace

Config Config::parse_ini_text(const Schema& schema, const std::string& ini_text,
                              const std::string& origin, const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {schema.app()};
  args.insert(args.end(), overrides.begin(), overrides.end());
  Config c;
  c.schema_ = &schema;
  c.vm_ = std::make_shared<po::variables_map>();
  std::vector<std::pair<std::string, std::string>> cli;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) throw Error("command line: unexpected argument '" + a + "'");
    std::string key = a.substr(2), value;
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      const Schema::Key* k = schema.find(key);
      const bool flag = k && k->type == "bool" &&
                        (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0);
      if (flag) {
        value = "true";
      } else {
        if (i + 1 >= args.size()) throw Error("command line: key '" + key + "' has no value");
        value = args[++i];
      }
    }
    cli.emplace_back(key, value);
  }
  // The first stored value wins, so the command line is stored before the file, and in reverse
  // so that a key given twice takes its last value (appended overrides win, as in most tools).
  for (auto it = cli.rbegin(); it != cli.rend(); ++it) c.store(it->first, it->second, "command line");
  std::istringstream in(ini_text);
  for (const auto& e : read_ini(in, origin)) c.store(e.key, e.value, e.where);
  c.finish();
  return c;
}

Config Config::parse(const Schema& schema, int argc, const char* const* argv) {
  std::vector<std::string> overrides;
  std::string config_file;
  bool help = false, print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--print-config") {
      print = true;
    } else if (a == "--config") {
      if (i + 1 >= argc) throw Error("command line: --config needs a file name");
      config_file = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config_file = a.substr(9);
    } else {
      overrides.push_back(a);
    }
  }
  if (help) {
    Config c;
    c.schema_ = &schema;
    c.vm_ = std::make_shared<po::variables_map>();
    c.help_ = true;
    c.finish();
    return c;
  }
  std::string text;
  if (!config_file.empty()) {
    std::ifstream f(config_file);
    if (!f) throw Error("cannot open config file '" + config_file + "'");
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  Config c = parse_ini_text(schema, text, config_file.empty() ? "<none>" : config_file, overrides);
  c.print_config_ = print;
  return c;
}

void Config::finish() {
  for (const auto& k : schema_->keys()) {
    if (!source_.count(k.name)) {
      raw_[k.name] = k.default_text;
      source_[k.name] = "default";
    }
  }
}

namespace {
const std::string& lookup(const std::map<std::string, std::string>& raw, const Schema& schema,
                          const std::string& key, const char* want) {
  const Schema::Key* k = schema.find(key);
  SKEW_CHECK(k != nullptr, "program error: config key '" << key << "' is not in the schema of " << schema.app());
  const std::string t = k->type == "choice" ? "string" : k->type;
  SKEW_CHECK(t == want, "program error: config key '" << key << "' is " << k->type << ", read as " << want);
  return raw.at(key);
}
}  // namespace

std::string Config::get_string(const std::string& key) const { return lookup(raw_, *schema_, key, "string"); }
std::int64_t Config::get_int(const std::string& key) const { return std::stoll(lookup(raw_, *schema_, key, "int")); }
double Config::get_float(const std::string& key) const { return std::stod(lookup(raw_, *schema_, key, "float")); }
bool Config::get_bool(const std::string& key) const {
  bool b = false;
  parse_bool_text(lookup(raw_, *schema_, key, "bool"), &b);
  return b;
}

std::vector<double> Config::get_float_list(const std::string& key) const {
  std::vector<double> out;
  std::stringstream ss(get_string(key));
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    try {
      std::size_t pos = 0;
      out.push_back(std::stod(item, &pos));
      if (pos != item.size()) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      throw Error(source(key) + ": bad list item '" + item + "' in key '" + key + "': expected numbers separated by commas");
    }
  }
  return out;
}

std::vector<std::int64_t> Config::get_int_list(const std::string& key) const {
  std::vector<std::int64_t> out;
  for (double v : get_float_list(key)) {
    // Range first: casting 1e300 or nan to an integer is undefined behaviour.
    if (!(v >= -0x1p63 && v < 0x1p63) || v != static_cast<double>(static_cast<std::int64_t>(v)))
      throw Error(source(key) + ": list item " + format_double(v) + " in key '" + key + "' is not an integer");
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

bool Config::answer_help_or_print(std::ostream& out, bool print) const {
  if (!help_ && !print_config_) return false;
  if (print) out << (help_ ? schema_->help_text() : to_ini());
  return true;
}

std::string Config::source(const std::string& key) const {
  const auto it = source_.find(key);
  SKEW_CHECK(it != source_.end(), "program error: config key '" << key << "' is not in the schema");
  return it->second;
}

std::string Config::to_ini() const {
  std::ostringstream os;
  os << "# effective configuration of " << schema_->app() << "\n";
  std::string section = "\x01";
  // Keys without a section must precede the first [section] header to stay top-level.
  std::vector<const Schema::Key*> ordered;
  for (const auto& k : schema_->keys())
    if (k.name.find('.') == std::string::npos) ordered.push_back(&k);
  for (const auto& k : schema_->keys())
    if (k.name.find('.') != std::string::npos) ordered.push_back(&k);
  for (const Schema::Key* kp : ordered) {
    const Schema::Key& k = *kp;
    const auto dot = k.name.find('.');
    const std::string sec = dot == std::string::npos ? "" : k.name.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? k.name : k.name.substr(dot + 1);
    if (sec != section) {
      section = sec;
      if (!sec.empty()) os << "\n[" << sec << "]\n";
    }
    const bool commented = source_.at(k.name) != "default";
    // An empty value before the comment is written "", or the comment would be read as the value.
    const std::string& raw = raw_.at(k.name);
    os << leaf << " = " << (raw.empty() && commented ? "\"\"" : ini_value_text(raw));
    if (commented) os << "  # from " << source_.at(k.name);
    os << "\n";
  }
  return os.str();
}

}  // namespace skew

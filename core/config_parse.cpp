// The parsing half of core/config.hpp: the INI file and the command line into a Config,
// validating every value against the schema. Precedence: defaults < INI file < command line.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config.hpp"
#include "core/config_text.hpp"
#include "core/error.hpp"

namespace po = boost::program_options;

namespace skew {

namespace {
[[noreturn]] void throw_unknown_key(const Schema& schema, const std::string& key, const std::string& where) {
  std::ostringstream msg;
  msg << where << ": unknown key '" << key << "'";
  const auto close = schema.close_spellings(key);
  if (!close.empty()) {
    msg << " (did you mean";
    for (std::size_t i = 0; i < close.size(); ++i) msg << (i ? ", " : " ") << "'" << close[i] << "'";
    msg << "?)";
  }
  msg << "; see " << schema.app() << " --help";
  throw Error(msg.str());
}
}  // namespace

namespace config_text {

std::string value_mismatch(const Schema::Key& k, const std::string& text) {
  if (k.type == "int") {
    const auto v = whole_number<std::int64_t>(text);
    if (!v) return "an integer";
    if (!k.int_range->contains(*v)) return "an integer " + k.int_range->text();
  } else if (k.type == "float") {
    const auto v = whole_number<double>(text);
    if (!v) return "a number";
    const FloatRange& r = *k.float_range;
    const std::string range = r.text();
    if (!r.contains(*v))
      return std::string(r.nonfinite ? "a number" : "a finite number") +
             (range.rfind("any", 0) == 0 ? "" : " " + range);
  } else if (k.type == "bool") {
    bool b;
    if (!parse_bool_text(text, &b)) return "true/false, yes/no, on/off or 1/0";
  } else if (k.type == "choice") {
    if (std::find(k.choices.begin(), k.choices.end(), text) == k.choices.end()) {
      std::string list;
      for (const auto& c : k.choices) list += (list.empty() ? "" : ", ") + c;
      return "one of " + list;
    }
  }
  return "";
}

std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  std::stringstream ss(text + ",");  // "1," holds an empty last item, which getline would drop
  for (std::string item; std::getline(ss, item, ',');) out.push_back(trim(item));
  return out;
}

std::string list_mismatch(const Schema::Key& k, const std::string& text) {
  if (k.type != "int list" && k.type != "float list") return "";
  Schema::Key item_key = k;  // each item is checked as a value of the scalar key
  item_key.type = k.type == "int list" ? "int" : "float";
  const std::vector<std::string> items = list_items(text);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string position = "item " + std::to_string(i + 1) + " of " + std::to_string(items.size());
    if (items[i].empty())
      return position + " is empty: expected " + std::string(item_key.type == "int" ? "integers" : "numbers") +
             " separated by commas";
    const std::string expected = value_mismatch(item_key, items[i]);
    if (!expected.empty()) return position + " '" + items[i] + "' is not " + expected;
  }
  return "";
}

}  // namespace config_text

void Config::store(const std::string& key, const std::string& value, const std::string& where) {
  const Schema::Key* k = schema_->find(key);
  if (!k) throw_unknown_key(*schema_, key, where);
  if (const std::string expected = config_text::value_mismatch(*k, value); !expected.empty())
    throw Error(where + ": bad value '" + value + "' for key '" + key + "': expected " + expected);
  if (const std::string problem = config_text::list_mismatch(*k, value); !problem.empty())
    throw Error(where + ": key '" + key + "' = '" + value + "': " + problem);
  // First value stored wins (command line is stored before the file).
  if (source_.count(key)) return;
  po::parsed_options parsed(&schema_->description());
  parsed.options.emplace_back(key, std::vector<std::string>{value});
  po::store(parsed, *vm_);
  raw_[key] = value;
  source_[key] = where;
}

namespace {

using config_text::trim;

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
    // A UTF-8 byte order mark (as some editors write) is not part of the first line.
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t[0] == '[') {
      if (t.back() != ']' || t.size() < 3)
        throw Error(where + ": malformed section header '" + t + "' (expected [name])");
      section = trim(t.substr(1, t.size() - 2));
      continue;
    }
    const auto eq = t.find('=');
    if (eq == std::string::npos) throw Error(where + ": malformed line '" + t + "' (expected key = value)");
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
      if (e.key == full)
        throw Error(where + ": key '" + full + "' is set twice in the file (first at " + e.where + ")");
    out.push_back({full, value, where});
  }
  return out;
}

}  // namespace

Config Config::parse_ini_text(const Schema& schema, const std::string& ini_text, const std::string& origin,
                              const std::vector<std::string>& overrides) {
  return parse_ini_texts(schema, {{ini_text, origin}}, overrides);
}

Config Config::parse_ini_texts(const Schema& schema, const std::vector<IniText>& files,
                               const std::vector<std::string>& overrides) {
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
      // An unknown '--name' is a misspelt option, not a key whose value went missing.
      if (!k) throw_unknown_key(schema, key, "command line");
      const bool flag = k && k->type == "bool" && (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0);
      if (flag) {
        value = "true";
      } else {
        if (i + 1 >= args.size()) throw Error("command line: key '" + key + "' has no value");
        value = args[++i];
      }
    }
    // Which of two values was meant is a guess, as for a key set twice in one INI file.
    for (const auto& [earlier, earlier_value] : cli)
      if (earlier == key)
        throw Error("command line: key '" + key + "' is given twice ('" + earlier_value + "', then '" + value +
                    "'): give it once");
    cli.emplace_back(key, value);
  }
  // The first stored value wins: the command line is stored before the files, and the files
  // from the last to the first, so that a later file's value wins over an earlier one's.
  for (const auto& [key, value] : cli) c.store(key, value, "command line");
  for (auto file = files.rbegin(); file != files.rend(); ++file) {
    std::istringstream in(file->text);
    for (const auto& e : read_ini(in, file->origin)) c.store(e.key, e.value, e.where);
  }
  c.finish();
  return c;
}

namespace {

// The text of the INI file `path` given with --config; errors name it and the OS reason.
std::string read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("command line: --config '" + path + "' is a directory, expected an INI file");
  errno = 0;
  std::ifstream f(path);
  if (!f) throw Error("cannot open config file '" + path + "': " + std::strerror(errno ? errno : ENOENT));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error("cannot read config file '" + path + "': " + std::strerror(errno ? errno : EIO));
  return ss.str();
}

}  // namespace

Config Config::parse(const Schema& schema, int argc, const char* const* argv) {
  std::vector<std::string> overrides, config_files;
  bool help = false, print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--print-config") {
      print = true;
    } else if (a == "--config") {
      if (i + 1 >= argc) throw Error("command line: --config needs a file name");
      config_files.push_back(argv[++i]);
    } else if (a.rfind("--config=", 0) == 0) {
      config_files.push_back(a.substr(9));
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
  std::vector<IniText> files;
  for (const std::string& path : config_files) files.push_back({read_config_file(path), path});
  Config c = parse_ini_texts(schema, files, overrides);
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

}  // namespace skew

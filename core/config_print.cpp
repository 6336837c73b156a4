// The printing half of core/config.hpp: --help (Schema::help_text) and --print-config
// (Config::to_ini, which parses back to the same configuration).
#include <ostream>
#include <sstream>

#include "core/config.hpp"
#include "core/config_text.hpp"

namespace skew {
namespace {

// Quotes a value whose text the INI reader would otherwise alter (surrounding spaces, comment
// markers, a leading quote), so --print-config output parses back to the same value.
std::string ini_value_text(const std::string& v) {
  const bool needs_quotes =
      !v.empty() && (v != config_text::trim(v) || v.find_first_of("#;") != std::string::npos || v.front() == '"');
  return needs_quotes ? "\"" + v + "\"" : v;
}

}  // namespace

std::string Schema::help_text() const {
  std::ostringstream os;
  os << "usage: " << app_ << " [--config FILE ...] [--section.key=value ...] [--print-config] [--help]\n\n"
     << summary_ << "\n\nEvery key can be set in an INI file ([section] then key = value) or on the\n"
     << "command line as --section.key=value (once); the command line wins over the files, a later\n"
     << "--config file over an earlier one, a file over the default.\n\n";
  std::string section = "\x01";
  for (const auto& k : keys_) {
    const auto dot = k.name.find('.');
    const std::string sec = dot == std::string::npos ? "" : k.name.substr(0, dot);
    if (sec != section) {
      section = sec;
      os << (sec.empty() ? "[general]" : "[" + sec + "]") << "\n";
    }
    os << "  --" << k.name << " (" << k.type;
    const std::string range = k.range_text();
    if (!range.empty()) os << (range.rfind("any", 0) == 0 ? ", " : " ") << range;
    if (!k.choices.empty()) {
      os << ": ";
      for (std::size_t i = 0; i < k.choices.size(); ++i) os << (i ? "|" : "") << k.choices[i];
    }
    os << ", default " << (k.default_text.empty() ? "\"\"" : k.default_text) << ")\n      " << k.help << "\n";
  }
  return os.str();
}

bool Config::answer_help_or_print(std::ostream& out, bool print) const {
  if (!help_ && !print_config_) return false;
  if (print) out << (help_ ? schema_->help_text() : to_ini());
  return true;
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

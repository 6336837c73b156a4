#include "core/memory_limits.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace skew {

std::string byte_size(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 6) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

std::int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return std::int64_t(kib) * 1024;
  }
  return -1;
}

void require_memory(const std::string& app, const std::vector<MemoryPart>& parts, const MemoryLimit& limit) {
  double need = 0;
  std::ostringstream list;
  for (const MemoryPart& p : parts) {
    if (&p != &parts.front()) list << " + ";
    list << p.what << " " << byte_size(p.bytes);
    need += p.bytes;
  }
  const double cap = double(limit.cap_mb) * double(1 << 20);
  if (limit.cap_mb > 0 && need > cap)
    SKEW_THROW(app << " needs " << byte_size(need) << " (" << list.str() << ") but " << limit.cap_key << " = "
                   << limit.cap_mb << " allows " << byte_size(cap) << ": " << limit.remedy << ", or raise "
                   << limit.cap_key);
  const std::int64_t available = available_memory_bytes();
  if (available >= 0 && need > double(available))
    SKEW_THROW(app << " needs " << byte_size(need) << " (" << list.str() << ") but only "
                   << byte_size(double(available))
                   << " are available (MemAvailable in /proc/meminfo): " << limit.remedy);
}

}  // namespace skew

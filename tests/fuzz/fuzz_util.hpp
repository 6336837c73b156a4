// Shared by the libFuzzer harnesses: a per-process scratch directory for APIs that take a path,
// and FUZZ_ASSERT for invariants a successful parse must satisfy (a violation aborts, which
// libFuzzer reports as a crash and saves the input).
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#define FUZZ_ASSERT(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace skew::fuzz {

// A directory removed at exit, unique to this process (parallel fuzzing jobs do not collide).
// (Never destroyed: the exit handler that removes it runs after static destructors would.)
inline const std::string& scratch_dir() {
  static const std::string* dir = [] {
    auto* d = new std::string((std::filesystem::temp_directory_path() / "skew_fuzz_XXXXXX").string());
    if (!mkdtemp(d->data())) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) std::abort();
  return path;
}

}  // namespace skew::fuzz

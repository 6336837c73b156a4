// File helpers: a mapped file shows exactly the bytes written (empty and missing files
// included), and the huge-page hint leaves an array's contents alone at any alignment.
// OutputFile: a full disk (/dev/full: ENOSPC on every write) and an unwritable path are errors
// naming the file; an earlier file survives a run that fails before its first write.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "tests/unit/error_message.hpp"

TEST_CASE("MappedFile views the file's bytes, an empty file is an empty view, a missing one names its path") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_fileio_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string bytes;
  for (int i = 0; i < 300000; ++i) bytes += char('a' + i % 26) + std::string(i % 7 == 0 ? "\n" : "");
  skew::write_file_atomic((dir / "f").string(), bytes);
  skew::write_file_atomic((dir / "empty").string(), "");
  {
    const skew::MappedFile f((dir / "f").string());
    CHECK(f.view() == bytes);
    CHECK(skew::MappedFile((dir / "empty").string()).view().empty());
  }
  try {
    skew::MappedFile missing((dir / "missing").string());
    FAIL("no error");
  } catch (const skew::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains((dir / "missing").string()));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("advise_huge_pages keeps contents, for ranges smaller than, unaligned to and spanning 2 MB") {
  std::vector<std::uint32_t> big;
  big.reserve(std::size_t(5) << 20);  // 20 MB, untouched
  skew::advise_huge_pages(big.data(), big.capacity() * sizeof(std::uint32_t));
  for (std::uint32_t i = 0; i < (5u << 20); ++i) big.push_back(i * 2654435761u);
  std::vector<std::uint32_t> small(1000, 7);
  skew::advise_huge_pages(small.data() + 1, 999 * sizeof(std::uint32_t));
  skew::advise_huge_pages(big.data() + 3, 4097);  // advised again after it was written
  for (std::uint32_t i = 0; i < (5u << 20); i += 4099) REQUIRE(big[i] == i * 2654435761u);
  CHECK(big.back() == ((5u << 20) - 1) * 2654435761u);
  for (std::uint32_t v : small) REQUIRE(v == 7u);
}

using skew::test::error_of;
using skew::test::quoted;

namespace {
std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_fileio_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A directory this process cannot create files in: a mode-0555 one, or for root (who ignores
// modes) sysfs, which refuses new files to everyone. Empty when there is none to use.
std::string unwritable_dir(const std::filesystem::path& scratch) {
  if (geteuid() != 0) {
    const auto dir = scratch / "readonly";
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    return dir.string();
  }
  return std::filesystem::is_directory("/sys/kernel") ? "/sys/kernel" : "";
}

bool is_char_device(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}
}  // namespace

TEST_CASE("OutputFile: a full disk (/dev/full) fails the write with an Error naming the file and ENOSPC") {
  REQUIRE(is_char_device("/dev/full"));
  skew::OutputFile out("/dev/full");
  REQUIRE(out.is_open());
  const std::string message = error_of([&] { out.write("a line\n"); });
  CHECK_THAT(message, Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
  CHECK(is_char_device("/dev/full"));
}

TEST_CASE("OutputFile: a missing directory is made, one that cannot be is an Error naming the file") {
  const auto dir = fresh_dir("dirs");
  {
    skew::OutputFile out((dir / "a/b/c.jsonl").string());
    out.write("x\n");
    out.close();
  }
  CHECK(skew::read_file((dir / "a/b/c.jsonl").string()) == "x\n");
  skew::write_file_atomic((dir / "plain").string(), "not a directory");
  const std::string under_file = (dir / "plain/sub/m.jsonl").string();
  CHECK_THAT(error_of([&] { skew::OutputFile out(under_file); }),
             Catch::Contains(quoted(under_file)) && Catch::Contains("Not a directory"));
  const std::string readonly = unwritable_dir(dir);
  if (!readonly.empty()) {
    const std::string path = readonly + "/skew_metrics.jsonl";
    CHECK_THAT(error_of([&] { skew::OutputFile out(path); }), Catch::Contains(quoted(path)));
    CHECK_FALSE(std::filesystem::exists(path));
  }
  CHECK_THAT(error_of([&] { skew::OutputFile out(dir.string()); }), Catch::Contains(quoted(dir.string())));
  if (std::filesystem::exists(dir / "readonly"))
    std::filesystem::permissions(dir / "readonly", std::filesystem::perms::owner_all);
  std::filesystem::remove_all(dir);
}

TEST_CASE("OutputFile: the previous file stays until the first write, and stays when the run fails before it") {
  const auto dir = fresh_dir("keep");
  const std::string path = (dir / "metrics.jsonl").string();
  skew::write_file_atomic(path, "previous run\n");
  SECTION("a run that fails before writing leaves the previous file") {
    try {
      skew::OutputFile out(path);
      CHECK(skew::read_file(path) == "previous run\n");
      throw std::runtime_error("config validation failed");
    } catch (const std::runtime_error&) {
    }
    CHECK(skew::read_file(path) == "previous run\n");
  }
  SECTION("the first write replaces it; a crash after a write loses nothing written") {
    skew::OutputFile out(path);
    out.write("new 1\n");
    CHECK(skew::read_file(path) == "new 1\n");  // in the file, not in a buffer
    out.write("new 2\n");
    CHECK(skew::read_file(path) == "new 1\nnew 2\n");
  }
  SECTION("a run that ends normally without writing leaves an empty file") {
    { skew::OutputFile out(path); }
    CHECK(skew::read_file(path).empty());
  }
  SECTION("a file created by a run that fails before writing is removed") {
    const std::string created = (dir / "new.jsonl").string();
    try {
      skew::OutputFile out(created);
      CHECK(std::filesystem::exists(created));
      throw std::runtime_error("failed");
    } catch (const std::runtime_error&) {
    }
    CHECK_FALSE(std::filesystem::exists(created));
  }
  SECTION("Append mode adds to it") {
    skew::OutputFile out(path, skew::OutputFile::Mode::Append);
    out.write("more\n");
    out.close();
    CHECK(skew::read_file(path) == "previous run\nmore\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("write_file_atomic writes a device in place instead of renaming over its node") {
  skew::write_file_atomic("/dev/null", "discarded\n");
  CHECK(is_char_device("/dev/null"));
  CHECK_THAT(error_of([] { skew::write_file_atomic("/dev/full", "x"); }),
             Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
  CHECK(is_char_device("/dev/full"));
}

TEST_CASE("write_file_atomic of parts writes their concatenation across its 64 MB chunks, replacing the old file") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_fileio_parts_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "model.bin").string();
  skew::write_file_atomic(path, "an older, longer file that must not show through\n");
  // A part longer than a chunk and not a multiple of it, an empty part, and short ones around
  // them: each byte must land at its own offset.
  std::string big(std::size_t(64 << 20) + 4099, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = char((i * 2654435761u) >> 13);
  const std::vector<std::string_view> parts{"header|", big, "", "|tail"};
  skew::write_file_atomic(path, parts);
  const std::string back = skew::read_file(path);
  REQUIRE(back.size() == 7 + big.size() + 5);
  CHECK(back.compare(0, 7, "header|") == 0);
  CHECK(back.compare(7, big.size(), big) == 0);
  CHECK(back.compare(7 + big.size(), 5, "|tail") == 0);
  // Renamed into place: no temporary is left beside it.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  CHECK(names == std::vector<std::string>{"model.bin"});
  std::filesystem::remove_all(dir);
}

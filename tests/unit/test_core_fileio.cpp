// File helpers: a mapped file shows exactly the bytes written (empty and missing files
// included), and the huge-page hint leaves an array's contents alone at any alignment.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"

TEST_CASE("MappedFile views the file's bytes; an empty file is an empty view; a missing one names its path") {
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

// File helpers. Crash-safe writing: write to "<path>.tmp.<pid>", fsync, rename over <path>,
// fsync the directory, so a reader sees either the old file or the complete new one. Reading
// whole files (copied, or mapped for large inputs), and a page-size hint for the large arrays
// parsed out of them.
#pragma once
#include <string>
#include <string_view>

namespace skew {

void write_file_atomic(const std::string& path, std::string_view bytes);
std::string read_file(const std::string& path);
void make_directories(const std::string& path);

// Asks the kernel to back [data, data + bytes) with 2 MB pages where whole ones fit (a hint: a
// kernel without transparent huge pages ignores it). Call it before the memory is first
// written: a large array then costs one page fault per 2 MB instead of one per 4 KB.
void advise_huge_pages(void* data, std::size_t bytes);

// A whole file, read-only, mapped from the page cache instead of copied into a zeroed buffer:
// parsing a large text file then costs no copy and no page faults on a fresh buffer.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view view() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace skew

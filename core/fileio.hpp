// File helpers. Crash-safe writing: write to "<path>.tmp.<pid>", fsync, rename over <path>,
// fsync the directory, so a reader sees either the old file or the complete new one. Large
// files are written straight from the caller's memory, part after part, with the disk's
// writeback started as each 64 MB is handed over, so the final fsync waits for the tail only. Files
// written as a run goes (metrics, curves, traces) through OutputFile, every write checked.
// Reading whole files (copied, or mapped for large inputs), and a page-size hint for the large
// arrays parsed out of them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace skew {

// A path that names a device or a pipe (/dev/stdout) is written in place instead.
void write_file_atomic(const std::string& path, std::string_view bytes);
// The same for a file that is the concatenation of `parts` (a header, then each tensor's bytes),
// none of them copied.
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);
std::string read_file(const std::string& path);
void make_directories(const std::string& path);

// Writes all of `text` to stdout and flushes it; a failed write (a full disk, a closed pipe) is
// an Error naming `what` and the OS reason.
void write_stdout(std::string_view text, const std::string& what);

// A file written as the run goes: metrics lines, curve rows, routing traces.
// - Opened (parent directories made) at construction, so an unwritable path fails before any
//   work is done, with an Error naming the path and the OS reason.
// - In Replace mode an existing file is truncated only at the first write: a run that fails
//   before it has anything to write leaves the previous run's file as it was (and removes the
//   file it created). A run that ends normally without writing leaves the file empty.
// - Every write goes straight to the kernel (no user-space buffer), so a crash loses nothing
//   already written; a failed or short write (full disk: ENOSPC) is an Error naming the file.
class OutputFile {
 public:
  enum class Mode { Replace, Append };
  OutputFile() = default;  // not open: is_open() is false
  explicit OutputFile(const std::string& path, Mode mode = Mode::Replace) { open(path, mode); }
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void open(const std::string& path, Mode mode = Mode::Replace);
  void write(std::string_view bytes);
  void write(const void* data, std::size_t bytes) { write(std::string_view(static_cast<const char*>(data), bytes)); }
  // Closes the file, checking the kernel's last word (some file systems report a failed write
  // only at close). Not open afterwards. The destructor closes too, reporting a failure on
  // stderr only.
  void close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  void release(bool unwinding);
  void close_quietly() noexcept;  // the destructor's close: errors go to stderr

  std::string path_;
  int fd_ = -1;
  Mode mode_ = Mode::Replace;
  bool created_ = false;  // the file did not exist before open()
  bool written_ = false;
  int exceptions_ = 0;  // std::uncaught_exceptions() at open(): more at release = unwinding
};

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

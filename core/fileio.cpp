#include "core/fileio.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.hpp"

namespace skew {

namespace {
// Writes all of `bytes` to `fd`, retrying short and interrupted writes. Returns 0, or the errno
// of the write that failed (EIO when one made no progress), with *done the bytes written.
int write_all(int fd, std::string_view bytes, std::size_t* done) {
  *done = 0;
  while (*done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + *done, bytes.size() - *done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    *done += static_cast<std::size_t>(n);
  }
  return 0;
}
}  // namespace

void make_directories(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) SKEW_THROW("cannot create directory '" << path << "': " << ec.message());
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::vector<std::string_view>{bytes});
}

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or a pipe (/dev/stdout, /dev/null, a FIFO): there is no old file to keep, and a
    // rename would replace the device node itself. Written in place, every write checked.
    OutputFile out(path);
    for (const std::string_view part : parts) out.write(part);
    out.close();
    return;
  }
  const std::filesystem::path target(path);
  if (target.has_parent_path()) make_directories(target.parent_path().string());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SKEW_CHECK(fd >= 0, "cannot create '" << tmp << "': " << std::strerror(errno));
  // A model of a gigabyte or more: written in one go, the page cache fills with dirty pages the
  // disk only starts on when the kernel's thresholds are crossed, and the final fsync then
  // waits for most of the file. Handing each chunk to the disk as soon as it is written
  // overlaps the copy into the page cache with the disk's writing. (A hint: a file system
  // without sync_file_range support ignores it, and the fsync below still makes it durable.)
  constexpr std::size_t kChunk = std::size_t(64) << 20;
  std::size_t offset = 0;
  for (const std::string_view part : parts) {
    for (std::size_t begin = 0; begin < part.size(); begin += kChunk) {
      const std::string_view chunk = part.substr(begin, kChunk);
      std::size_t done = 0;
      if (const int err = write_all(fd, chunk, &done)) {
        ::close(fd);
        ::unlink(tmp.c_str());
        SKEW_THROW("write to '" << tmp << "' failed: " << std::strerror(err) << " (" << offset + done
                                << " bytes written)");
      }
      ::sync_file_range(fd, off_t(offset), off_t(chunk.size()), SYNC_FILE_RANGE_WRITE);
      offset += chunk.size();
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    SKEW_THROW("fsync/close of '" << tmp << "' failed: " << std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    SKEW_THROW("rename '" << tmp << "' -> '" << path << "' failed: " << std::strerror(err));
  }
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_stdout(std::string_view text, const std::string& what) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    const int err = errno;
    std::clearerr(stdout);
    SKEW_THROW("cannot write " << what << " to stdout: " << std::strerror(err));
  }
}

void OutputFile::open(const std::string& path, Mode mode) {
  SKEW_CHECK(fd_ < 0, "OutputFile::open('" << path << "'): '" << path_ << "' is still open");
  const std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) SKEW_THROW("cannot open '" << path << "' for writing: cannot create its directory: " << ec.message());
  }
  const int append = mode == Mode::Append ? O_APPEND : 0;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | append, 0644);
  const bool created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | append);
  if (fd < 0) {
    const int err = errno;
    SKEW_THROW("cannot open '" << path << "' for writing: " << std::strerror(err));
  }
  path_ = path;
  fd_ = fd;
  mode_ = mode;
  created_ = created;
  written_ = false;
  exceptions_ = std::uncaught_exceptions();
}

void OutputFile::write(std::string_view bytes) {
  SKEW_CHECK(fd_ >= 0, "write to an OutputFile that is not open ('" << path_ << "')");
  if (!written_ && mode_ == Mode::Replace && !created_) {
    // The previous contents go now that there is something to replace them with. Devices and
    // pipes (/dev/null, /dev/stdout) have nothing to truncate.
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || (S_ISREG(st.st_mode) && ::ftruncate(fd_, 0) != 0)) {
      const int err = errno;
      SKEW_THROW("cannot truncate '" << path_ << "' for writing: " << std::strerror(err));
    }
  }
  written_ = true;
  std::size_t done = 0;
  if (const int err = write_all(fd_, bytes, &done))
    SKEW_THROW("cannot write to '" << path_ << "': " << std::strerror(err) << " (" << done << " of " << bytes.size()
                                   << " bytes written)");
}

void OutputFile::close() {
  if (fd_ < 0) return;
  release(false);
}

void OutputFile::release(bool unwinding) {
  const int fd = fd_;
  fd_ = -1;
  if (!written_) {
    if (unwinding) {
      // The run failed before it had anything to write: leave what was there before.
      if (created_) ::unlink(path_.c_str());
    } else if (mode_ == Mode::Replace && !created_) {
      // The run ended and wrote nothing: the file says so instead of showing an older run.
      struct stat st {};
      if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
        const int err = errno;
        ::close(fd);
        SKEW_THROW("cannot empty '" << path_ << "' (it still shows an older run): " << std::strerror(err));
      }
    }
  }
  if (::close(fd) != 0 && !unwinding) {
    const int err = errno;
    SKEW_THROW("cannot close '" << path_ << "' (the last writes may be lost): " << std::strerror(err));
  }
}

void OutputFile::close_quietly() noexcept {
  if (fd_ < 0) return;
  try {
    release(std::uncaught_exceptions() > exceptions_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
}

OutputFile::~OutputFile() {
  close_quietly();
}

OutputFile::OutputFile(OutputFile&& other) noexcept {
  *this = std::move(other);
}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    close_quietly();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    mode_ = other.mode_;
    created_ = other.created_;
    written_ = other.written_;
    exceptions_ = other.exceptions_;
  }
  return *this;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SKEW_CHECK(in.good(), "cannot open '" << path << "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void advise_huge_pages(void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  SKEW_CHECK(fd >= 0, "cannot open '" << path << "': " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    SKEW_THROW("cannot stat '" << path << "': " << std::strerror(err));
  }
  size_ = std::size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    const int err = errno;
    ::close(fd);
    SKEW_CHECK(p != MAP_FAILED, "cannot map '" << path << "': " << std::strerror(err));
    data_ = static_cast<const char*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace skew

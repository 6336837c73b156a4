// skew::Error and the check macros used everywhere. Every failure carries what was called,
// the code it returned and where, so a message from rank 3 of 64 is actionable on its own.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace skew {

// what() is the message for the user: what is wrong, naming the key, file:line or rank at fault.
// where() is for developers (the source file:line that raised it and, for a failed check, its
// condition); apps print it after the message only with SKEW_DEBUG=1 in the environment.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  Error(const std::string& what, std::string where) : std::runtime_error(what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// An allocation that failed: what() gives the bytes; allocating() (core/memory_limits.hpp) adds
// the object they were for.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

namespace detail {
// `condition`: the failed check's source text, or null for SKEW_THROW.
[[noreturn]] void throw_error(const char* file, int line, const std::string& what, const char* condition = nullptr);
}  // namespace detail

}  // namespace skew

// SKEW_THROW("bad value " << x): throws skew::Error with that message, file:line as its where().
#define SKEW_THROW(msg)                                               \
  do {                                                                \
    std::ostringstream skew_oss_;                                     \
    skew_oss_ << msg;                                                 \
    ::skew::detail::throw_error(__FILE__, __LINE__, skew_oss_.str()); \
  } while (0)

// SKEW_CHECK(cond, "message " << detail): throws when cond is false; the message alone is what()
// (it must say what is wrong without the condition, which goes to where()).
#define SKEW_CHECK(cond, msg)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::ostringstream skew_oss_;                                            \
      skew_oss_ << msg;                                                        \
      ::skew::detail::throw_error(__FILE__, __LINE__, skew_oss_.str(), #cond); \
    }                                                                          \
  } while (0)

// skew::Error and the check macros used everywhere. Every failure carries what was called,
// the code it returned and where, so a message from rank 3 of 64 is actionable on its own.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace skew {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, const std::string& what);
}  // namespace detail

}  // namespace skew

// SKEW_THROW("bad value " << x): throws skew::Error with file:line appended.
#define SKEW_THROW(msg)                                               \
  do {                                                                \
    std::ostringstream skew_oss_;                                     \
    skew_oss_ << msg;                                                 \
    ::skew::detail::throw_error(__FILE__, __LINE__, skew_oss_.str()); \
  } while (0)

// SKEW_CHECK(cond, "message " << detail): throws when cond is false.
#define SKEW_CHECK(cond, msg)                                    \
  do {                                                           \
    if (!(cond)) SKEW_THROW("check failed: " #cond ": " << msg); \
  } while (0)

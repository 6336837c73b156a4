// What the wide_train end-to-end tests share: running a shell command with Open MPI allowed to
// run as root and to oversubscribe the 2-core test machines.
#pragma once
#include <cstdlib>
#include <string>

namespace skew::test {

inline int run(const std::string& command) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  return std::system(command.c_str());
}

}  // namespace skew::test

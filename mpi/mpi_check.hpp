// SKEW_MPI_CHECK: MPI errors return (communicators use MPI_ERRORS_RETURN) and become
// skew::Error naming the call and MPI's own error string.
#pragma once
#include <mpi.h>

#include <string>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew::comm {
std::string mpi_error_string(int code);
MPI_Datatype mpi_type(DType dtype);
}  // namespace skew::comm

#define SKEW_MPI_CHECK(call)                                                                     \
  do {                                                                                           \
    const int skew_mpi_rc_ = (call);                                                             \
    if (skew_mpi_rc_ != MPI_SUCCESS)                                                             \
      SKEW_THROW("MPI call " #call " failed: " << ::skew::comm::mpi_error_string(skew_mpi_rc_)); \
  } while (0)

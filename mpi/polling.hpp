// Waiting by polling instead of blocking: a blocking MPI call spins a core, and ranks share few
// cores, so the partial-reduce controller and the AD-PSGD threads test and sleep briefly.
#pragma once
#include <mpi.h>

#include <chrono>
#include <thread>

#include "mpi/mpi_check.hpp"

namespace skew::comm {

// The sleep between two tests that found nothing to do.
inline void poll_pause() {
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Calls done() until it returns true, with poll_pause() between calls.
template <class Done>
void poll_until(Done done) {
  while (!done()) poll_pause();
}

inline void wait_polling(MPI_Request& request) {
  poll_until([&] {
    int done = 0;
    SKEW_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
}

inline void wait_all_polling(MPI_Request* requests, int count) {
  poll_until([&] {
    int done = 0;
    SKEW_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    return done != 0;
  });
}

}  // namespace skew::comm

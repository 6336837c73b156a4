// The end of a communication thread (the partial-reduce controller's, AD-PSGD's gossip, an
// overlapped partial reduce's), written once for the destructors of their owners.
#pragma once
#include <exception>
#include <thread>

namespace skew::comm {

// While an exception unwinds, the job is about to be aborted by run_main and joining could wait
// forever for peers: the thread is detached and true returned, so the owner skips its orderly
// stop. False otherwise (nothing done).
inline bool detach_while_unwinding(std::thread& thread) {
  if (std::uncaught_exceptions() == 0) return false;
  if (thread.joinable()) thread.detach();
  return true;
}

}  // namespace skew::comm

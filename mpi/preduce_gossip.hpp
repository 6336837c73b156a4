// AD-PSGD's asynchronous pairwise averaging (Lian et al., ICML 2018) over MPI. Every worker
// runs a communication thread beside its computing thread. The workers are split into a
// bipartite graph: even ranks are active, odd ranks passive. After each local step the computing
// thread asks its active communication thread for one averaging and goes on at once; that thread
// picks a random passive worker, sends it its model, and the passive thread atomically (under the
// model lock) replies with its own model and replaces it with the average. The active side then
// adds half the difference (peer - sent) to its model, so gradient updates applied meanwhile are
// kept. An active only ever contacts a passive and a passive never initiates, so no two averaging
// requests can wait on each other (no deadlock), and the computing thread waits only for the lock
// while a short averaging is applied. Requests that arrive while one is in flight are coalesced.
#pragma once
#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace skew::comm {

class PairwiseGossip {
 public:
  // Collective over `comm` (duplicated here). `model` (n floats) and `version` belong to the
  // caller and are read and written by the communication thread only under lock().
  PairwiseGossip(MPI_Comm comm, float* model, std::size_t n, std::int64_t* version, std::uint64_t seed);
  ~PairwiseGossip();
  PairwiseGossip(const PairwiseGossip&) = delete;
  PairwiseGossip& operator=(const PairwiseGossip&) = delete;

  bool active() const { return rank_ % 2 == 0; }
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(model_mutex_); }
  // Computing thread, after a local step: ask for one averaging (active workers; a no-op on
  // passive ones, which are averaged whenever an active worker picks them).
  void request();
  // Computing thread, when training ends: an active worker finishes its averaging in flight and
  // tells every passive worker; a passive worker serves until every active one has. Then joins.
  void stop();

  std::int64_t averages() const { return averages_; }  // averagings this worker took part in
  double comm_seconds() const { return comm_s_; }      // time its communication thread spent on them

 private:
  void active_loop();
  void passive_loop();
  void average_with(int partner);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 0;
  float* model_;
  std::size_t n_;
  std::int64_t* version_;
  std::uint64_t seed_;
  std::mutex model_mutex_, request_mutex_;
  std::condition_variable request_cv_;
  std::int64_t requested_ = 0;
  bool stopping_ = false;
  std::vector<float> sent_, peer_;
  std::int64_t averages_ = 0;
  double comm_s_ = 0.0;
  std::thread thread_;
};

}  // namespace skew::comm

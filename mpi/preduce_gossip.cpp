#include "mpi/preduce_gossip.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "core/rng.hpp"
#include "core/tensor.hpp"  // mpi_check.hpp names DType
#include "mpi/mpi_check.hpp"
#include "mpi/polling.hpp"
#include "mpi/preduce_thread.hpp"
#include "mpi/runtime.hpp"

namespace skew::comm {
namespace {

constexpr int kPushTag = 1;   // active -> passive: version, then the model (kPushTag + 1)
constexpr int kReplyTag = 3;  // passive -> active: version, then the model (kReplyTag + 1)
constexpr int kByeTag = 5;    // active -> passive: no more averaging requests from this worker

// Runs a communication thread's loop; an error aborts the job (the computing thread would
// otherwise wait on a partner forever).
template <class Loop>
void guarded(Loop loop) {
  try {
    loop();
  } catch (const std::exception& e) {
    abort_job(std::string("adpsgd communication thread: ") + e.what());
  }
}

}  // namespace

PairwiseGossip::PairwiseGossip(MPI_Comm comm, float* model, std::size_t n, std::int64_t* version, std::uint64_t seed)
    : model_(model), n_(n), version_(version), seed_(seed) {
  SKEW_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  SKEW_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  SKEW_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SKEW_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  sent_.resize(n_);
  peer_.resize(n_);
  if (size_ < 2) return;  // nobody to average with
  thread_ = active() ? std::thread([this] { guarded([this] { active_loop(); }); })
                     : std::thread([this] { guarded([this] { passive_loop(); }); });
}

PairwiseGossip::~PairwiseGossip() {
  if (detach_while_unwinding(thread_)) return;
  stop();
  MPI_Comm_free(&comm_);
}

void PairwiseGossip::request() {
  if (!active()) return;
  {
    std::lock_guard<std::mutex> guard(request_mutex_);
    ++requested_;
  }
  request_cv_.notify_one();
}

void PairwiseGossip::stop() {
  {
    std::lock_guard<std::mutex> guard(request_mutex_);
    stopping_ = true;
  }
  request_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void PairwiseGossip::active_loop() {
  const int passives = size_ / 2;  // odd ranks 1, 3, ...
  Rng rng(seed_, 0xad95d000ull + static_cast<std::uint64_t>(rank_));
  std::int64_t served = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> guard(request_mutex_);
      request_cv_.wait(guard, [&] { return requested_ > served || stopping_; });
      if (requested_ == served) break;  // stopping, nothing pending
      served = requested_;              // one averaging answers every request made so far
    }
    average_with(2 * static_cast<int>(rng.below(static_cast<std::uint64_t>(passives))) + 1);
  }
  for (int p = 1; p < size_; p += 2) SKEW_MPI_CHECK(MPI_Send(nullptr, 0, MPI_BYTE, p, kByeTag, comm_));
}

void PairwiseGossip::average_with(int partner) {
  const double start = MPI_Wtime();
  std::int64_t my_version = 0, peer_version = 0;
  {
    auto guard = lock();
    std::copy(model_, model_ + n_, sent_.begin());
    my_version = *version_;
  }
  const int count = static_cast<int>(n_);
  MPI_Request requests[4];
  SKEW_MPI_CHECK(MPI_Irecv(&peer_version, 1, MPI_INT64_T, partner, kReplyTag, comm_, &requests[0]));
  SKEW_MPI_CHECK(MPI_Irecv(peer_.data(), count, MPI_FLOAT, partner, kReplyTag + 1, comm_, &requests[1]));
  SKEW_MPI_CHECK(MPI_Isend(&my_version, 1, MPI_INT64_T, partner, kPushTag, comm_, &requests[2]));
  SKEW_MPI_CHECK(MPI_Isend(sent_.data(), count, MPI_FLOAT, partner, kPushTag + 1, comm_, &requests[3]));
  wait_all_polling(requests, 4);
  {
    // x <- x + (peer - sent) / 2: the average of what was sent and the peer, plus whatever the
    // computing thread applied since.
    auto guard = lock();
    for (std::size_t i = 0; i < n_; ++i) model_[i] += 0.5f * (peer_[i] - sent_[i]);
    *version_ = std::max(*version_, peer_version);
  }
  ++averages_;
  comm_s_ += MPI_Wtime() - start;
}

void PairwiseGossip::passive_loop() {
  const int actives = (size_ + 1) / 2;  // even ranks 0, 2, ...
  const int count = static_cast<int>(n_);
  int goodbyes = 0;
  while (goodbyes < actives) {
    int arrived = 0;
    MPI_Status status;
    SKEW_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &arrived, &status));
    if (!arrived) {
      poll_pause();
      continue;
    }
    const int source = status.MPI_SOURCE;
    if (status.MPI_TAG == kByeTag) {
      SKEW_MPI_CHECK(MPI_Recv(nullptr, 0, MPI_BYTE, source, kByeTag, comm_, MPI_STATUS_IGNORE));
      ++goodbyes;
      continue;
    }
    SKEW_CHECK(status.MPI_TAG == kPushTag,
               "adpsgd: unexpected message tag " << status.MPI_TAG << " from rank " << source);
    const double start = MPI_Wtime();
    std::int64_t peer_version = 0, my_version = 0;
    SKEW_MPI_CHECK(MPI_Recv(&peer_version, 1, MPI_INT64_T, source, kPushTag, comm_, MPI_STATUS_IGNORE));
    MPI_Request receive;
    SKEW_MPI_CHECK(MPI_Irecv(peer_.data(), count, MPI_FLOAT, source, kPushTag + 1, comm_, &receive));
    wait_all_polling(&receive, 1);
    {
      // Atomic for this worker: reply with the model as it was, keep the average.
      auto guard = lock();
      std::copy(model_, model_ + n_, sent_.begin());
      for (std::size_t i = 0; i < n_; ++i) model_[i] = 0.5f * (model_[i] + peer_[i]);
      my_version = *version_;
      *version_ = std::max(*version_, peer_version);
    }
    MPI_Request replies[2];
    SKEW_MPI_CHECK(MPI_Isend(&my_version, 1, MPI_INT64_T, source, kReplyTag, comm_, &replies[0]));
    SKEW_MPI_CHECK(MPI_Isend(sent_.data(), count, MPI_FLOAT, source, kReplyTag + 1, comm_, &replies[1]));
    wait_all_polling(replies, 2);
    ++averages_;
    comm_s_ += MPI_Wtime() - start;
  }
}

}  // namespace skew::comm

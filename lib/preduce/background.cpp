#include "lib/preduce/background.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "mpi/mpi_process_group.hpp"
#include "mpi/preduce_gossip.hpp"
#include "mpi/runtime.hpp"

namespace skew::preduce {
namespace {

class GossipSync : public BackgroundSync {
 public:
  GossipSync(MPI_Comm comm, Worker& me, std::uint64_t seed)
      : gossip_(comm, me.params().data(), me.params().size(), me.mutable_version(), seed) {}
  std::unique_lock<std::mutex> lock() override { return gossip_.lock(); }
  void request() override { gossip_.request(); }
  void stop() override { gossip_.stop(); }
  Stats stats() const override {
    Stats s;
    s.syncs = gossip_.averages();
    s.members = 2 * s.syncs;
    s.comm_s = gossip_.comm_seconds();
    return s;
  }

 private:
  comm::PairwiseGossip gossip_;
};

class OverlappedReduce : public BackgroundSync {
 public:
  OverlappedReduce(comm::PartialReduce& pr, Worker& me, const TrainOptions& opt) : pr_(pr), me_(me), opt_(opt) {
    thread_ = std::thread([this] {
      try {
        loop();
      } catch (const std::exception& e) {
        comm::abort_job(std::string("overlapped partial reduce: ") + e.what());
      }
    });
  }
  ~OverlappedReduce() override {
    if (std::uncaught_exceptions() > 0) {
      // The job is about to be aborted by run_main; joining could wait forever for peers.
      if (thread_.joinable()) thread_.detach();
      return;
    }
    stop();
  }
  std::unique_lock<std::mutex> lock() override { return std::unique_lock<std::mutex>(model_mutex_); }
  void request() override {
    {
      std::lock_guard<std::mutex> guard(request_mutex_);
      ++requested_;
    }
    request_cv_.notify_one();
  }
  void stop() override {
    {
      std::lock_guard<std::mutex> guard(request_mutex_);
      stopping_ = true;
    }
    request_cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  Stats stats() const override { return stats_; }

 private:
  void loop() {
    std::int64_t served = 0;
    std::int64_t refreshes_left = 0;  // rejoins without a new local step (refresh_budget)
    for (;;) {
      bool refreshing = false;
      {
        std::unique_lock<std::mutex> guard(request_mutex_);
        if (refreshes_left == 0) request_cv_.wait(guard, [&] { return requested_ > served || stopping_; });
        if (stopping_) return;
        // A new local step makes this synchronisation that step's, not a refresh.
        refreshing = requested_ == served;
        if (refreshing) ++stats_.refreshes;
        served = requested_;
      }
      std::int64_t sent_version = 0;
      {
        auto guard = lock();
        sent_ = me_.params();
        sent_version = me_.version();
      }
      Timer t;
      const comm::Group g = pr_.ready(sent_version);
      const double wait = t.seconds();
      stats_.wait_s += wait;
      stats_.controller_s += std::max(0.0, wait - pr_.queued_seconds(g));
      t.reset();
      // A slow link (hetero.link_ms) holds back the group it is in.
      sleep_seconds(me_.hetero().link_s());
      result_ = sent_;
      pr_.average_model(result_, g, scratch_);
      stats_.comm_s += t.seconds();
      {
        auto guard = lock();
        auto& x = me_.params();
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += result_[i] - sent_[i];
        // The group's version plus the local steps taken since the snapshot.
        me_.set_version(std::max(me_.version(), g.max_version + me_.version() - sent_version));
      }
      ++stats_.syncs;
      stats_.members += static_cast<std::int64_t>(g.members.size());
      refreshes_left = refreshing ? refreshes_left - 1 : refresh_budget(opt_, g.max_version, sent_version);
    }
  }

  comm::PartialReduce& pr_;
  Worker& me_;
  const TrainOptions& opt_;
  std::mutex model_mutex_, request_mutex_;
  std::condition_variable request_cv_;
  std::int64_t requested_ = 0;
  bool stopping_ = false;
  std::vector<float> sent_, result_, scratch_;
  Stats stats_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<BackgroundSync> make_gossip(const std::shared_ptr<comm::ProcessGroup>& workers, Worker& me,
                                            std::uint64_t seed) {
  const auto* mpi = dynamic_cast<const comm::MpiProcessGroup*>(workers.get());
  SKEW_CHECK(mpi, "sync.mode = adpsgd needs the MPI backend");
  return std::make_unique<GossipSync>(mpi->comm(), me, seed);
}

std::unique_ptr<BackgroundSync> make_overlapped_reduce(comm::PartialReduce& pr, Worker& me, const TrainOptions& opt) {
  return std::make_unique<OverlappedReduce>(pr, me, opt);
}

}  // namespace skew::preduce

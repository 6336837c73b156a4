#include "lib/preduce/background.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "lib/preduce/progress.hpp"
#include "lib/preduce/sync/preduce.hpp"
#include "mpi/mpi_process_group.hpp"
#include "mpi/preduce_controller.hpp"
#include "mpi/preduce_gossip.hpp"
#include "mpi/preduce_thread.hpp"
#include "mpi/runtime.hpp"

namespace skew::preduce {
namespace {

// A communication thread's synchronisation, seen from the computing thread.
class BackgroundSync {
 public:
  virtual ~BackgroundSync() = default;
  // Guards the worker's model and version against the communication thread.
  virtual std::unique_lock<std::mutex> lock() = 0;
  // After a local step: ask for one synchronisation.
  virtual void request() = 0;
  // When training ends: finishes the synchronisation in flight (pending requests are dropped)
  // and joins the thread. Stats are final after this.
  virtual void stop() = 0;
  virtual SyncStats stats() const = 0;
};

// The computing thread's side of a step beside a communication thread.
class BackgroundStep : public StepSync {
 public:
  explicit BackgroundStep(std::unique_ptr<BackgroundSync> sync) : sync_(std::move(sync)) {}
  // The gradient at a snapshot; the communication thread may change the model meanwhile, and the
  // gradient is applied to whatever the model is then.
  double compute(Worker& me) override {
    {
      auto guard = sync_->lock();
      snapshot_ = me.params();
    }
    return me.gradient_at(snapshot_);
  }
  void synchronise(Worker& me, StepRecord& step) override {
    const Timer t;
    {
      auto guard = sync_->lock();
      step.wait = t.seconds();  // the lock is held only while a synchronisation's result is applied
      me.apply_gradient();
    }
    sync_->request();
  }
  std::unique_lock<std::mutex> lock() override { return sync_->lock(); }
  // Its time is off the computing thread's path: comm, controller and the wait for a group are
  // the communication thread's.
  void finish(WorkerProgress& progress) override {
    sync_->stop();
    progress.synced.add(sync_->stats());
  }

 private:
  std::unique_ptr<BackgroundSync> sync_;
  std::vector<float> snapshot_;
};

class GossipSync : public BackgroundSync {
 public:
  GossipSync(MPI_Comm comm, Worker& me, std::uint64_t seed)
      : gossip_(comm, me.params().data(), me.params().size(), me.mutable_version(), seed) {}
  std::unique_lock<std::mutex> lock() override { return gossip_.lock(); }
  void request() override { gossip_.request(); }
  void stop() override { gossip_.stop(); }
  SyncStats stats() const override {
    SyncStats s;
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
    if (comm::detach_while_unwinding(thread_)) return;
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
  SyncStats stats() const override { return stats_; }

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
  SyncStats stats_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<StepSync> gossip_step(const SegmentContext& context, std::uint64_t seed) {
  const auto* mpi = dynamic_cast<const comm::MpiProcessGroup*>(context.workers.get());
  SKEW_CHECK(mpi, "sync.mode = adpsgd needs the MPI backend");
  return std::make_unique<BackgroundStep>(std::make_unique<GossipSync>(mpi->comm(), context.me, seed));
}

std::unique_ptr<StepSync> overlapped_reduce_step(const SegmentContext& context, const TrainOptions& opt) {
  return std::make_unique<BackgroundStep>(std::make_unique<OverlappedReduce>(*context.pr, context.me, opt));
}

}  // namespace skew::preduce

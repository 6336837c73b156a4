#include "mpi/preduce_controller.hpp"

#include <algorithm>
#include <exception>
#include <iostream>

#include "mpi/mpi_check.hpp"
#include "mpi/polling.hpp"
#include "mpi/preduce_thread.hpp"
#include "mpi/runtime.hpp"

namespace skew::comm {
namespace {

constexpr int kReadyTag = 1;  // worker -> controller: {worker, version, kind}
constexpr int kGroupTag =
    2;  // controller -> worker: {k, max_version, full_sync, closed_at, members.., weights.., ready_at..}
constexpr std::int64_t kReady = 0, kFinished = 1;
constexpr int kControllerRank = 0;

}  // namespace

PartialReduce::PartialReduce(std::shared_ptr<ProcessGroup> world, GroupOptions options, bool dedicated_controller,
                             FormerState initial)
    : world_(std::move(world)), options_(options), state_(std::move(initial)) {
  SKEW_CHECK(world_ && world_->backend() == "mpi", "partial reduce needs the MPI world group");
  world_rank_ = world_->rank();
  const int world_size = world_->size();
  if (dedicated_controller) {
    SKEW_CHECK(world_size >= 2, "a dedicated controller rank needs at least 2 ranks, got " << world_size);
    worker_offset_ = 1;
    workers_ = world_->split(world_rank_ == kControllerRank ? -1 : 0, world_rank_);
  } else {
    workers_ = world_;
  }
  options_.num_workers = world_size - worker_offset_;
  SKEW_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control_));
  SKEW_MPI_CHECK(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN));
  GroupFormer check(options_);  // validates the options on every rank, before any thread starts
  world_->barrier();
  start_ = MPI_Wtime();
  if (world_rank_ == kControllerRank && !dedicated_controller) controller_ = std::thread([this] { controller_loop(); });
}

PartialReduce::~PartialReduce() {
  if (detach_while_unwinding(controller_)) return;
  if (is_worker() && !finished_) finish();
  if (controller_.joinable()) controller_.join();
  MPI_Comm_free(&control_);
}

void PartialReduce::serve() {
  SKEW_CHECK(!is_worker() && world_rank_ == kControllerRank, "serve() is for the dedicated controller rank");
  controller_loop();
}

void PartialReduce::controller_loop() {
  try {
    GroupFormer former(options_);
    if (!state_.parent.empty()) former.restore(state_);
    const auto n = static_cast<std::size_t>(options_.num_workers);
    std::vector<double> reply(4 + 3 * n);
    while (!former.all_finished()) {
      int arrived = 0;
      MPI_Status status;
      SKEW_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kReadyTag, control_, &arrived, &status));
      if (arrived) {
        std::int64_t msg[3];
        SKEW_MPI_CHECK(MPI_Recv(msg, 3, MPI_INT64_T, status.MPI_SOURCE, kReadyTag, control_, MPI_STATUS_IGNORE));
        const int worker = static_cast<int>(msg[0]);
        SKEW_CHECK(world_rank_of_worker(worker) == status.MPI_SOURCE,
                   "rank " << status.MPI_SOURCE << " reported as worker " << worker);
        if (msg[2] == kFinished)
          former.finished(worker);
        else
          former.ready(worker, msg[1], now());
      }
      while (auto group = former.poll(now())) {
        const std::size_t k = group->members.size();
        reply[0] = static_cast<double>(k);
        reply[1] = static_cast<double>(group->max_version);
        reply[2] = group->full_sync ? 1.0 : 0.0;
        reply[3] = group->closed_at;
        for (std::size_t j = 0; j < k; ++j) {
          reply[4 + j] = group->members[j];
          reply[4 + k + j] = group->weights[j];
          reply[4 + 2 * k + j] = group->ready_at[j];
        }
        for (int member : group->members)
          SKEW_MPI_CHECK(MPI_Send(reply.data(), static_cast<int>(4 + 3 * k), MPI_DOUBLE, world_rank_of_worker(member),
                                  kGroupTag, control_));
      }
      if (!arrived) poll_pause();
    }
    state_ = former.state();
  } catch (const std::exception& e) {
    abort_job(std::string("partial-reduce controller: ") + e.what());
  }
}

FormerState PartialReduce::controller_state() {
  SKEW_CHECK(world_rank_ == kControllerRank, "the controller state lives on world rank 0");
  SKEW_CHECK(!is_worker() || finished_, "controller_state() before this worker's finish()");
  if (controller_.joinable()) controller_.join();
  return state_;
}

Group PartialReduce::ready(std::int64_t version) {
  SKEW_CHECK(is_worker() && !finished_, "ready() from a rank that is not an active worker");
  std::int64_t msg[3] = {workers_->rank(), version, kReady};
  SKEW_MPI_CHECK(MPI_Send(msg, 3, MPI_INT64_T, kControllerRank, kReadyTag, control_));
  const auto n = static_cast<std::size_t>(options_.num_workers);
  std::vector<double> reply(4 + 3 * n);
  MPI_Request request;
  SKEW_MPI_CHECK(MPI_Irecv(reply.data(), static_cast<int>(reply.size()), MPI_DOUBLE, kControllerRank, kGroupTag,
                           control_, &request));
  wait_polling(request);
  Group g;
  const auto k = static_cast<std::size_t>(reply[0]);
  SKEW_CHECK(k >= 1 && k <= n, "controller sent a group of " << k << " members for " << n << " workers");
  g.max_version = static_cast<std::int64_t>(reply[1]);
  g.full_sync = reply[2] != 0.0;
  g.closed_at = reply[3];
  for (std::size_t j = 0; j < k; ++j) {
    g.members.push_back(static_cast<int>(reply[4 + j]));
    g.weights.push_back(reply[4 + k + j]);
    g.ready_at.push_back(reply[4 + 2 * k + j]);
  }
  return g;
}

void PartialReduce::finish() {
  SKEW_CHECK(is_worker() && !finished_, "finish() twice or from the controller rank");
  std::int64_t msg[3] = {workers_->rank(), 0, kFinished};
  SKEW_MPI_CHECK(MPI_Send(msg, 3, MPI_INT64_T, kControllerRank, kReadyTag, control_));
  finished_ = true;
}

double PartialReduce::queued_seconds(const Group& group) const {
  const auto it = std::find(group.members.begin(), group.members.end(), workers_->rank());
  SKEW_CHECK(it != group.members.end(), "worker " << workers_->rank() << " is not a member of its group");
  return group.closed_at - group.ready_at[static_cast<std::size_t>(it - group.members.begin())];
}

std::shared_ptr<ProcessGroup> PartialReduce::group_comm(const Group& group) {
  return workers_->subgroup(group.members);
}

namespace {
std::size_t own_index(const Group& group, int worker) {
  const auto it = std::find(group.members.begin(), group.members.end(), worker);
  SKEW_CHECK(it != group.members.end(), "worker " << worker << " is not a member of its group");
  return static_cast<std::size_t>(it - group.members.begin());
}
}  // namespace

void PartialReduce::average_model(std::vector<float>& x, const Group& group, std::vector<float>& scratch) {
  const std::size_t k = group.members.size();
  if (k <= 1) return;
  const double w = group.weights[own_index(group, workers_->rank())];
  scratch.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) scratch[i] = static_cast<float>(w * x[i]);
  group_comm(group)->allreduce(view(scratch), ReduceOp::Sum);
  apply_member_update(x.data(), scratch.data(), x.size(), w, static_cast<int>(k), options_.member_rule);
}

void PartialReduce::average_gradient(std::vector<float>& g, const Group& group) {
  if (group.members.size() <= 1) return;
  const double w = group.weights[own_index(group, workers_->rank())];
  for (float& v : g) v = static_cast<float>(w * v);
  group_comm(group)->allreduce(view(g), ReduceOp::Sum);
}

}  // namespace skew::comm

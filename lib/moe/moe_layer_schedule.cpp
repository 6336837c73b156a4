// MoeLayer's FasterMoE smart schedule (smart_schedule.hpp): the token exchange in pairwise
// stages, each stage's exchange posted before the previous stage's rows are computed.
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/row_permute.hpp"
#include "lib/moe/smart_schedule.hpp"

namespace skew::moe {

namespace {
// MPI moves a large message only while some MPI call runs on this rank (no progress thread), so
// the compute loops poll the exchanges in flight between experts.
void poll(const std::unique_ptr<comm::Work>& next, const std::vector<std::unique_ptr<comm::Work>>& returns) {
  if (next) next->test();
  if (!returns.empty() && returns.back()) returns.back()->test();
}

void wait_all(std::vector<std::unique_ptr<comm::Work>>& works) {
  for (auto& w : works)
    if (w) w->wait();
  works.clear();
}
}  // namespace

template <class T>
std::vector<typename MoeLayer<T>::ExpertRows> MoeLayer<T>::expert_rows_of(int source, std::int64_t begin,
                                                                          std::int64_t end) const {
  const int E = opt_.gate.num_experts;
  std::int64_t source_first = 0;  // the source's first row in the receive buffer
  for (int r = 0; r < source; ++r) source_first += static_cast<std::int64_t>(recv_rows_[static_cast<std::size_t>(r)]);
  std::vector<ExpertRows> out;
  // The source's rows come expert by expert in ascending order, as local_experts_ is.
  std::int64_t first = source_first;
  for (std::size_t j = 0; j < local_experts_.size(); ++j) {
    const int e = local_experts_[j];
    const std::int64_t rows = recv_expert_rows_[static_cast<std::size_t>(source) * E + e];
    const std::int64_t lo = std::max(begin, first), hi = std::min(end, first + rows);
    // A source's rows of one expert sit together in the expert-contiguous buffers (stable order),
    // after the expert's rows from lower sources: their place is known from the counts on the
    // host, whatever device local_pos_ is on (route() places them so).
    std::int64_t xe_first = local_offset_[j];
    for (int r = 0; r < source; ++r) xe_first += recv_expert_rows_[static_cast<std::size_t>(r) * E + e];
    if (lo < hi) out.push_back({static_cast<int>(j), xe_first + (lo - first), hi - lo});
    first += rows;
  }
  return out;
}

template <class T>
void MoeLayer<T>::forward_pipelined(const DeviceArray<T>& send, DeviceArray<T>& recv, DeviceArray<T>& ye) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const Device device = opt_.device;
  const std::vector<ScheduleStage> stages =
      pairwise_stages(world_.rank(), opt_.schedule_chunks, send_rows_, recv_rows_);
  Timer timer;
  std::unique_ptr<comm::Work> next =
      post_stage(world_, stages[0], Direction::Dispatch, send.data(), recv.data(), D, device);
  std::vector<std::unique_ptr<comm::Work>> returns;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const ScheduleStage& stage = stages[i];
    std::unique_ptr<comm::Work> current = std::move(next);
    if (i + 1 < stages.size())
      next = post_stage(world_, stages[i + 1], Direction::Dispatch, send.data(), recv.data(), D, device);
    if (current) current->wait();
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    const auto lo = static_cast<std::size_t>(stage.recv.begin), rows = static_cast<std::size_t>(stage.recv.rows());
    scatter_rows_at(recv.data() + lo * D, local_pos_.data() + lo, rows, D, xe_.data(), device);
    for (const ExpertRows& part : expert_rows_of(stage.recv_peer, stage.recv.begin, stage.recv.end)) {
      const std::int64_t o = part.xe_begin;
      experts_forward(one_expert(local_experts_[static_cast<std::size_t>(part.local)], part.rows), xe_.data() + o * D,
                      hpre_.data() + o * F, h_.data() + o * F, ye.data() + o * D);
      poll(next, returns);
    }
    gather_rows_from(ye.data(), local_pos_.data() + lo, rows, D, recv.data() + lo * D, device);
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    returns.push_back(post_stage(world_, stage, Direction::Return, recv.data(), back_.data(), D, device));
  }
  wait_all(returns);
  times_.alltoall += timer.seconds();
}

template <class T>
void MoeLayer<T>::backward_pipelined(const DeviceArray<T>& dsend, DeviceArray<T>& dback, DeviceArray<T>& dye,
                                     DeviceArray<T>& dhpre) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const Device device = opt_.device;
  const std::vector<ScheduleStage> stages =
      pairwise_stages(world_.rank(), opt_.schedule_chunks, send_rows_, recv_rows_);
  // Gradients arrive into drecv and leave from it, overwritten in place by each stage's dx.
  drecv_.resize(xe_.size());
  dxe_.resize(xe_.size());
  T* drecv = drecv_.data();
  T* dxe = dxe_.data();
  Timer timer;
  std::unique_ptr<comm::Work> next = post_stage(world_, stages[0], Direction::Dispatch, dsend.data(), drecv, D, device);
  std::vector<std::unique_ptr<comm::Work>> returns;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const ScheduleStage& stage = stages[i];
    std::unique_ptr<comm::Work> current = std::move(next);
    if (i + 1 < stages.size())
      next = post_stage(world_, stages[i + 1], Direction::Dispatch, dsend.data(), drecv, D, device);
    if (current) current->wait();
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    const auto lo = static_cast<std::size_t>(stage.recv.begin), rows = static_cast<std::size_t>(stage.recv.rows());
    scatter_rows_at(drecv + lo * D, local_pos_.data() + lo, rows, D, dye.data(), device);
    for (const ExpertRows& part : expert_rows_of(stage.recv_peer, stage.recv.begin, stage.recv.end)) {
      const std::int64_t o = part.xe_begin;
      experts_backward_rows(one_expert(local_experts_[static_cast<std::size_t>(part.local)], part.rows),
                            hpre_.data() + o * F, dye.data() + o * D, dhpre.data() + o * F, dxe + o * D);
      poll(next, returns);
    }
    gather_rows_from(dxe, local_pos_.data() + lo, rows, D, drecv + lo * D, device);
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    returns.push_back(post_stage(world_, stage, Direction::Return, drecv, dback.data(), D, device));
  }
  // The parameter gradients need every row of an expert, so they run once all stages have
  // arrived, while the last returns are in flight.
  timer.reset();
  const double cpu = thread_cpu_seconds();
  for (std::size_t j = 0; j < local_experts_.size(); ++j) {
    const std::int64_t o = local_offset_[j];
    experts_weight_grads(one_expert(local_experts_[j], local_offset_[j + 1] - o), xe_.data() + o * D, h_.data() + o * F,
                         dye.data() + o * D, dhpre.data() + o * F);
    poll(nullptr, returns);
  }
  times_.expert += timer.seconds();
  times_.expert_cpu += thread_cpu_seconds() - cpu;
  timer.reset();
  wait_all(returns);
  times_.alltoall += timer.seconds();
}

template void MoeLayer<float>::forward_pipelined(const DeviceArray<float>&, DeviceArray<float>&, DeviceArray<float>&);
template void MoeLayer<double>::forward_pipelined(const DeviceArray<double>&, DeviceArray<double>&,
                                                  DeviceArray<double>&);
template void MoeLayer<float>::backward_pipelined(const DeviceArray<float>&, DeviceArray<float>&, DeviceArray<float>&,
                                                  DeviceArray<float>&);
template void MoeLayer<double>::backward_pipelined(const DeviceArray<double>&, DeviceArray<double>&,
                                                   DeviceArray<double>&, DeviceArray<double>&);

}  // namespace skew::moe

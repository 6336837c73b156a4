#include "lib/moe/smart_schedule.hpp"

#include <algorithm>

#include "core/device_array.hpp"
#include "core/error.hpp"

namespace skew::moe {

namespace {
// Tags of the stages' messages. One tag per direction is enough: MPI matches messages between two
// ranks in the order they were posted, and every rank posts its stages in the same order.
constexpr int kDispatchTag = 8700, kReturnTag = 8701;

RowRange slice(std::int64_t first_row, std::size_t rows, int chunk, int chunks) {
  const auto r = static_cast<std::int64_t>(rows);
  return {first_row + r * chunk / chunks, first_row + r * (chunk + 1) / chunks};
}

std::vector<std::int64_t> first_rows(const std::vector<std::size_t>& rows) {
  std::vector<std::int64_t> first(rows.size(), 0);
  for (std::size_t r = 1; r < rows.size(); ++r) first[r] = first[r - 1] + static_cast<std::int64_t>(rows[r - 1]);
  return first;
}
}  // namespace

std::vector<ScheduleStage> pairwise_stages(int rank, int chunks, const std::vector<std::size_t>& send_rows,
                                           const std::vector<std::size_t>& recv_rows) {
  const int N = static_cast<int>(send_rows.size());
  SKEW_CHECK(chunks >= 1, "smart schedule: " << chunks << " chunks per peer, need at least 1");
  SKEW_CHECK(
      recv_rows.size() == send_rows.size() && rank >= 0 && rank < N,
      "smart schedule: rank " << rank << " with row counts for " << N << " and " << recv_rows.size() << " peers");
  const std::vector<std::int64_t> send_first = first_rows(send_rows), recv_first = first_rows(recv_rows);
  std::vector<ScheduleStage> stages;
  for (int s = 0; s < N; ++s) {
    const int to = (rank + s) % N, from = (rank - s + N) % N;
    for (int c = 0; c < chunks; ++c)
      stages.push_back(
          {to, from,
           slice(send_first[static_cast<std::size_t>(to)], send_rows[static_cast<std::size_t>(to)], c, chunks),
           slice(recv_first[static_cast<std::size_t>(from)], recv_rows[static_cast<std::size_t>(from)], c, chunks)});
  }
  return stages;
}

template <class T>
std::unique_ptr<comm::Work> post_stage(comm::ProcessGroup& world, const ScheduleStage& stage, Direction direction,
                                       const T* from, T* to, int width, Device device) {
  const bool dispatch = direction == Direction::Dispatch;
  const RowRange out = dispatch ? stage.send : stage.recv, in = dispatch ? stage.recv : stage.send;
  const int out_peer = dispatch ? stage.send_peer : stage.recv_peer,
            in_peer = dispatch ? stage.recv_peer : stage.send_peer;
  const auto w = static_cast<std::int64_t>(width);
  if (out_peer == world.rank()) {
    SKEW_CHECK(out.rows() == in.rows(), "smart schedule: rank " << world.rank() << " sends itself " << out.rows()
                                                                << " rows but expects " << in.rows());
    if (out.rows() > 0)
      copy_bytes(to + in.begin * w, device, from + out.begin * w, device,
                 static_cast<std::size_t>(out.rows() * w) * sizeof(T));
    return nullptr;
  }
  const int tag = dispatch ? kDispatchTag : kReturnTag;
  std::vector<comm::P2POp> ops;
  if (out.rows() > 0)
    ops.push_back(comm::send_op(
        comm::view(const_cast<T*>(from) + out.begin * w, static_cast<std::size_t>(out.rows() * w), device), out_peer,
        tag));
  if (in.rows() > 0)
    ops.push_back(
        comm::recv_op(comm::view(to + in.begin * w, static_cast<std::size_t>(in.rows() * w), device), in_peer, tag));
  if (ops.empty()) return nullptr;
  return world.batch_isend_irecv(ops);
}

template std::unique_ptr<comm::Work> post_stage<float>(comm::ProcessGroup&, const ScheduleStage&, Direction,
                                                       const float*, float*, int, Device);
template std::unique_ptr<comm::Work> post_stage<double>(comm::ProcessGroup&, const ScheduleStage&, Direction,
                                                        const double*, double*, int, Device);

}  // namespace skew::moe

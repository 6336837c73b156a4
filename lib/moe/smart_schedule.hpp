// FasterMoE's smart schedule (He et al., PPoPP 2022, Section 4) for the MoE layer's token
// exchange: instead of one all-to-all followed by the expert compute, the exchange runs as
// pairwise stages - in stage s every rank sends to rank + s and receives from rank - s (mod N),
// s = 0 being its own rows - and each peer's rows are cut into `chunks` consecutive slices, one
// stage each. The layer posts the exchange of stage i + 1 before it computes the rows of stage
// i, and the return of stage i's results overlaps the compute of stage i + 1 (moe_layer_schedule.cpp).
// Every stage moves the rows the all-to-all would have moved, so the numbers do not change.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mpi/process_group.hpp"

namespace skew::moe {

// Rows [begin, end) of a buffer packed in rank order.
struct RowRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t rows() const { return end - begin; }
};

// One stage: this rank's rows to `send_peer` (in the send-side buffer) and from `recv_peer` (in
// the receive-side buffer). The return exchange runs the same stage backwards.
struct ScheduleStage {
  int send_peer = 0, recv_peer = 0;
  RowRange send, recv;
};

// The N * chunks stages of `rank` in order: peer offsets s = 0 .. N-1, each split into `chunks`
// slices of near-equal size (slice c of R rows: [c R / chunks, (c + 1) R / chunks)); rank r's
// stage i sends what rank r + s receives in its stage i. send_rows / recv_rows: rows per peer.
std::vector<ScheduleStage> pairwise_stages(int rank, int chunks, const std::vector<std::size_t>& send_rows,
                                           const std::vector<std::size_t>& recv_rows);

enum class Direction {
  Dispatch,  // send-side rows to send_peer, receive-side rows from recv_peer
  Return,    // receive-side rows back to recv_peer, send-side rows from send_peer
};

// Starts one stage's exchange of rows `width` elements wide, from buffer `from` into `to`, both
// on `device`: Dispatch sends from's `send` rows and receives into to's `recv` rows, Return the
// other way round. One batched isend/irecv of the legs that have rows; the rank's own stage
// (peer == rank) is copied at once. Returns the pending Work, or null when nothing is in flight.
template <class T>
std::unique_ptr<comm::Work> post_stage(comm::ProcessGroup& world, const ScheduleStage& stage, Direction direction,
                                       const T* from, T* to, int width, Device device);

}  // namespace skew::moe

// apply_placement: checks that all ranks hold the same placements (before anything moves, so
// a disagreement throws on every rank instead of deadlocking), then realises the new placement
// by copying expert state point-to-point from an existing replica to each new one and freeing
// dropped replicas. The state may be host or device tensors: the group routes them (a hybrid
// group sends device tensors with NCCL send/recv), as long as every rank's are on one device.
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "lib/placement/cost_model.hpp"
#include "lib/placement/policy.hpp"
#include "mpi/process_group.hpp"

namespace skew::placement {

namespace {

// Messages between one pair of ranks match in posting order (MPI's non-overtaking rule), and
// both sides post in the same order, so a tag that wraps below the guaranteed MPI_TAG_UB is safe.
constexpr int kTagBase = 7000;
constexpr int kTagSpan = 20000;

std::string placement_text(const std::vector<LayerPlacement>& layers) {
  std::ostringstream text;
  for (std::size_t l = 0; l < layers.size(); ++l) text << "L" << l << " " << layers[l].to_string() << "\n";
  return text.str();
}

// Every rank must hold the same before/after placements: the transfers are derived from them,
// so a rank that disagrees would otherwise wait forever for a message nobody sends.
void check_agreement(comm::ProcessGroup& world, const std::vector<LayerPlacement>& before,
                     const std::vector<LayerPlacement>& after) {
  const std::string text = placement_text(before).append("->\n").append(placement_text(after));
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(std::hash<std::string>{}(text)),
                                 static_cast<std::int64_t>(text.size())};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(mine), comm::view(all));
  for (int r = 0; r < world.size(); ++r)
    SKEW_CHECK(all[2 * static_cast<std::size_t>(r)] == all[0] && all[2 * static_cast<std::size_t>(r) + 1] == all[1],
               "placement disagreement: rank " << r << " holds a different placement than rank 0 (this is rank "
                                               << world.rank() << ", placement text " << text.size() << " bytes)");
}

// A sender's and its receiver's tensors must be on the same device: a hybrid group would carry
// one over MPI and the other over NCCL, and both would wait forever. Checked on every rank before
// anything is posted, so a mismatch throws everywhere.
std::string devices_text(std::int64_t mask) {
  std::string text;
  for (const Device d : {Device::Host, Device::Cuda})
    if (mask & (std::int64_t{1} << static_cast<int>(d)))
      text += (text.empty() ? "" : " and ") + std::string(device_name(d));
  return text;
}

void check_state_devices(comm::ProcessGroup& world, const std::vector<comm::P2POp>& transfers) {
  std::int64_t mine = 0;  // bit d: a tensor on Device d
  for (const auto& t : transfers) mine |= std::int64_t{1} << static_cast<int>(t.buf.device);
  std::vector<std::int64_t> all(static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(&mine, 1), comm::view(all));
  int first = -1;  // the first rank that moves state
  for (int r = 0; r < world.size(); ++r) {
    const std::int64_t m = all[static_cast<std::size_t>(r)];
    if (m == 0) continue;
    if (first < 0) first = r;
    const std::int64_t f = all[static_cast<std::size_t>(first)];
    SKEW_CHECK(m == f && (m & (m - 1)) == 0, "expert state is on different devices: rank "
                                                 << first << " moves " << devices_text(f) << " tensors, rank " << r
                                                 << " " << devices_text(m)
                                                 << " tensors; every rank must hold it on one device");
  }
}

}  // namespace

std::vector<double> apply_placement(comm::ProcessGroup& world, ExpertStateStore& store,
                                    const std::vector<LayerPlacement>& before,
                                    const std::vector<LayerPlacement>& after) {
  SKEW_CHECK(before.size() == after.size(),
             "apply_placement: " << before.size() << " layers before, " << after.size() << " after");
  check_agreement(world, before, after);
  const int me = world.rank();
  std::vector<comm::P2POp> transfers;
  std::vector<double> sent(after.size(), 0.0);
  std::vector<std::pair<int, int>> dropped;
  int message = 0;
  for (std::size_t l = 0; l < after.size(); ++l) {
    const int layer = static_cast<int>(l);
    SKEW_CHECK(after[l].world_size == world.size(),
               "layer " << l << " placement is for " << after[l].world_size << " ranks, world has " << world.size());
    after[l].validate();
    for (const auto& t : plan_transfers(before[l], after[l])) {
      if (t.dst == me) store.create_replica(layer, t.expert);
      if (t.dst != me && t.src != me) {
        ++message;
        continue;
      }
      const int tag = kTagBase + message++ % kTagSpan;
      std::vector<Tensor*> state = store.replica_state(layer, t.expert);
      for (Tensor* tensor : state) {
        SKEW_CHECK(tensor != nullptr,
                   "replica state of layer " << layer << " expert " << t.expert << " holds a null tensor");
        if (t.dst == me)
          transfers.push_back(comm::recv_op(comm::view(*tensor), t.src, tag));
        else {
          transfers.push_back(comm::send_op(comm::view(*tensor), t.dst, tag));
          sent[l] += static_cast<double>(tensor->nbytes());
        }
      }
    }
    for (int e = 0; e < after[l].num_experts(); ++e) {
      const auto& now = after[l].experts[static_cast<std::size_t>(e)];
      bool held_before = false, held_after = false;
      for (const auto& r : before[l].experts[static_cast<std::size_t>(e)]) held_before = held_before || r.rank == me;
      for (const auto& r : now) held_after = held_after || r.rank == me;
      if (held_before && !held_after) dropped.push_back({layer, e});
    }
  }
  check_state_devices(world, transfers);
  if (!transfers.empty()) world.batch_isend_irecv(transfers)->wait();
  for (const auto& [layer, expert] : dropped) store.drop_replica(layer, expert);
  return sent;
}

}  // namespace skew::placement

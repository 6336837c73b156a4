#include "lib/placement/placement.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.hpp"

namespace skew::placement {

std::vector<int> LayerPlacement::experts_on(int rank) const {
  std::vector<int> out;
  for (int e = 0; e < num_experts(); ++e)
    for (const auto& r : experts[static_cast<std::size_t>(e)])
      if (r.rank == rank) out.push_back(e);
  return out;
}

int LayerPlacement::replicas_on(int rank) const {
  return static_cast<int>(experts_on(rank).size());
}

void LayerPlacement::validate() const {
  SKEW_CHECK(world_size >= 1 && slots_per_rank >= 1, "placement needs world_size >= 1 and slots_per_rank >= 1");
  std::vector<int> used(static_cast<std::size_t>(world_size), 0);
  for (int e = 0; e < num_experts(); ++e) {
    const auto& reps = experts[static_cast<std::size_t>(e)];
    SKEW_CHECK(!reps.empty(), "expert " << e << " has no replica");
    double total = 0;
    for (std::size_t i = 0; i < reps.size(); ++i) {
      SKEW_CHECK(reps[i].rank >= 0 && reps[i].rank < world_size,
                 "expert " << e << " has a replica on rank " << reps[i].rank << " outside [0, " << world_size << ")");
      SKEW_CHECK(reps[i].share >= 0, "expert " << e << " has a negative share");
      for (std::size_t j = 0; j < i; ++j)
        SKEW_CHECK(reps[j].rank != reps[i].rank, "expert " << e << " has two replicas on rank " << reps[i].rank);
      ++used[static_cast<std::size_t>(reps[i].rank)];
      total += reps[i].share;
    }
    SKEW_CHECK(std::abs(total - 1.0) < 1e-9, "shares of expert " << e << " sum to " << total << ", not 1");
  }
  for (int r = 0; r < world_size; ++r)
    SKEW_CHECK(used[static_cast<std::size_t>(r)] <= slots_per_rank,
               "rank " << r << " holds " << used[static_cast<std::size_t>(r)] << " replicas but has " << slots_per_rank
                       << " slots");
}

std::string LayerPlacement::to_string() const {
  std::ostringstream os;
  os.precision(17);
  os << "N=" << world_size << " S=" << slots_per_rank;
  for (int e = 0; e < num_experts(); ++e) {
    os << " e" << e << ":";
    for (const auto& r : experts[static_cast<std::size_t>(e)]) os << r.rank << "@" << r.share << ",";
  }
  return os.str();
}

bool LayerPlacement::operator==(const LayerPlacement& o) const {
  return to_string() == o.to_string();
}

LayerPlacement LayerPlacement::block(int num_experts, int world_size, int slots_per_rank) {
  SKEW_CHECK(num_experts >= 1 && world_size >= 1, "block placement needs experts and ranks");
  SKEW_CHECK(num_experts % world_size == 0,
             "num_experts " << num_experts << " is not a multiple of the " << world_size << " ranks");
  const int per_rank = num_experts / world_size;
  SKEW_CHECK(per_rank <= slots_per_rank,
             "each rank needs " << per_rank << " slots for one replica per expert, placement.slots_per_rank is "
                                << slots_per_rank);
  LayerPlacement p;
  p.world_size = world_size;
  p.slots_per_rank = slots_per_rank;
  p.experts.resize(static_cast<std::size_t>(num_experts));
  for (int e = 0; e < num_experts; ++e) p.experts[static_cast<std::size_t>(e)] = {Replica{e / per_rank, 1.0}};
  return p;
}

std::vector<std::int64_t> split_tokens(std::int64_t count, const std::vector<Replica>& replicas) {
  SKEW_CHECK(!replicas.empty(), "split_tokens with no replica");
  std::vector<std::int64_t> out(replicas.size());
  std::vector<std::pair<double, std::size_t>> frac;
  std::int64_t given = 0;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    const double exact = replicas[i].share * static_cast<double>(count);
    out[i] = static_cast<std::int64_t>(std::floor(exact + 1e-9));
    given += out[i];
    frac.push_back({exact - static_cast<double>(out[i]), i});
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t j = 0; given < count; ++j, ++given) ++out[frac[j % frac.size()].second];
  while (given > count) {  // float overshoot: take back from the last replicas
    for (std::size_t i = out.size(); i-- > 0 && given > count;)
      if (out[i] > 0) --out[i], --given;
  }
  return out;
}

}  // namespace skew::placement

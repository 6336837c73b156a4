#include "mpi/process_group.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace skew::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

std::shared_ptr<ProcessGroup> ProcessGroup::subgroup(const std::vector<int>& ranks) {
  SKEW_CHECK(!ranks.empty(), "subgroup of no ranks");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  SKEW_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "subgroup lists a rank twice");
  SKEW_CHECK(sorted.front() >= 0 && sorted.back() < size_, "subgroup rank out of range [0, " << size_ << ")");
  SKEW_CHECK(std::find(ranks.begin(), ranks.end(), rank_) != ranks.end(),
             "rank " << rank_ << " asked for a subgroup it is not a member of");
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = subgroup_cache_.find(ranks);
  if (it != subgroup_cache_.end()) return it->second;
  auto group = create_subgroup(ranks);
  ++subgroups_created_;
  subgroup_cache_.emplace(ranks, group);
  return group;
}

std::size_t ProcessGroup::subgroup_cache_size() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return subgroup_cache_.size();
}

bool every_rank(ProcessGroup& group, bool ok) {
  std::vector<double> flag = {ok ? 1.0 : 0.0};
  group.allreduce(view(flag), ReduceOp::Min);
  return flag[0] > 0;
}

void check_buffer(const Buffer& b, Device expected, const char* op) {
  SKEW_CHECK(b.count == 0 || b.data != nullptr, op << ": null buffer with " << b.count << " elements");
  SKEW_CHECK(b.device == expected, op << ": buffer is on " << device_name(b.device) << " but this backend works on "
                                      << device_name(expected) << " buffers");
}

std::size_t sum_counts(const std::vector<std::size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace skew::comm

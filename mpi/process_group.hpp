// ProcessGroup: the communication interface every trainer uses (PyTorch c10d style). One
// subclass per backend: MpiProcessGroup (host buffers; device buffers staged through pinned host
// memory), NcclProcessGroup (device buffers) and HybridProcessGroup (host buffers to MPI, device
// buffers to NCCL: the world group of a GPU run).
// Counts are in elements; buffers are views (pointer, count, dtype, device) so callers can pass
// tensors, device arrays or std::vectors alike. All collectives are in place or out of place as documented.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device_array.hpp"
#include "core/tensor.hpp"

namespace skew::comm {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);

struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::F32;
  Device device = Device::Host;
};

inline Buffer view(Tensor& t) {
  return {t.raw(), t.numel(), t.dtype(), t.device()};
}
template <typename T>
Buffer view(std::vector<T>& v) {
  return {v.data(), v.size(), dtype_of<T>(), Device::Host};
}
template <typename T>
Buffer view(T* data, std::size_t count, Device device = Device::Host) {
  return {data, count, dtype_of<T>(), device};
}
template <typename T>
Buffer view(DeviceArray<T>& a) {
  return {a.data(), a.size(), dtype_of<T>(), a.device()};
}
// For send-side arguments that the call only reads.
inline Buffer cview(const Tensor& t) {
  return view(const_cast<Tensor&>(t));
}
template <typename T>
Buffer cview(const std::vector<T>& v) {
  return view(const_cast<std::vector<T>&>(v));
}
template <typename T>
Buffer cview(const DeviceArray<T>& a) {
  return view(const_cast<DeviceArray<T>&>(a));
}

// A pending non-blocking operation; wait() completes it (and applies any post-step, e.g. the
// division of ReduceOp::Avg). Destroying an unfinished Work waits for it.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

// One leg of a batched point-to-point exchange (see ProcessGroup::batch_isend_irecv).
struct P2POp {
  enum class Kind { Send, Recv };
  Kind kind;
  Buffer buf;
  int peer;
  int tag;
};
inline P2POp send_op(Buffer buf, int peer, int tag) {
  return {P2POp::Kind::Send, buf, peer, tag};
}
inline P2POp recv_op(Buffer buf, int peer, int tag) {
  return {P2POp::Kind::Recv, buf, peer, tag};
}

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;
  // Rank in MPI_COMM_WORLD of local rank r of this group.
  int world_rank_of(int r) const { return world_ranks_.at(static_cast<std::size_t>(r)); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  virtual void allreduce(Buffer buf, ReduceOp op) = 0;   // in place
  virtual void broadcast(Buffer buf, int root) = 0;      // in place
  virtual void allgather(Buffer send, Buffer recv) = 0;  // recv: size()*send.count
  virtual void allgatherv(Buffer send, Buffer recv, const std::vector<std::size_t>& recv_counts) = 0;
  virtual void alltoall(Buffer send, Buffer recv) = 0;  // send.count/size() per peer
  // Element counts per peer; data is packed contiguously in rank order on both sides.
  virtual void alltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                         const std::vector<std::size_t>& recv_counts) = 0;
  virtual void send(Buffer buf, int dst, int tag) = 0;
  virtual void recv(Buffer buf, int src, int tag) = 0;
  virtual void barrier() = 0;

  virtual std::unique_ptr<Work> iallreduce(Buffer buf, ReduceOp op) = 0;
  virtual std::unique_ptr<Work> ialltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                                           const std::vector<std::size_t>& recv_counts) = 0;
  virtual std::unique_ptr<Work> isend(Buffer buf, int dst, int tag) = 0;
  virtual std::unique_ptr<Work> irecv(Buffer buf, int src, int tag) = 0;
  // All sends and receives start together and complete as one Work. Use it whenever a rank both
  // sends and receives in one exchange: NCCL serialises separate isend/irecv calls on its stream,
  // so "send to B, then receive from B" on two ranks would deadlock there, but not in a batch.
  virtual std::unique_ptr<Work> batch_isend_irecv(const std::vector<P2POp>& ops) = 0;

  // Collective over this group: ranks with equal color form a group, ordered by key.
  // color < 0 returns nullptr (the rank joins no group).
  virtual std::shared_ptr<ProcessGroup> split(int color, int key) = 0;
  // Called by the members only (ranks of this group, in the order given). Cached: the same
  // member set returns the same group without creating a communicator again.
  std::shared_ptr<ProcessGroup> subgroup(const std::vector<int>& ranks);
  std::size_t subgroup_cache_size() const;
  std::size_t subgroups_created() const { return subgroups_created_; }

 protected:
  virtual std::shared_ptr<ProcessGroup> create_subgroup(const std::vector<int>& ranks) = 0;
  int rank_ = 0, size_ = 1;
  std::vector<int> world_ranks_;

 private:
  mutable std::mutex cache_mutex_;
  std::map<std::vector<int>, std::shared_ptr<ProcessGroup>> subgroup_cache_;
  std::size_t subgroups_created_ = 0;
};

// Every rank's `ok`, and-ed: collective over `group` (host memory).
bool every_rank(ProcessGroup& group, bool ok);

// Checks that counts/buffers agree; shared by the backends.
void check_buffer(const Buffer& b, Device expected, const char* op);
std::size_t sum_counts(const std::vector<std::size_t>& counts);

}  // namespace skew::comm

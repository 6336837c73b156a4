// The world group of a GPU run: one object, two halves over the same ranks. Host buffers (the
// control plane: counts, placement plans, logged scalars) go to the host half (MPI); device
// buffers (the data plane: token exchange, replica gradients, expert state) go to the device half
// (NCCL). An operation whose buffers sit on different devices is refused with a message naming
// it. Splits and subgroups split both halves; subgroups are cached per rank set here and in each
// half, so a NCCL sub-communicator is created once per rank set.
#pragma once
#include <mpi.h>

#include <memory>

#include "mpi/process_group.hpp"

namespace skew::comm {

class HybridProcessGroup : public ProcessGroup {
 public:
  // Both halves span the same ranks in the same order (checked).
  HybridProcessGroup(std::shared_ptr<ProcessGroup> host_half, std::shared_ptr<ProcessGroup> device_half);
  std::string backend() const override { return host_->backend() + "+" + device_->backend(); }
  ProcessGroup& device_half() { return *device_; }

  void allreduce(Buffer buf, ReduceOp op) override { half_for(buf).allreduce(buf, op); }
  void broadcast(Buffer buf, int root) override { half_for(buf).broadcast(buf, root); }
  void allgather(Buffer send, Buffer recv) override { half_for(send, recv, "allgather").allgather(send, recv); }
  void allgatherv(Buffer send, Buffer recv, const std::vector<std::size_t>& recv_counts) override {
    half_for(send, recv, "allgatherv").allgatherv(send, recv, recv_counts);
  }
  void alltoall(Buffer send, Buffer recv) override { half_for(send, recv, "alltoall").alltoall(send, recv); }
  void alltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                 const std::vector<std::size_t>& recv_counts) override {
    half_for(send, recv, "alltoallv").alltoallv(send, send_counts, recv, recv_counts);
  }
  void send(Buffer buf, int dst, int tag) override { half_for(buf).send(buf, dst, tag); }
  void recv(Buffer buf, int src, int tag) override { half_for(buf).recv(buf, src, tag); }
  // Waits for the device half's pending work, then all ranks meet.
  void barrier() override { device_->barrier(); }

  std::unique_ptr<Work> iallreduce(Buffer buf, ReduceOp op) override { return half_for(buf).iallreduce(buf, op); }
  std::unique_ptr<Work> ialltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                                   const std::vector<std::size_t>& recv_counts) override {
    return half_for(send, recv, "ialltoallv").ialltoallv(send, send_counts, recv, recv_counts);
  }
  std::unique_ptr<Work> isend(Buffer buf, int dst, int tag) override { return half_for(buf).isend(buf, dst, tag); }
  std::unique_ptr<Work> irecv(Buffer buf, int src, int tag) override { return half_for(buf).irecv(buf, src, tag); }
  // Host legs go to the host half and device legs to the device half, both started before the
  // returned Work waits for either. A peer must use the same device for the matching leg.
  std::unique_ptr<Work> batch_isend_irecv(const std::vector<P2POp>& ops) override;

  std::shared_ptr<ProcessGroup> split(int color, int key) override;

 protected:
  std::shared_ptr<ProcessGroup> create_subgroup(const std::vector<int>& ranks) override;

 private:
  ProcessGroup& half_for(const Buffer& b);
  ProcessGroup& half_for(const Buffer& send, const Buffer& recv, const char* op);
  std::shared_ptr<ProcessGroup> host_, device_;
};

#ifdef SKEW_WITH_CUDA
// MPI over a duplicate of `comm` for host buffers, NCCL over another for device buffers (every
// rank needs its own bound GPU). Collective over `comm`; `comm` itself stays the caller's.
std::shared_ptr<ProcessGroup> make_hybrid_group(MPI_Comm comm);
#endif

}  // namespace skew::comm

// MPI backend. Owns its communicator (freed on destruction unless it is MPI_COMM_WORLD). Errors
// return as skew::Error (MPI_ERRORS_RETURN is set on the communicator). Host buffers go to MPI as
// they are; in a CUDA build a device buffer is staged through pinned host blocks (host_staging.hpp)
// shared by the group, its splits and its subgroups; without CUDA a device buffer is an error.
#pragma once
#include <mpi.h>

#include "mpi/host_staging.hpp"
#include "mpi/process_group.hpp"

namespace skew::comm {

class MpiProcessGroup : public ProcessGroup {
 public:
  // Wraps `comm` (takes ownership unless it is MPI_COMM_WORLD). Device buffers are staged with
  // `copies` (CUDA's by default; nullptr refuses them).
  explicit MpiProcessGroup(MPI_Comm comm, const DeviceCopies* copies = cuda_copies());
  ~MpiProcessGroup() override;
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  std::string backend() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }
  // The staging pool of device buffers (null when this group refuses them).
  const StagingPool* staging() const { return staging_.get(); }

  void allreduce(Buffer buf, ReduceOp op) override;
  void broadcast(Buffer buf, int root) override;
  void allgather(Buffer send, Buffer recv) override;
  void allgatherv(Buffer send, Buffer recv, const std::vector<std::size_t>& recv_counts) override;
  void alltoall(Buffer send, Buffer recv) override;
  void alltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                 const std::vector<std::size_t>& recv_counts) override;
  void send(Buffer buf, int dst, int tag) override;
  void recv(Buffer buf, int src, int tag) override;
  void barrier() override;

  std::unique_ptr<Work> iallreduce(Buffer buf, ReduceOp op) override;
  std::unique_ptr<Work> ialltoallv(Buffer send, const std::vector<std::size_t>& send_counts, Buffer recv,
                                   const std::vector<std::size_t>& recv_counts) override;
  std::unique_ptr<Work> isend(Buffer buf, int dst, int tag) override;
  std::unique_ptr<Work> irecv(Buffer buf, int src, int tag) override;
  std::unique_ptr<Work> batch_isend_irecv(const std::vector<P2POp>& ops) override;

  std::shared_ptr<ProcessGroup> split(int color, int key) override;

 protected:
  std::shared_ptr<ProcessGroup> create_subgroup(const std::vector<int>& ranks) override;

 private:
  // Splits and subgroups stage through their parent's pool.
  MpiProcessGroup(MPI_Comm comm, std::shared_ptr<StagingPool> staging);
  // isend, irecv and batch_isend_irecv: receives posted first, one Work for all.
  std::unique_ptr<Work> post_p2p(const std::vector<P2POp>& ops, const char* op_name);
  StagedBuffers staged(const char* op) { return StagedBuffers(staging_.get(), op); }
  MPI_Comm comm_;
  std::shared_ptr<StagingPool> staging_;
};

// Divides each element by `divisor` (ReduceOp::Avg after a sum); host buffers.
void divide_in_place(Buffer buf, int divisor);

}  // namespace skew::comm

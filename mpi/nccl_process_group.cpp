#include "mpi/nccl_process_group.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "core/cuda_check.hpp"
#include "mpi/mpi_check.hpp"
#include "mpi/mpi_process_group.hpp"

namespace skew::comm {
namespace {

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
  }
  SKEW_THROW("no NCCL datatype for " << dtype_name(d));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

std::size_t bytes_of(const Buffer& b, std::size_t count) {
  return count * dtype_size(b.dtype);
}
void* at(const Buffer& b, std::size_t offset) {
  return static_cast<char*>(b.data) + bytes_of(b, offset);
}

// Waits for `event` while watching the communicator: a peer that died or a network failure shows
// up as an asynchronous NCCL error, not as a CUDA error, and a plain cudaEventSynchronize would
// wait for it forever. On such an error the communicator is aborted (its kernels return) and the
// wait throws. Polls with a short sleep so a waiting rank leaves the CPU to the others.
void wait_watching(cudaEvent_t event, ncclComm_t comm, const char* what) {
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) SKEW_CUDA_CHECK(e);
    ncclResult_t async = ncclSuccess;
    SKEW_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(comm);
      SKEW_THROW("NCCL " << what << " failed asynchronously: " << ncclGetErrorString(async)
                         << " (a peer rank or its GPU failed; the communicator was aborted)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class CudaEventWork : public Work {
 public:
  CudaEventWork(cudaStream_t stream, ncclComm_t comm) : comm_(comm) {
    SKEW_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    SKEW_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEventWork() override {
    try {
      if (!done_) wait_watching(event_, comm_, "operation");
    } catch (const std::exception&) {
      // A destructor cannot throw: the error was the caller's to see through wait().
    }
    cudaEventDestroy(event_);
  }
  void wait() override {
    wait_watching(event_, comm_, "operation");
    done_ = true;
  }
  bool test() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) {
      ncclResult_t async = ncclSuccess;
      SKEW_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) wait();  // aborts and throws
      return false;
    }
    SKEW_CUDA_CHECK(e);
    done_ = true;
    return true;
  }

 private:
  cudaEvent_t event_{};
  ncclComm_t comm_;
  bool done_ = false;
};

class NcclProcessGroup : public ProcessGroup {
 public:
  // Over `bootstrap`'s ranks: rank 0 makes the unique id and broadcasts it.
  explicit NcclProcessGroup(std::shared_ptr<MpiProcessGroup> bootstrap)
      : NcclProcessGroup(bootstrap, new_communicator(*bootstrap)) {}
  // Adopts `comm`, whose ranks are `bootstrap`'s in the same order.
  NcclProcessGroup(std::shared_ptr<MpiProcessGroup> bootstrap, ncclComm_t comm)
      : bootstrap_(std::move(bootstrap)), comm_(comm) {
    rank_ = bootstrap_->rank();
    size_ = bootstrap_->size();
    world_ranks_ = bootstrap_->world_ranks();
    int nccl_rank = -1;
    SKEW_NCCL_CHECK(ncclCommUserRank(comm_, &nccl_rank));
    SKEW_CHECK(nccl_rank == rank_,
               "NCCL communicator rank " << nccl_rank << " differs from its MPI group's rank " << rank_);
    SKEW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SKEW_CUDA_CHECK(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming));
  }
  ~NcclProcessGroup() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(caller_ready_);
    cudaStreamDestroy(stream_);
  }
  std::string backend() const override { return "nccl"; }

  void allreduce(Buffer b, ReduceOp op) override { iallreduce(b, op)->wait(); }
  void broadcast(Buffer b, int root) override {
    check_buffer(b, Device::Cuda, "broadcast");
    SKEW_CHECK(root >= 0 && root < size_, "broadcast root " << root << " out of range");
    after_caller();
    SKEW_NCCL_CHECK(ncclBroadcast(b.data, b.data, b.count, nccl_type(b.dtype), root, comm_, stream_));
    sync();
  }
  void allgather(Buffer s, Buffer r) override {
    check_buffer(s, Device::Cuda, "allgather");
    check_buffer(r, Device::Cuda, "allgather");
    SKEW_CHECK(r.count == s.count * static_cast<std::size_t>(size_),
               "allgather: receive buffer holds " << r.count << ", needs " << s.count * size_);
    after_caller();
    SKEW_NCCL_CHECK(ncclAllGather(s.data, r.data, s.count, nccl_type(s.dtype), comm_, stream_));
    sync();
  }
  void allgatherv(Buffer s, Buffer r, const std::vector<std::size_t>& rc) override {
    check_buffer(s, Device::Cuda, "allgatherv");
    check_buffer(r, Device::Cuda, "allgatherv");
    SKEW_CHECK(rc.size() == static_cast<std::size_t>(size_), "allgatherv: counts size mismatch");
    SKEW_CHECK(r.count >= sum_counts(rc), "allgatherv: receive buffer too small");
    // Every rank broadcasts its slice: NCCL has no v-variant of allgather.
    after_caller();
    SKEW_NCCL_CHECK(ncclGroupStart());
    std::size_t offset = 0;
    for (int p = 0; p < size_; ++p) {
      const std::size_t n = rc[static_cast<std::size_t>(p)];
      SKEW_NCCL_CHECK(
          ncclBroadcast(p == rank_ ? s.data : at(r, offset), at(r, offset), n, nccl_type(r.dtype), p, comm_, stream_));
      offset += n;
    }
    SKEW_NCCL_CHECK(ncclGroupEnd());
    sync();
  }
  void alltoall(Buffer s, Buffer r) override {
    SKEW_CHECK(s.count % static_cast<std::size_t>(size_) == 0 && r.count == s.count,
               "alltoall: buffers must hold size()*n elements each");
    std::vector<std::size_t> counts(static_cast<std::size_t>(size_), s.count / static_cast<std::size_t>(size_));
    alltoallv(s, counts, r, counts);
  }
  void alltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r, const std::vector<std::size_t>& rc) override {
    ialltoallv(s, sc, r, rc)->wait();
  }
  void send(Buffer b, int dst, int tag) override { isend(b, dst, tag)->wait(); }
  void recv(Buffer b, int src, int tag) override { irecv(b, src, tag)->wait(); }
  void barrier() override {
    sync();
    bootstrap_->barrier();
  }

  std::unique_ptr<Work> iallreduce(Buffer b, ReduceOp op) override {
    check_buffer(b, Device::Cuda, "allreduce");
    after_caller();
    SKEW_NCCL_CHECK(ncclAllReduce(b.data, b.data, b.count, nccl_type(b.dtype), nccl_op(op), comm_, stream_));
    return pending();
  }
  std::unique_ptr<Work> ialltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r,
                                   const std::vector<std::size_t>& rc) override {
    check_buffer(s, Device::Cuda, "alltoallv");
    check_buffer(r, Device::Cuda, "alltoallv");
    SKEW_CHECK(sc.size() == static_cast<std::size_t>(size_) && rc.size() == static_cast<std::size_t>(size_),
               "alltoallv: counts size mismatch");
    SKEW_CHECK(s.count >= sum_counts(sc) && r.count >= sum_counts(rc), "alltoallv: buffer smaller than its counts");
    after_caller();
    SKEW_NCCL_CHECK(ncclGroupStart());
    std::size_t so = 0, ro = 0;
    for (int p = 0; p < size_; ++p) {
      const std::size_t ns = sc[static_cast<std::size_t>(p)], nr = rc[static_cast<std::size_t>(p)];
      if (ns) SKEW_NCCL_CHECK(ncclSend(at(s, so), ns, nccl_type(s.dtype), p, comm_, stream_));
      if (nr) SKEW_NCCL_CHECK(ncclRecv(at(r, ro), nr, nccl_type(r.dtype), p, comm_, stream_));
      so += ns;
      ro += nr;
    }
    SKEW_NCCL_CHECK(ncclGroupEnd());
    return pending();
  }
  // NCCL point-to-point has no tags: messages between a pair are matched in issue order.
  std::unique_ptr<Work> isend(Buffer b, int dst, int /*tag*/) override {
    check_buffer(b, Device::Cuda, "send");
    after_caller();
    SKEW_NCCL_CHECK(ncclSend(b.data, b.count, nccl_type(b.dtype), dst, comm_, stream_));
    return pending();
  }
  std::unique_ptr<Work> irecv(Buffer b, int src, int /*tag*/) override {
    check_buffer(b, Device::Cuda, "recv");
    after_caller();
    SKEW_NCCL_CHECK(ncclRecv(b.data, b.count, nccl_type(b.dtype), src, comm_, stream_));
    return pending();
  }

  // One NCCL group: the sends and receives progress together, whatever their order.
  std::unique_ptr<Work> batch_isend_irecv(const std::vector<P2POp>& ops) override {
    for (const P2POp& op : ops) {
      SKEW_CHECK(op.peer >= 0 && op.peer < size_,
                 "batch_isend_irecv: peer " << op.peer << " outside a group of " << size_);
      check_buffer(op.buf, Device::Cuda, op.kind == P2POp::Kind::Send ? "batch isend" : "batch irecv");
    }
    after_caller();
    SKEW_NCCL_CHECK(ncclGroupStart());
    for (const P2POp& op : ops) {
      if (op.kind == P2POp::Kind::Send)
        SKEW_NCCL_CHECK(ncclSend(op.buf.data, op.buf.count, nccl_type(op.buf.dtype), op.peer, comm_, stream_));
      else
        SKEW_NCCL_CHECK(ncclRecv(op.buf.data, op.buf.count, nccl_type(op.buf.dtype), op.peer, comm_, stream_));
    }
    SKEW_NCCL_CHECK(ncclGroupEnd());
    return pending();
  }

  // Collective over this group. Where NCCL has ncclCommSplit (2.18 on) the new communicator is
  // split from this one and shares its resources; before that it is a new one over the MPI split.
  std::shared_ptr<ProcessGroup> split(int color, int key) override {
    MPI_Comm out;
    SKEW_MPI_CHECK(MPI_Comm_split(bootstrap_->comm(), color < 0 ? MPI_UNDEFINED : color, key, &out));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    ncclComm_t sub = nullptr;
    SKEW_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
    if (out == MPI_COMM_NULL) return nullptr;
    return std::make_shared<NcclProcessGroup>(std::make_shared<MpiProcessGroup>(out), sub);
#else
    if (out == MPI_COMM_NULL) return nullptr;
    return std::make_shared<NcclProcessGroup>(std::make_shared<MpiProcessGroup>(out));
#endif
  }

 protected:
  // Only the members call subgroup(), and ncclCommSplit needs every rank of this communicator,
  // so a subgroup's communicator is a new one over the (cached) MPI subgroup, made once per rank
  // set (the base class caches the result).
  std::shared_ptr<ProcessGroup> create_subgroup(const std::vector<int>& ranks) override {
    return std::make_shared<NcclProcessGroup>(std::dynamic_pointer_cast<MpiProcessGroup>(bootstrap_->subgroup(ranks)));
  }

 private:
  // The buffers were written by kernels on the caller's stream (the legacy default stream, where
  // skew's kernels launch); the group's own stream does not synchronise with it implicitly (it is
  // non-blocking), so each operation first waits for what the caller has enqueued so far.
  // Without this an operation could read a buffer its producer kernel had not written yet.
  cudaStream_t after_caller() {
    SKEW_CUDA_CHECK(cudaEventRecord(caller_ready_, cudaStreamLegacy));
    SKEW_CUDA_CHECK(cudaStreamWaitEvent(stream_, caller_ready_, 0));
    return stream_;
  }
  static ncclComm_t new_communicator(const MpiProcessGroup& bootstrap) {
    ncclUniqueId id;
    if (bootstrap.rank() == 0) SKEW_NCCL_CHECK(ncclGetUniqueId(&id));
    SKEW_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap.comm()));
    ncclComm_t comm = nullptr;
    SKEW_NCCL_CHECK(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
    return comm;
  }
  std::unique_ptr<Work> pending() {
    return std::make_unique<CudaEventWork>(stream_, comm_);
  }
  void sync() {
    pending()->wait();
  }
  std::shared_ptr<MpiProcessGroup> bootstrap_;
  ncclComm_t comm_{};
  cudaStream_t stream_{};
  cudaEvent_t caller_ready_{};
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(MPI_Comm comm) {
  MPI_Comm own = comm;
  if (comm == MPI_COMM_WORLD) SKEW_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &own));
  return std::make_shared<NcclProcessGroup>(std::make_shared<MpiProcessGroup>(own));
}

}  // namespace skew::comm

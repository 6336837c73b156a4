#include "mpi/mpi_process_group.hpp"

#include <climits>

#include "mpi/mpi_check.hpp"

namespace skew::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len)) + " (code " + std::to_string(code) + ")";
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: return MPI_UINT8_T;
    case DType::F16:
    case DType::BF16: return MPI_UINT16_T;  // transport only, no reduction
  }
  SKEW_THROW("no MPI datatype for " << dtype_name(d));
}

namespace {

MPI_Op mpi_op(ReduceOp op, DType d) {
  SKEW_CHECK(d != DType::F16 && d != DType::BF16, "MPI backend cannot reduce " << dtype_name(d) << " buffers");
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

int as_int(std::size_t n, const char* what) {
  SKEW_CHECK(n <= static_cast<std::size_t>(INT_MAX), what << ": count " << n << " exceeds MPI's int range");
  return static_cast<int>(n);
}

// The first `count` elements of b: the part a v-collective reads or writes.
Buffer prefix(Buffer b, std::size_t count) {
  b.count = count;
  return b;
}

// Counts and displacements for the v-collectives, packed in rank order.
struct Layout {
  std::vector<int> counts, displs;
};
Layout layout(const std::vector<std::size_t>& counts, int size, const char* what) {
  SKEW_CHECK(counts.size() == static_cast<std::size_t>(size),
             what << ": " << counts.size() << " counts for a group of " << size);
  Layout l;
  std::size_t offset = 0;
  for (auto c : counts) {
    l.counts.push_back(as_int(c, what));
    l.displs.push_back(as_int(offset, what));
    offset += c;
  }
  return l;
}

// A pending MPI operation: its requests, then what completes it once they are done: the division
// of ReduceOp::Avg (on the host view), then the copy of staged device buffers back. Keeps the
// v-collective layout alive until completion, as MPI requires.
struct Completion {
  StagedBuffers staged;
  Buffer average{};  // divided by `divisor` when > 1
  int divisor = 0;
  Layout send, recv;
};

class MpiWork : public Work {
 public:
  MpiWork(std::vector<MPI_Request> reqs, Completion completion)
      : reqs_(std::move(reqs)), completion_(std::move(completion)) {}
  ~MpiWork() override {
    try {
      wait();
    } catch (...) {
    }
  }
  void wait() override {
    if (done_) return;
    SKEW_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    finish();
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    SKEW_MPI_CHECK(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) finish();
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    if (completion_.divisor > 1) divide_in_place(completion_.average, completion_.divisor);
    completion_.staged.finish();
  }
  std::vector<MPI_Request> reqs_;
  Completion completion_;
  bool done_ = false;
};

}  // namespace

void divide_in_place(Buffer b, int divisor) {
  switch (b.dtype) {
    case DType::F32:
      for (std::size_t i = 0; i < b.count; ++i) static_cast<float*>(b.data)[i] /= static_cast<float>(divisor);
      break;
    case DType::F64:
      for (std::size_t i = 0; i < b.count; ++i) static_cast<double*>(b.data)[i] /= divisor;
      break;
    case DType::I32:
      for (std::size_t i = 0; i < b.count; ++i) static_cast<std::int32_t*>(b.data)[i] /= divisor;
      break;
    case DType::I64:
      for (std::size_t i = 0; i < b.count; ++i) static_cast<std::int64_t*>(b.data)[i] /= divisor;
      break;
    default: SKEW_THROW("average of " << dtype_name(b.dtype) << " is not supported");
  }
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, const DeviceCopies* copies)
    : MpiProcessGroup(comm, copies ? std::make_shared<StagingPool>(*copies) : nullptr) {}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::shared_ptr<StagingPool> staging)
    : comm_(comm), staging_(std::move(staging)) {
  SKEW_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  SKEW_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SKEW_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  int world_rank = 0;
  SKEW_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  world_ranks_.resize(static_cast<std::size_t>(size_));
  SKEW_MPI_CHECK(MPI_Allgather(&world_rank, 1, MPI_INT, world_ranks_.data(), 1, MPI_INT, comm_));
}

MpiProcessGroup::~MpiProcessGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiProcessGroup::allreduce(Buffer b, ReduceOp op) {
  StagedBuffers st = staged("allreduce");
  const Buffer h = st.read_write(b);
  SKEW_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, h.data, as_int(h.count, "allreduce"), mpi_type(h.dtype), mpi_op(op, h.dtype), comm_));
  if (op == ReduceOp::Avg) divide_in_place(h, size_);
  st.finish();
}

void MpiProcessGroup::broadcast(Buffer b, int root) {
  SKEW_CHECK(root >= 0 && root < size_, "broadcast root " << root << " out of range");
  StagedBuffers st = staged("broadcast");
  // Only the root's values are read; the others' are overwritten.
  const Buffer h = rank_ == root ? st.read_write(b) : st.write(b);
  SKEW_MPI_CHECK(MPI_Bcast(h.data, as_int(h.count, "broadcast"), mpi_type(h.dtype), root, comm_));
  st.finish();
}

void MpiProcessGroup::allgather(Buffer s, Buffer r) {
  SKEW_CHECK(r.count == s.count * static_cast<std::size_t>(size_),
             "allgather: receive buffer holds " << r.count << ", needs " << s.count * size_);
  SKEW_CHECK(s.dtype == r.dtype, "allgather: dtype mismatch");
  StagedBuffers st = staged("allgather");
  const Buffer hs = st.read(s), hr = st.write(r);
  SKEW_MPI_CHECK(MPI_Allgather(hs.data, as_int(hs.count, "allgather"), mpi_type(hs.dtype), hr.data,
                               as_int(hs.count, "allgather"), mpi_type(hr.dtype), comm_));
  st.finish();
}

void MpiProcessGroup::allgatherv(Buffer s, Buffer r, const std::vector<std::size_t>& recv_counts) {
  SKEW_CHECK(s.dtype == r.dtype, "allgatherv: dtype mismatch " << dtype_name(s.dtype) << " -> " << dtype_name(r.dtype));
  const Layout l = layout(recv_counts, size_, "allgatherv");
  SKEW_CHECK(recv_counts[static_cast<std::size_t>(rank_)] == s.count,
             "allgatherv: my count " << s.count << " differs from recv_counts[" << rank_ << "]");
  SKEW_CHECK(r.count >= sum_counts(recv_counts), "allgatherv: receive buffer too small");
  StagedBuffers st = staged("allgatherv");
  const Buffer hs = st.read(s), hr = st.write(prefix(r, sum_counts(recv_counts)));
  SKEW_MPI_CHECK(MPI_Allgatherv(hs.data, as_int(hs.count, "allgatherv"), mpi_type(hs.dtype), hr.data, l.counts.data(),
                                l.displs.data(), mpi_type(hr.dtype), comm_));
  st.finish();
}

void MpiProcessGroup::alltoall(Buffer s, Buffer r) {
  SKEW_CHECK(s.count % static_cast<std::size_t>(size_) == 0 && r.count == s.count,
             "alltoall: buffers must hold size()*n elements each");
  SKEW_CHECK(s.dtype == r.dtype, "alltoall: dtype mismatch " << dtype_name(s.dtype) << " -> " << dtype_name(r.dtype));
  const int n = as_int(s.count / static_cast<std::size_t>(size_), "alltoall");
  StagedBuffers st = staged("alltoall");
  const Buffer hs = st.read(s), hr = st.write(r);
  SKEW_MPI_CHECK(MPI_Alltoall(hs.data, n, mpi_type(hs.dtype), hr.data, n, mpi_type(hr.dtype), comm_));
  st.finish();
}

void MpiProcessGroup::alltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r,
                                const std::vector<std::size_t>& rc) {
  ialltoallv(s, sc, r, rc)->wait();
}

void MpiProcessGroup::send(Buffer b, int dst, int tag) {
  StagedBuffers st = staged("send");
  const Buffer h = st.read(b);
  SKEW_MPI_CHECK(MPI_Send(h.data, as_int(h.count, "send"), mpi_type(h.dtype), dst, tag, comm_));
}

void MpiProcessGroup::recv(Buffer b, int src, int tag) {
  StagedBuffers st = staged("recv");
  const Buffer h = st.write(b);
  MPI_Status status;
  SKEW_MPI_CHECK(MPI_Recv(h.data, as_int(h.count, "recv"), mpi_type(h.dtype), src, tag, comm_, &status));
  int got = 0;
  SKEW_MPI_CHECK(MPI_Get_count(&status, mpi_type(h.dtype), &got));
  SKEW_CHECK(static_cast<std::size_t>(got) == b.count,
             "recv from rank " << src << " tag " << tag << ": got " << got << " elements, expected " << b.count);
  st.finish();
}

void MpiProcessGroup::barrier() {
  SKEW_MPI_CHECK(MPI_Barrier(comm_));
}

std::unique_ptr<Work> MpiProcessGroup::iallreduce(Buffer b, ReduceOp op) {
  StagedBuffers st = staged("iallreduce");
  const Buffer h = st.read_write(b);
  std::vector<MPI_Request> req(1);
  SKEW_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h.data, as_int(h.count, "allreduce"), mpi_type(h.dtype),
                                mpi_op(op, h.dtype), comm_, req.data()));
  return std::make_unique<MpiWork>(std::move(req),
                                   Completion{std::move(st), h, op == ReduceOp::Avg ? size_ : 0, {}, {}});
}

std::unique_ptr<Work> MpiProcessGroup::ialltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r,
                                                  const std::vector<std::size_t>& rc) {
  SKEW_CHECK(s.dtype == r.dtype, "alltoallv: dtype mismatch");
  Layout ls = layout(sc, size_, "alltoallv send"), lr = layout(rc, size_, "alltoallv recv");
  SKEW_CHECK(s.count >= sum_counts(sc), "alltoallv: send buffer holds " << s.count << " < " << sum_counts(sc));
  SKEW_CHECK(r.count >= sum_counts(rc), "alltoallv: receive buffer holds " << r.count << " < " << sum_counts(rc));
  StagedBuffers st = staged("alltoallv");
  const Buffer hs = st.read(prefix(s, sum_counts(sc))), hr = st.write(prefix(r, sum_counts(rc)));
  std::vector<MPI_Request> req(1);
  SKEW_MPI_CHECK(MPI_Ialltoallv(hs.data, ls.counts.data(), ls.displs.data(), mpi_type(hs.dtype), hr.data,
                                lr.counts.data(), lr.displs.data(), mpi_type(hr.dtype), comm_, req.data()));
  return std::make_unique<MpiWork>(std::move(req), Completion{std::move(st), {}, 0, std::move(ls), std::move(lr)});
}

std::unique_ptr<Work> MpiProcessGroup::isend(Buffer b, int dst, int tag) {
  return post_p2p({send_op(b, dst, tag)}, "isend");
}

std::unique_ptr<Work> MpiProcessGroup::irecv(Buffer b, int src, int tag) {
  return post_p2p({recv_op(b, src, tag)}, "irecv");
}

std::unique_ptr<Work> MpiProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  return post_p2p(ops, "batch_isend_irecv");
}

std::unique_ptr<Work> MpiProcessGroup::post_p2p(const std::vector<P2POp>& ops, const char* op_name) {
  StagedBuffers st = staged(op_name);
  std::vector<MPI_Request> reqs(ops.size(), MPI_REQUEST_NULL);
  // Receives first, so each matching send finds its buffer posted.
  for (const bool receives : {true, false}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if ((op.kind == P2POp::Kind::Recv) != receives) continue;
      SKEW_CHECK(op.peer >= 0 && op.peer < size_, op_name << ": peer " << op.peer << " outside a group of " << size_);
      const Buffer h = receives ? st.write(op.buf) : st.read(op.buf);
      const int n = as_int(h.count, op_name);
      if (receives)
        SKEW_MPI_CHECK(MPI_Irecv(h.data, n, mpi_type(h.dtype), op.peer, op.tag, comm_, &reqs[i]));
      else
        SKEW_MPI_CHECK(MPI_Isend(h.data, n, mpi_type(h.dtype), op.peer, op.tag, comm_, &reqs[i]));
    }
  }
  return std::make_unique<MpiWork>(std::move(reqs), Completion{std::move(st), {}, 0, {}, {}});
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::split(int color, int key) {
  MPI_Comm out;
  SKEW_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  if (out == MPI_COMM_NULL) return nullptr;
  return std::shared_ptr<MpiProcessGroup>(new MpiProcessGroup(out, staging_));
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::create_subgroup(const std::vector<int>& ranks) {
  MPI_Group parent, members;
  SKEW_MPI_CHECK(MPI_Comm_group(comm_, &parent));
  SKEW_MPI_CHECK(MPI_Group_incl(parent, static_cast<int>(ranks.size()), ranks.data(), &members));
  // Only members call MPI_Comm_create_group; a tag derived from the member set keeps
  // concurrent creations of different groups from matching each other.
  int tag = 17;
  for (int r : ranks) tag = (tag * 131 + r) % 32749;
  MPI_Comm out;
  SKEW_MPI_CHECK(MPI_Comm_create_group(comm_, members, tag, &out));
  MPI_Group_free(&members);
  MPI_Group_free(&parent);
  return std::shared_ptr<MpiProcessGroup>(new MpiProcessGroup(out, staging_));
}

}  // namespace skew::comm

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
    case DType::F16: case DType::BF16: return MPI_UINT16_T;  // transport only, no reduction
  }
  SKEW_THROW("no MPI datatype for " << dtype_name(d));
}

namespace {

MPI_Op mpi_op(ReduceOp op, DType d) {
  SKEW_CHECK(d != DType::F16 && d != DType::BF16, "MPI backend cannot reduce " << dtype_name(d) << " buffers");
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

int as_int(std::size_t n, const char* what) {
  SKEW_CHECK(n <= static_cast<std::size_t>(INT_MAX), what << ": count " << n << " exceeds MPI's int range");
  return static_cast<int>(n);
}

// Counts and displacements for the v-collectives, packed in rank order.
struct Layout {
  std::vector<int> counts, displs;
};
Layout layout(const std::vector<std::size_t>& counts, int size, const char* what) {
  SKEW_CHECK(counts.size() == static_cast<std::size_t>(size), what << ": " << counts.size() << " counts for a group of " << size);
  Layout l;
  std::size_t offset = 0;
  for (auto c : counts) {
    l.counts.push_back(as_int(c, what));
    l.displs.push_back(as_int(offset, what));
    offset += c;
  }
  return l;
}

class MpiWork : public Work {
 public:
  MpiWork(MPI_Request req, Buffer avg_buf, int avg_divisor) : req_(req), avg_buf_(avg_buf), divisor_(avg_divisor) {}
  // Keeps the v-collective layout alive until completion, as MPI requires.
  MpiWork(MPI_Request req, Layout send, Layout recv) : req_(req), send_(std::move(send)), recv_(std::move(recv)) {}
  ~MpiWork() override {
    if (!done_) {
      try {
        wait();
      } catch (...) {
      }
    }
  }
  void wait() override {
    if (done_) return;
    SKEW_MPI_CHECK(MPI_Wait(&req_, MPI_STATUS_IGNORE));
    finish();
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    SKEW_MPI_CHECK(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    if (flag) finish();
    return done_;
  }

 private:
  void finish() {
    done_ = true;
    if (divisor_ > 1) divide_in_place(avg_buf_, divisor_);
  }
  MPI_Request req_;
  Buffer avg_buf_{};
  int divisor_ = 0;
  Layout send_, recv_;
  bool done_ = false;
};

}  // namespace

void divide_in_place(Buffer b, int divisor) {
  switch (b.dtype) {
    case DType::F32: for (std::size_t i = 0; i < b.count; ++i) static_cast<float*>(b.data)[i] /= static_cast<float>(divisor); break;
    case DType::F64: for (std::size_t i = 0; i < b.count; ++i) static_cast<double*>(b.data)[i] /= divisor; break;
    case DType::I32: for (std::size_t i = 0; i < b.count; ++i) static_cast<std::int32_t*>(b.data)[i] /= divisor; break;
    case DType::I64: for (std::size_t i = 0; i < b.count; ++i) static_cast<std::int64_t*>(b.data)[i] /= divisor; break;
    default: SKEW_THROW("average of " << dtype_name(b.dtype) << " is not supported");
  }
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm) : comm_(comm) {
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
  check_buffer(b, Device::Host, "allreduce");
  SKEW_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, b.data, as_int(b.count, "allreduce"), mpi_type(b.dtype), mpi_op(op, b.dtype), comm_));
  if (op == ReduceOp::Avg) divide_in_place(b, size_);
}

void MpiProcessGroup::broadcast(Buffer b, int root) {
  check_buffer(b, Device::Host, "broadcast");
  SKEW_CHECK(root >= 0 && root < size_, "broadcast root " << root << " out of range");
  SKEW_MPI_CHECK(MPI_Bcast(b.data, as_int(b.count, "broadcast"), mpi_type(b.dtype), root, comm_));
}

void MpiProcessGroup::allgather(Buffer s, Buffer r) {
  check_buffer(s, Device::Host, "allgather");
  check_buffer(r, Device::Host, "allgather");
  SKEW_CHECK(r.count == s.count * static_cast<std::size_t>(size_), "allgather: receive buffer holds " << r.count << ", needs " << s.count * size_);
  SKEW_CHECK(s.dtype == r.dtype, "allgather: dtype mismatch");
  SKEW_MPI_CHECK(MPI_Allgather(s.data, as_int(s.count, "allgather"), mpi_type(s.dtype), r.data, as_int(s.count, "allgather"), mpi_type(r.dtype), comm_));
}

void MpiProcessGroup::allgatherv(Buffer s, Buffer r, const std::vector<std::size_t>& recv_counts) {
  check_buffer(s, Device::Host, "allgatherv");
  check_buffer(r, Device::Host, "allgatherv");
  SKEW_CHECK(s.dtype == r.dtype, "allgatherv: dtype mismatch " << dtype_name(s.dtype) << " -> " << dtype_name(r.dtype));
  const Layout l = layout(recv_counts, size_, "allgatherv");
  SKEW_CHECK(recv_counts[static_cast<std::size_t>(rank_)] == s.count, "allgatherv: my count " << s.count << " differs from recv_counts[" << rank_ << "]");
  SKEW_CHECK(r.count >= sum_counts(recv_counts), "allgatherv: receive buffer too small");
  SKEW_MPI_CHECK(MPI_Allgatherv(s.data, as_int(s.count, "allgatherv"), mpi_type(s.dtype), r.data, l.counts.data(), l.displs.data(), mpi_type(r.dtype), comm_));
}

void MpiProcessGroup::alltoall(Buffer s, Buffer r) {
  check_buffer(s, Device::Host, "alltoall");
  check_buffer(r, Device::Host, "alltoall");
  SKEW_CHECK(s.count % static_cast<std::size_t>(size_) == 0 && r.count == s.count, "alltoall: buffers must hold size()*n elements each");
  SKEW_CHECK(s.dtype == r.dtype, "alltoall: dtype mismatch " << dtype_name(s.dtype) << " -> " << dtype_name(r.dtype));
  const int n = as_int(s.count / static_cast<std::size_t>(size_), "alltoall");
  SKEW_MPI_CHECK(MPI_Alltoall(s.data, n, mpi_type(s.dtype), r.data, n, mpi_type(r.dtype), comm_));
}

void MpiProcessGroup::alltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r, const std::vector<std::size_t>& rc) {
  ialltoallv(s, sc, r, rc)->wait();
}

void MpiProcessGroup::send(Buffer b, int dst, int tag) {
  check_buffer(b, Device::Host, "send");
  SKEW_MPI_CHECK(MPI_Send(b.data, as_int(b.count, "send"), mpi_type(b.dtype), dst, tag, comm_));
}

void MpiProcessGroup::recv(Buffer b, int src, int tag) {
  check_buffer(b, Device::Host, "recv");
  MPI_Status status;
  SKEW_MPI_CHECK(MPI_Recv(b.data, as_int(b.count, "recv"), mpi_type(b.dtype), src, tag, comm_, &status));
  int got = 0;
  SKEW_MPI_CHECK(MPI_Get_count(&status, mpi_type(b.dtype), &got));
  SKEW_CHECK(static_cast<std::size_t>(got) == b.count, "recv from rank " << src << " tag " << tag << ": got " << got << " elements, expected " << b.count);
}

void MpiProcessGroup::barrier() { SKEW_MPI_CHECK(MPI_Barrier(comm_)); }

std::unique_ptr<Work> MpiProcessGroup::iallreduce(Buffer b, ReduceOp op) {
  check_buffer(b, Device::Host, "iallreduce");
  MPI_Request req;
  SKEW_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, b.data, as_int(b.count, "iallreduce"), mpi_type(b.dtype), mpi_op(op, b.dtype), comm_, &req));
  return std::make_unique<MpiWork>(req, b, op == ReduceOp::Avg ? size_ : 0);
}

std::unique_ptr<Work> MpiProcessGroup::ialltoallv(Buffer s, const std::vector<std::size_t>& sc, Buffer r, const std::vector<std::size_t>& rc) {
  check_buffer(s, Device::Host, "alltoallv");
  check_buffer(r, Device::Host, "alltoallv");
  SKEW_CHECK(s.dtype == r.dtype, "alltoallv: dtype mismatch");
  Layout ls = layout(sc, size_, "alltoallv send"), lr = layout(rc, size_, "alltoallv recv");
  SKEW_CHECK(s.count >= sum_counts(sc), "alltoallv: send buffer holds " << s.count << " < " << sum_counts(sc));
  SKEW_CHECK(r.count >= sum_counts(rc), "alltoallv: receive buffer holds " << r.count << " < " << sum_counts(rc));
  MPI_Request req;
  SKEW_MPI_CHECK(MPI_Ialltoallv(s.data, ls.counts.data(), ls.displs.data(), mpi_type(s.dtype), r.data, lr.counts.data(),
                                lr.displs.data(), mpi_type(r.dtype), comm_, &req));
  return std::make_unique<MpiWork>(req, std::move(ls), std::move(lr));
}

std::unique_ptr<Work> MpiProcessGroup::isend(Buffer b, int dst, int tag) {
  check_buffer(b, Device::Host, "isend");
  MPI_Request req;
  SKEW_MPI_CHECK(MPI_Isend(b.data, as_int(b.count, "isend"), mpi_type(b.dtype), dst, tag, comm_, &req));
  return std::make_unique<MpiWork>(req, Buffer{}, 0);
}

std::unique_ptr<Work> MpiProcessGroup::irecv(Buffer b, int src, int tag) {
  check_buffer(b, Device::Host, "irecv");
  MPI_Request req;
  SKEW_MPI_CHECK(MPI_Irecv(b.data, as_int(b.count, "irecv"), mpi_type(b.dtype), src, tag, comm_, &req));
  return std::make_unique<MpiWork>(req, Buffer{}, 0);
}

namespace {
class MpiRequestsWork : public Work {
 public:
  explicit MpiRequestsWork(std::vector<MPI_Request> reqs) : reqs_(std::move(reqs)) {}
  ~MpiRequestsWork() override {
    try {
      wait();
    } catch (...) {
    }
  }
  void wait() override {
    SKEW_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
  }
  bool test() override {
    int flag = 0;
    SKEW_MPI_CHECK(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE));
    return flag != 0;
  }

 private:
  std::vector<MPI_Request> reqs_;  // completed requests become MPI_REQUEST_NULL, so waits repeat safely
};
}  // namespace

std::unique_ptr<Work> MpiProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  std::vector<MPI_Request> reqs(ops.size(), MPI_REQUEST_NULL);
  // Receives first, so each matching send finds its buffer posted.
  for (const bool receives : {true, false}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if ((op.kind == P2POp::Kind::Recv) != receives) continue;
      SKEW_CHECK(op.peer >= 0 && op.peer < size_, "batch_isend_irecv: peer " << op.peer << " outside a group of " << size_);
      check_buffer(op.buf, Device::Host, receives ? "batch irecv" : "batch isend");
      const int n = as_int(op.buf.count, "batch_isend_irecv");
      if (receives)
        SKEW_MPI_CHECK(MPI_Irecv(op.buf.data, n, mpi_type(op.buf.dtype), op.peer, op.tag, comm_, &reqs[i]));
      else
        SKEW_MPI_CHECK(MPI_Isend(op.buf.data, n, mpi_type(op.buf.dtype), op.peer, op.tag, comm_, &reqs[i]));
    }
  }
  return std::make_unique<MpiRequestsWork>(std::move(reqs));
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::split(int color, int key) {
  MPI_Comm out;
  SKEW_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_shared<MpiProcessGroup>(out);
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
  return std::make_shared<MpiProcessGroup>(out);
}

}  // namespace skew::comm

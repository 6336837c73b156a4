#include "mpi/hybrid_process_group.hpp"

#include "core/error.hpp"
#include "mpi/mpi_check.hpp"
#include "mpi/mpi_process_group.hpp"
#include "mpi/nccl_process_group.hpp"

namespace skew::comm {

namespace {

// The two halves' Works of one batch: both were started before either is waited for.
class BothWork : public Work {
 public:
  BothWork(std::unique_ptr<Work> host, std::unique_ptr<Work> device)
      : host_(std::move(host)), device_(std::move(device)) {}
  void wait() override {
    host_->wait();
    device_->wait();
  }
  bool test() override {
    const bool host_done = host_->test();
    return device_->test() && host_done;
  }

 private:
  std::unique_ptr<Work> host_, device_;
};

}  // namespace

HybridProcessGroup::HybridProcessGroup(std::shared_ptr<ProcessGroup> host_half,
                                       std::shared_ptr<ProcessGroup> device_half)
    : host_(std::move(host_half)), device_(std::move(device_half)) {
  SKEW_CHECK(host_ && device_, "hybrid group: both halves are needed");
  SKEW_CHECK(host_->world_ranks() == device_->world_ranks(), "hybrid group: the "
                                                                 << host_->backend() << " and " << device_->backend()
                                                                 << " halves span different ranks or orders");
  rank_ = host_->rank();
  size_ = host_->size();
  world_ranks_ = host_->world_ranks();
}

ProcessGroup& HybridProcessGroup::half_for(const Buffer& b) {
  return b.device == Device::Host ? *host_ : *device_;
}

ProcessGroup& HybridProcessGroup::half_for(const Buffer& send, const Buffer& recv, const char* op) {
  SKEW_CHECK(send.device == recv.device, op << ": send buffer on " << device_name(send.device) << ", receive buffer on "
                                            << device_name(recv.device)
                                            << "; the hybrid group takes both on one device");
  return half_for(send);
}

std::unique_ptr<Work> HybridProcessGroup::batch_isend_irecv(const std::vector<P2POp>& ops) {
  std::vector<P2POp> host_ops, device_ops;
  for (const P2POp& op : ops) (op.buf.device == Device::Host ? host_ops : device_ops).push_back(op);
  if (device_ops.empty()) return host_->batch_isend_irecv(host_ops);
  if (host_ops.empty()) return device_->batch_isend_irecv(device_ops);
  auto device_work = device_->batch_isend_irecv(device_ops);
  return std::make_unique<BothWork>(host_->batch_isend_irecv(host_ops), std::move(device_work));
}

std::shared_ptr<ProcessGroup> HybridProcessGroup::split(int color, int key) {
  auto host = host_->split(color, key);
  auto device = device_->split(color, key);
  SKEW_CHECK((host == nullptr) == (device == nullptr), "hybrid split: one half joined a group, the other none");
  if (!host) return nullptr;
  return std::make_shared<HybridProcessGroup>(std::move(host), std::move(device));
}

std::shared_ptr<ProcessGroup> HybridProcessGroup::create_subgroup(const std::vector<int>& ranks) {
  return std::make_shared<HybridProcessGroup>(host_->subgroup(ranks), device_->subgroup(ranks));
}

#ifdef SKEW_WITH_CUDA
std::shared_ptr<ProcessGroup> make_hybrid_group(MPI_Comm comm) {
  MPI_Comm host_comm, device_comm;
  SKEW_MPI_CHECK(MPI_Comm_dup(comm, &host_comm));
  SKEW_MPI_CHECK(MPI_Comm_dup(comm, &device_comm));
  return std::make_shared<HybridProcessGroup>(std::make_shared<MpiProcessGroup>(host_comm),
                                              make_nccl_group(device_comm));
}
#endif

}  // namespace skew::comm

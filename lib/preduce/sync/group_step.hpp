// A blocking group through the partial-reduce controller, as preduce (without overlap) and eager
// synchronise on MPI ranks: after its local step the worker reports ready, waits for its group,
// and reduces in it by its mode's rule (reduce()).
#pragma once
#include <vector>

#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {

class GroupStep : public StepSync {
 public:
  GroupStep(const SyncMode& mode, comm::PartialReduce& pr, WorkerProgress& progress)
      : pr_(pr), mode_(mode), progress_(progress) {}
  double compute(Worker& me) override { return mode_.local_step(me); }
  void synchronise(Worker& me, StepRecord& step) override;

 protected:
  // The mode's reduction in group `g`: the worker's model or gradients, and its version.
  virtual void reduce(Worker& me, const comm::Group& g) = 0;
  comm::PartialReduce& pr_;
  std::vector<float> scratch_;

 private:
  const SyncMode& mode_;
  WorkerProgress& progress_;
};

}  // namespace skew::preduce

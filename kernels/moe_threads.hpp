// CPU threading of the MoE kernels. moe_train runs one rank per core, so OpenBLAS's own thread
// pool only oversubscribes the cores (and fights MPI's progress polling): ranks pin it to 1.
#pragma once

namespace skew::kernels::moe {

void set_blas_threads(int threads);

}  // namespace skew::kernels::moe

#include "kernels/moe_threads.hpp"

#include <cblas.h>

namespace skew::kernels::moe {

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace skew::kernels::moe

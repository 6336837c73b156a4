// This rank's place among the ranks of its node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)),
// which picks its GPU in the CUDA tests under mpirun.
#pragma once
#include <mpi.h>

namespace skew::test {

struct NodePlace {
  int rank = 0, size = 1;
};

inline NodePlace node_place() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  NodePlace place;
  MPI_Comm_rank(local, &place.rank);
  MPI_Comm_size(local, &place.size);
  MPI_Comm_free(&local);
  return place;
}

}  // namespace skew::test

// Catch2 main for multi-rank tests: every rank runs every case; a failing rank makes the
// whole job fail (non-zero exit from any rank fails mpirun).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  // Only rank 0 reports passes; every rank reports its failures.
  const int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) {
    MPI_Finalize();
    return rc;
  }
  const int failed = session.run();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}

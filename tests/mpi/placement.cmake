# Placement executor: expert state moves and agreement across ranks.
skew_mpi_test(skew_placement_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_placement_executor.cpp LIBS skew_placement skew_core NP 2 4)

# Placement executor: expert state moves and agreement across ranks.
file(GLOB placement_mpi_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_placement_*.cpp)
skew_mpi_test(skew_placement_mpi_test SOURCES ${placement_mpi_sources} LIBS skew_placement skew_core NP 2 4)

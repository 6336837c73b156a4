# Placement module: cost model, planner, monitor, FlexMoE policy, simulator (single rank).
file(GLOB placement_unit_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_placement_*.cpp)
skew_unit_test(skew_placement_test SOURCES ${placement_unit_sources} LIBS skew_placement skew_core)

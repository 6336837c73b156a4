# Placement module: cost model, planner, monitor, FlexMoE policy, simulator (single rank).
skew_unit_test(skew_placement_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_placement_calibration.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_cost.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_expert_step.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_placement_fair.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_futures.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_placement_planner.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_plans.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_shadowing.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_placement_sim.cpp ${CMAKE_CURRENT_LIST_DIR}/test_placement_variants.cpp
  LIBS skew_placement skew_core)

# Nothing lost unseen (issue 17): the training apps on a full disk, an unwritable directory, a
# full stdout, a failing re-run and a metrics file shared by two ranks (runs the built apps).
if(TARGET moe_train AND TARGET preduce_train AND TARGET wide_train)
  skew_unit_test(skew_output_apps_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_output_apps.cpp LIBS skew_core)
  target_compile_definitions(skew_output_apps_test PRIVATE SKEW_MOE_TRAIN="$<TARGET_FILE:moe_train>"
                             SKEW_PREDUCE_TRAIN="$<TARGET_FILE:preduce_train>" SKEW_WIDE_TRAIN="$<TARGET_FILE:wide_train>"
                             SKEW_MPIEXEC="${MPIEXEC_EXECUTABLE}" SKEW_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(skew_output_apps_test moe_train preduce_train wide_train)
endif()
# The run directory (output.dir) each trainer writes by default, and the start-up check of every
# output path, placement_sim's tables included (issue 34 item 2, issue 38).
if(TARGET moe_train AND TARGET preduce_train AND TARGET wide_train AND TARGET placement_sim)
  skew_unit_test(skew_run_dir_apps_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run_dir_apps.cpp LIBS skew_core)
  target_compile_definitions(skew_run_dir_apps_test PRIVATE SKEW_MOE_TRAIN="$<TARGET_FILE:moe_train>"
                             SKEW_PREDUCE_TRAIN="$<TARGET_FILE:preduce_train>" SKEW_WIDE_TRAIN="$<TARGET_FILE:wide_train>"
                             SKEW_PLACEMENT_SIM="$<TARGET_FILE:placement_sim>" SKEW_MPIEXEC="${MPIEXEC_EXECUTABLE}"
                             SKEW_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(skew_run_dir_apps_test moe_train preduce_train wide_train placement_sim)
endif()

# scripts/plot_run.py (issue 34): the three trainers' tiny runs drawn into one PNG (skipped without
# matplotlib), and its refusals of a missing, empty, malformed or plotless metrics file.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND TARGET moe_train AND TARGET preduce_train AND TARGET wide_train)
  add_test(NAME plot_run_three_apps
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_plot_run.py draw $<TARGET_FILE:moe_train>
                   $<TARGET_FILE:wide_train> $<TARGET_FILE:preduce_train>)
  set_tests_properties(plot_run_three_apps PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()
if(Python3_FOUND)
  add_test(NAME plot_run_errors COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_plot_run.py errors)
  set_tests_properties(plot_run_errors PROPERTIES TIMEOUT 60)
endif()

# wide_train end to end (runs the built app under mpirun), resume included.
if(TARGET wide_train)
  skew_unit_test(skew_wide_app_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_app.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_resume.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_wide_normalize.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_hashing_app.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_wide_stream_app.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_cache_order.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_wide_valid_app.cpp
                  LIBS skew_wide)
  target_compile_definitions(skew_wide_app_test PRIVATE SKEW_WIDE_TRAIN="$<TARGET_FILE:wide_train>"
                             SKEW_MPIEXEC="${MPIEXEC_EXECUTABLE}" SKEW_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(skew_wide_app_test wide_train)
endif()
# wide_bench runs the models bench.models names, whole names only ("ffm" does not select fm),
# and names the key for an unknown one; a batch larger than the data is one short batch.
if(TARGET wide_bench)
  set(skew_wide_bench_small --bench.k=2 --bench.repeats=1 --bench.threads=1
      "--bench.data=synthetic:criteo?rows=1500&features=2000&alpha=1.1&seed=3")
  add_test(NAME wide_bench_models_whole_names COMMAND $<TARGET_FILE:wide_bench> --bench.models=ffm ${skew_wide_bench_small})
  set_tests_properties(wide_bench_models_whole_names PROPERTIES TIMEOUT 60
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    PASS_REGULAR_EXPRESSION "\nffm  flow " FAIL_REGULAR_EXPRESSION "\n(fm|lr) ")
  add_test(NAME wide_bench_models_unknown COMMAND $<TARGET_FILE:wide_bench> --bench.models=fm,fmm ${skew_wide_bench_small})
  set_tests_properties(wide_bench_models_unknown PROPERTIES TIMEOUT 60
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    PASS_REGULAR_EXPRESSION "bad value 'fm,fmm' for key 'bench.models': 'fmm' is not lr, fm or ffm")
endif()

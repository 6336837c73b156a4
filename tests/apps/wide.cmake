# wide_train end to end (runs the built app under mpirun), resume included.
if(TARGET wide_train)
  skew_unit_test(skew_wide_app_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_app.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_resume.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_wide_normalize.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_hashing_app.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_wide_stream_app.cpp
                  LIBS skew_wide)
  target_compile_definitions(skew_wide_app_test PRIVATE SKEW_WIDE_TRAIN="$<TARGET_FILE:wide_train>"
                             SKEW_MPIEXEC="${MPIEXEC_EXECUTABLE}" SKEW_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(skew_wide_app_test wide_train)
endif()

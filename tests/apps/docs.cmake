# The README's configuration reference must match the executables' --help.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME config_reference_current
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/config_reference.py ${CMAKE_BINARY_DIR} --check)
endif()
# Every C++/CUDA source matches .clang-format (CI fails on a formatting difference).
add_test(NAME clang_format_clean COMMAND ${PROJECT_SOURCE_DIR}/scripts/format_check.sh)

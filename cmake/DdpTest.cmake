# ddp_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] [LABELS <labels...>]
#              [TIMEOUT <seconds>] [ENV <VAR=value...>] [SKIP_77])
# Builds one Catch2 test executable per unit and registers it with CTest. Every test gets
# DDP_BIN_DIR (the built binaries), DDP_SOURCE_DIR and DDP_TEST_TMP (a per-test scratch folder),
# which is also its TMPDIR: what a test's processes keep in temp dirs (ddprun keeps the logs of a
# failed job without --log-dir) stays in that folder.
# The tests labelled `sanitize` (the wire codec, server and store-client tests), as one target:
# scripts/test.sh builds it with DDP_SANITIZE=address,undefined in a second tree and runs
# `ctest -L sanitize` there (one target, so its programs build side by side).
add_custom_target(ddp_sanitize_tests)

function(ddp_add_test)
  cmake_parse_arguments(T "SKIP_77" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  if("sanitize" IN_LIST T_LABELS)
    add_dependencies(ddp_sanitize_tests ${T_NAME})
  endif()
  target_link_libraries(${T_NAME} PRIVATE ddp_catch_main ${T_LIBS})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests-bin)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  ddp_test_properties(${T_NAME} "${T_LABELS}" "${T_TIMEOUT}" "${T_ENV}" ${T_SKIP_77})
endfunction()

# ddp_add_script_test(NAME <name> COMMAND <cmd...> [LABELS ...] [TIMEOUT s] [ENV ...] [SKIP_77])
# Registers a script (bash / python) test with the same environment as ddp_add_test.
function(ddp_add_script_test)
  cmake_parse_arguments(T "SKIP_77" "NAME;TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  ddp_test_properties(${T_NAME} "${T_LABELS}" "${T_TIMEOUT}" "${T_ENV}" ${T_SKIP_77})
endfunction()

function(ddp_test_properties name labels timeout env skip77)
  if(NOT timeout)
    set(timeout 120)
  endif()
  if(NOT labels)
    set(labels unit)
  endif()
  set(tmp ${CMAKE_BINARY_DIR}/test-tmp/${name})
  file(MAKE_DIRECTORY ${tmp})
  set_tests_properties(${name} PROPERTIES
    LABELS "${labels}"
    TIMEOUT ${timeout}
    ENVIRONMENT "DDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin;DDP_SOURCE_DIR=${PROJECT_SOURCE_DIR};DDP_TEST_TMP=${tmp};TMPDIR=${tmp};${env}")
  if(skip77)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()

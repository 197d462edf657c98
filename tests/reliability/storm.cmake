# Concurrency stress (issue #8, part 2): the storms of test_storm.c on the
# core API and of test_uv_storm.c through the libuv adapter, with the
# reproducers of the races they found (fixed) among their tests. Their size
# follows CRONOQ_STRESS_SCALE (default 1); tests/cqt_storm.h shrinks them on
# slow builds, recognising valgrind by CRONOQ_UNDER_VALGRIND.
set(_cq_storm_suites test_storm)
cronoq_add_test(test_storm)

if(CRONOQ_WITH_UV)
  cronoq_add_test(test_uv_storm)
  target_link_libraries(test_uv_storm PRIVATE cronoq_uv_static)
  list(APPEND _cq_storm_suites test_uv_storm)
  set_tests_properties(test_uv_storm PROPERTIES LABELS reliability)
endif()

if(CRONOQ_VALGRIND)
  set_tests_properties(${_cq_storm_suites} PROPERTIES
    ENVIRONMENT CRONOQ_UNDER_VALGRIND=1)
endif()

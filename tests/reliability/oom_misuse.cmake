# Issue #8, parts 4 and 5: out-of-memory injection and the bad-input
# catalogue. Where the libuv adapter is built, both cover it too.
cronoq_add_test(test_oom)
cronoq_add_test(test_misuse)
if(CRONOQ_WITH_UV)
  target_link_libraries(test_oom PRIVATE cronoq_uv_static)
  target_compile_definitions(test_oom PRIVATE CQT_WITH_UV=1)
  target_link_libraries(test_misuse PRIVATE cronoq_uv_static)
  target_compile_definitions(test_misuse PRIVATE CQT_WITH_UV=1)
endif()

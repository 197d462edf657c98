# Model-based random testing (issue #8, part 1): random operation sequences
# through the library and a reference model (tests/model/), compared after
# every operation. One million operations in the normal build; the slow
# builds (valgrind, sanitizers) run fewer, set through CRONOQ_MODEL_OPS.
cronoq_add_test(test_model model/model.c model/ops.c)
if(CRONOQ_VALGRIND)
  set_tests_properties(test_model PROPERTIES ENVIRONMENT CRONOQ_MODEL_OPS=20000)
elseif(CRONOQ_SANITIZE)
  set_tests_properties(test_model PROPERTIES ENVIRONMENT CRONOQ_MODEL_OPS=100000)
endif()

/* Error codes: the table generates distinct codes, names and messages. */
#include "support/cqt.h"

struct entry {
  int code;
  const char *name;
  const char *msg;
};

static const struct entry table[] = {
#define ENTRY_(name, value, msg) {CQ_##name, #name, msg},
    CQ_ERRNO_MAP(ENTRY_)
#undef ENTRY_
};

#define N_ENTRIES (sizeof(table) / sizeof(table[0]))

static void test_every_code_is_negative_and_distinct(void **state) {
  (void)state;
  for (size_t i = 0; i < N_ENTRIES; i++) {
    assert_true(table[i].code < 0);
    assert_true(table[i].code >= CQ_ERRNO_MIN_);
    for (size_t j = i + 1; j < N_ENTRIES; j++) {
      assert_int_not_equal(table[i].code, table[j].code);
      assert_string_not_equal(table[i].name, table[j].name);
      assert_string_not_equal(table[i].msg, table[j].msg);
    }
  }
}

/* The codes run from -1 down to CQ_ERRNO_MIN_ without a gap, the latest
 * one (CQ_EACCES) included: the bindings walk that range and map every
 * code in it to a class of their own. */
static void test_codes_run_without_a_gap_down_to_the_minimum(void **state) {
  (void)state;
  assert_int_equal(N_ENTRIES, (size_t)-CQ_ERRNO_MIN_);
  for (int code = -1; code >= CQ_ERRNO_MIN_; code--)
    assert_string_not_equal(cq_err_name(code), "UNKNOWN");
  assert_string_equal(cq_err_name(CQ_ERRNO_MIN_ - 1), "UNKNOWN");
  assert_true(CQ_EACCES >= CQ_ERRNO_MIN_);
  assert_string_equal(cq_err_name(CQ_EACCES), "EACCES");
}

static void test_name_and_message_come_from_the_table(void **state) {
  (void)state;
  for (size_t i = 0; i < N_ENTRIES; i++) {
    assert_string_equal(cq_err_name(table[i].code), table[i].name);
    assert_string_equal(cq_strerror(table[i].code), table[i].msg);
  }
  assert_string_equal(cq_err_name(0), "OK");
  assert_string_equal(cq_strerror(0), "success");
}

static void test_unknown_codes_map_to_a_constant_string(void **state) {
  (void)state;
  assert_string_equal(cq_err_name(-12345), "UNKNOWN");
  assert_string_equal(cq_err_name(7), "UNKNOWN");
  assert_string_equal(cq_strerror(-12345), "unknown error");
  assert_ptr_equal(cq_strerror(-999), cq_strerror(12345));
}

static void test_version_string_matches_the_macros(void **state) {
  (void)state;
  char want[32];
  snprintf(want, sizeof(want), "%d.%d.%d", CQ_VERSION_MAJOR, CQ_VERSION_MINOR,
           CQ_VERSION_PATCH);
  assert_string_equal(cq_version_string(), want);
}

static void test_version_number_matches_the_macros(void **state) {
  (void)state;
  assert_int_equal(cq_version_number(), CQ_VERSION_NUMBER);
  assert_int_equal(CQ_VERSION_NUMBER, CQ_VERSION_MAJOR * 1000000 +
                                          CQ_VERSION_MINOR * 1000 +
                                          CQ_VERSION_PATCH);
}

static void test_storage_sizes_match_the_header(void **state) {
  (void)state;
  assert_int_equal(cq_req_size(), sizeof(cq_req));
  assert_int_equal(cq_grant_size(), sizeof(cq_grant));
  assert_int_equal(sizeof(cq_req), 1024);
  assert_int_equal(sizeof(cq_grant), 2048);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_is_negative_and_distinct),
      cmocka_unit_test(test_version_number_matches_the_macros),
      cmocka_unit_test(test_storage_sizes_match_the_header),
      cmocka_unit_test(test_name_and_message_come_from_the_table),
      cmocka_unit_test(test_codes_run_without_a_gap_down_to_the_minimum),
      cmocka_unit_test(test_unknown_codes_map_to_a_constant_string),
      cmocka_unit_test(test_version_string_matches_the_macros),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

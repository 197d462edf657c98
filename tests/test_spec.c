/*
 * Resource specs (cq_pool_add_spec) and request specs (cq_req_parse): every
 * valid form, and every malformed one with its exact code and message, and
 * the all-or-nothing rule: a refused spec leaves the pool, or the request,
 * exactly as it was.
 */
#include "support/cqt.h"

#include "cq_internal.h"

#include <limits.h>
#include <stdlib.h>

static cq_pool *pool;
static char err[256];

static int setup(void **state) {
  (void)state;
  /* GPU detection reads these; each test sets what it needs. */
  unsetenv("CRONOQ_NUM_GPUS");
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("CRONOQ_NVIDIA_SMI");
  err[0] = '\0';
  return cq_pool_create(&pool, NULL);
}

static int teardown(void **state) {
  (void)state;
  return cq_pool_destroy(pool); /* refused if a test left a grant held */
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int add_spec(const char *spec) {
  return cq_pool_add_spec(pool, spec, NULL, err, sizeof(err));
}

/* The pool's resources in resource order, as "name:kind:capacity ...". */
static const char *pool_str(cq_pool *p) {
  static char buf[8192];
  cq_resource_stats st[64];
  size_t n = 0;
  assert_cq_ok(cq_pool_snapshot(p, st, 64, &n));
  assert_true(n <= 64);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    char one[128];
    snprintf(one, sizeof(one), "%s%.63s:%d:%lld", i ? " " : "", st[i].name,
             st[i].kind, (long long)st[i].capacity);
    strcat(buf, one);
  }
  return buf;
}

/* A resource's kind, flags, capacity and device count, as declared. */
static void assert_res(const char *name, int kind, unsigned flags,
                       int64_t capacity, uint32_t devices) {
  cq_resource_stats st = cqt_budget(pool, name);
  assert_int_equal(st.kind, kind);
  assert_int_equal(st.flags, flags);
  assert_int_equal(st.capacity, capacity);
  assert_int_equal(st.devices, devices);
  assert_int_equal(st.online, devices);
}

/* The ids of every device of pool `name`, comma separated. */
static const char *device_ids(const char *name) {
  static char buf[512];
  cq_resource_stats st = cqt_budget(pool, name);
  buf[0] = '\0';
  for (uint32_t i = 0; i < st.devices; i++) {
    cq_device_stats d;
    assert_cq_ok(cq_device_stats_get(pool, name, i, &d));
    assert_int_equal(d.index, i);
    if (i > 0)
      strcat(buf, ",");
    strcat(buf, d.id);
  }
  return buf;
}

/* Spec `spec` of `len` bytes is refused with `code` and exactly `msg`, and
 * the pool is as it was. */
static void refused_n(const char *spec, size_t len, int code, const char *msg) {
  char before[8192];
  snprintf(before, sizeof(before), "%s", pool_str(pool));
  memset(err, 'x', sizeof(err));
  int rc = cq__pool_add_spec_n(pool, spec, len, NULL, err, sizeof(err));
  if (rc != code)
    fail_msg("spec \"%.*s\" returned %s (%s), expected %s", (int)len, spec,
             cq_err_name(rc), err, cq_err_name(code));
  assert_string_equal(err, msg);
  assert_string_equal(pool_str(pool), before);
}

static void refused(const char *spec, int code, const char *msg) {
  refused_n(spec, strlen(spec), code, msg);
}

/* ------------------------------------------------------------------------ */
/* Resource specs: valid forms                                               */
/* ------------------------------------------------------------------------ */

static void test_one_spec_declares_budgets_classes_and_device_pools(void **s) {
  (void)s;
  strcpy(err, "stale");
  assert_cq_ok(add_spec("gpu=2,warehouse-db=10,memory_mib:lone=24576,"
                        "license=3,predict:class=4,tpu:devices=8"));
  assert_string_equal(err, "");
  assert_res("gpu", CQ_KIND_DEVICES, 0, 2 * CQ_DEVICE_MILLI, 2);
  assert_res("warehouse-db", CQ_KIND_BUDGET, 0, 10, 0);
  assert_res("memory_mib", CQ_KIND_BUDGET, CQ_BUDGET_LONE, 24576, 0);
  assert_res("license", CQ_KIND_BUDGET, 0, 3, 0);
  assert_res("predict", CQ_KIND_CLASS, 0, 4, 0);
  assert_res("tpu", CQ_KIND_DEVICES, 0, 8 * CQ_DEVICE_MILLI, 8);
  assert_string_equal(device_ids("gpu"), "0,1");
  assert_string_equal(device_ids("tpu"), "0,1,2,3,4,5,6,7");
  /* Device pools first, then the rest, each in the order written. */
  assert_string_equal(pool_str(pool),
                      "gpu:2:2000 tpu:2:8000 warehouse-db:1:10 "
                      "memory_mib:1:24576 license:1:3 predict:3:4");
}

static void test_gpu_auto_takes_the_count_from_cronoq_num_gpus(void **s) {
  (void)s;
  setenv("CRONOQ_NUM_GPUS", "2", 1);
  assert_cq_ok(add_spec("gpu=auto,db=1"));
  assert_string_equal(err, "");
  assert_res("gpu", CQ_KIND_DEVICES, 0, 2 * CQ_DEVICE_MILLI, 2);
  assert_string_equal(device_ids("gpu"), "0,1");
  /* Any device pool may be detected, not only "gpu". */
  assert_cq_ok(add_spec("tpu:devices=auto"));
  assert_res("tpu", CQ_KIND_DEVICES, 0, 2 * CQ_DEVICE_MILLI, 2);
}

static void test_gpu_auto_takes_the_ids_from_cuda_visible_devices(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES", "3,GPU-8e0c2b6a-1d2f-3c4b-9a8e-0123456789ab",
         1);
  assert_cq_ok(add_spec("gpu = auto"));
  assert_res("gpu", CQ_KIND_DEVICES, 0, 2 * CQ_DEVICE_MILLI, 2);
  assert_string_equal(device_ids("gpu"),
                      "3,GPU-8e0c2b6a-1d2f-3c4b-9a8e-0123456789ab");
}

static void test_gpu_auto_with_no_gpus_makes_an_empty_device_pool(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  assert_cq_ok(add_spec("gpu=auto"));
  assert_res("gpu", CQ_KIND_DEVICES, 0, 0, 0);
}

static void test_blanks_are_allowed_around_items_options_and_equals(void **s) {
  (void)s;
  assert_cq_ok(add_spec(" \tgpu = 1 ,db\t:\tlone = 5, tpu : devices= 2\t, "
                        "c :class=3 \t"));
  assert_res("gpu", CQ_KIND_DEVICES, 0, CQ_DEVICE_MILLI, 1);
  assert_res("db", CQ_KIND_BUDGET, CQ_BUDGET_LONE, 5, 0);
  assert_res("tpu", CQ_KIND_DEVICES, 0, 2 * CQ_DEVICE_MILLI, 2);
  assert_res("c", CQ_KIND_CLASS, 0, 3, 0);
}

static void test_zero_capacities_are_valid(void **s) {
  (void)s;
  assert_cq_ok(add_spec("db=0,big:lone=0,c:class=0,gpu=0,tpu:devices=0"));
  assert_res("db", CQ_KIND_BUDGET, 0, 0, 0);
  assert_res("big", CQ_KIND_BUDGET, CQ_BUDGET_LONE, 0, 0);
  assert_res("c", CQ_KIND_CLASS, 0, 0, 0);
  assert_res("gpu", CQ_KIND_DEVICES, 0, 0, 0);
  assert_res("tpu", CQ_KIND_DEVICES, 0, 0, 0);
}

static void test_largest_values_and_leading_zeros_are_accepted(void **s) {
  (void)s;
  assert_cq_ok(add_spec("db=1099511627775,c:class=1099511627775,"
                        "gpu=65536,z=000000000000000000000000042"));
  assert_res("db", CQ_KIND_BUDGET, 0, CQ_BUDGET_MAX, 0);
  assert_res("c", CQ_KIND_CLASS, 0, CQ_BUDGET_MAX, 0);
  assert_res("gpu", CQ_KIND_DEVICES, 0, (int64_t)CQ_DEVICES_MAX * 1000,
             CQ_DEVICES_MAX);
  assert_res("z", CQ_KIND_BUDGET, 0, 42, 0);
  cq_device_stats d;
  assert_cq_ok(cq_device_stats_get(pool, "gpu", CQ_DEVICES_MAX - 1, &d));
  assert_string_equal(d.id, "65535");
}

static void test_names_take_every_character_budget_names_take(void **s) {
  (void)s;
  char name63[CQ_NAME_MAX + 1], spec[128];
  memset(name63, 'n', CQ_NAME_MAX);
  name63[CQ_NAME_MAX] = '\0';
  snprintf(spec, sizeof(spec), "a.b/c-d_E9=1,%s=2,-=3", name63);
  assert_cq_ok(add_spec(spec));
  assert_res("a.b/c-d_E9", CQ_KIND_BUDGET, 0, 1, 0);
  assert_res(name63, CQ_KIND_BUDGET, 0, 2, 0);
  assert_res("-", CQ_KIND_BUDGET, 0, 3, 0);
}

static void test_length_entry_reads_only_the_bytes_given(void **s) {
  (void)s;
  const char *text = "db=12,x=2@@@";
  assert_cq_ok(cq__pool_add_spec_n(pool, text, 9, NULL, err, sizeof(err)));
  assert_string_equal(pool_str(pool), "db:1:12 x:1:2");
}

/* ------------------------------------------------------------------------ */
/* Resource specs: malformed forms                                           */
/* ------------------------------------------------------------------------ */

static void test_empty_or_blank_spec_is_refused(void **s) {
  (void)s;
  refused("", CQ_EPARSE, "resource spec: empty");
  refused(" \t  ", CQ_EPARSE, "resource spec: empty");
}

static void test_empty_items_are_refused_at_their_column(void **s) {
  (void)s;
  refused(",a=1", CQ_EPARSE, "resource spec: empty item at column 1");
  refused(" , a=1", CQ_EPARSE, "resource spec: empty item at column 2");
  refused("a=1,,b=2", CQ_EPARSE, "resource spec: empty item at column 5");
  refused("a=1, ,b=2", CQ_EPARSE, "resource spec: empty item at column 6");
  refused("a=1,", CQ_EPARSE, "resource spec: empty item at column 5");
  refused("a=1 , ", CQ_EPARSE, "resource spec: empty item at column 7");
  refused(",", CQ_EPARSE, "resource spec: empty item at column 1");
}

static void test_missing_equals_is_reported_where_it_was_expected(void **s) {
  (void)s;
  refused("warehouse-db", CQ_EPARSE,
          "resource spec: expected '=' after \"warehouse-db\" at column 13");
  refused("warehouse-db,license=3", CQ_EPARSE,
          "resource spec: expected '=' after \"warehouse-db\" at column 13");
  refused("license=3,warehouse-db", CQ_EPARSE,
          "resource spec: expected '=' after \"warehouse-db\" at column 23");
  refused("db 10", CQ_EPARSE,
          "resource spec: expected '=' after \"db\" at column 4");
  refused("tpu:devices", CQ_EPARSE,
          "resource spec: expected '=' after \"tpu:devices\" at column 12");
  refused("tpu : devices 8", CQ_EPARSE,
          "resource spec: expected '=' after \"tpu : devices\" at column 15");
}

static void test_missing_name_is_refused(void **s) {
  (void)s;
  refused("=10", CQ_EPARSE, "resource spec: expected a name at column 1");
  refused("a=1, =2", CQ_EPARSE, "resource spec: expected a name at column 6");
  refused(":lone=1", CQ_EPARSE, "resource spec: expected a name at column 1");
}

static void test_missing_or_malformed_numbers_are_refused(void **s) {
  (void)s;
  refused("db=", CQ_EPARSE,
          "resource spec: expected a number after \"db=\" at column 4");
  refused("db=,x=1", CQ_EPARSE,
          "resource spec: expected a number after \"db=\" at column 4");
  refused("db = ", CQ_EPARSE,
          "resource spec: expected a number after \"db=\" at column 6");
  const char *bad[] = {"db=10x", "db=-1",   "db=1.5",
                       "db=abc", "db=0x10", "db=1e3"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    refused(bad[i], CQ_EPARSE,
            "resource spec: expected a number after \"db=\" at column 4");
  refused("c:class=1.5", CQ_EPARSE,
          "resource spec: expected a number after \"c:class=\" at column 9");
  refused("m:lone=", CQ_EPARSE,
          "resource spec: expected a number after \"m:lone=\" at column 8");
  refused("gpu=0.5", CQ_EPARSE,
          "resource spec: expected a number or \"auto\" after \"gpu=\" at "
          "column 5");
  refused("gpu=", CQ_EPARSE,
          "resource spec: expected a number or \"auto\" after \"gpu=\" at "
          "column 5");
  refused("tpu:devices=-2", CQ_EPARSE,
          "resource spec: expected a number or \"auto\" after "
          "\"tpu:devices=\" at column 13");
  refused("db=1 2", CQ_EPARSE,
          "resource spec: unexpected character '2' at column 6");
  refused("db=1=2", CQ_EPARSE,
          "resource spec: unexpected character '=' at column 5");
}

static void test_numbers_above_the_limits_are_out_of_range(void **s) {
  (void)s;
  refused("db=1099511627776", CQ_ERANGE,
          "resource spec: number too large at column 4");
  refused("x=1,db=99999999999999999999999999999999999999999", CQ_ERANGE,
          "resource spec: number too large at column 8");
  refused("c:class=1099511627776", CQ_ERANGE,
          "resource spec: number too large at column 9");
  refused("gpu=65537", CQ_ERANGE,
          "resource spec: number too large at column 5");
  refused("tpu:devices=18446744073709551617", CQ_ERANGE,
          "resource spec: number too large at column 13");
}

static void test_names_repeated_in_the_spec_are_refused(void **s) {
  (void)s;
  refused("a=1,b=2,a=3", CQ_EEXIST,
          "resource spec: \"a\" is named twice (column 9)");
  refused("a=1,a:class=2", CQ_EEXIST,
          "resource spec: \"a\" is named twice (column 5)");
  refused("gpu=1, gpu=auto", CQ_EEXIST,
          "resource spec: \"gpu\" is named twice (column 8)");
}

static void test_names_already_in_the_pool_are_refused(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "db", 5));
  assert_cq_ok(cq_devices_add(pool, "gpu", 1, NULL));
  /* Only the third item is taken: the first two are not added either. */
  refused("x=1,y:class=2,db=3", CQ_EEXIST,
          "resource spec: \"db\" already exists (column 15)");
  refused("x=1,gpu=auto", CQ_EEXIST,
          "resource spec: \"gpu\" already exists (column 5)");
  assert_res("db", CQ_KIND_BUDGET, 0, 5, 0);
}

static void test_unknown_options_are_refused(void **s) {
  (void)s;
  refused("db:foo=1", CQ_EPARSE,
          "resource spec: unknown option \"foo\" at column 4");
  refused("db:Lone=1", CQ_EPARSE,
          "resource spec: unknown option \"Lone\" at column 4");
  refused("db : lone : max=1", CQ_EPARSE,
          "resource spec: unknown option \"max\" at column 13");
  refused("db:=1", CQ_EPARSE, "resource spec: expected an option at column 4");
  refused("db: =1", CQ_EPARSE, "resource spec: expected an option at column 5");
  refused("db:lone:=1", CQ_EPARSE,
          "resource spec: expected an option at column 9");
}

static void test_conflicting_and_repeated_options_are_refused(void **s) {
  (void)s;
  refused("x:class:devices=1", CQ_EPARSE,
          "resource spec: options \"class\" and \"devices\" conflict at "
          "column 9");
  refused("x:lone:devices=1", CQ_EPARSE,
          "resource spec: options \"lone\" and \"devices\" conflict at "
          "column 8");
  refused("x:devices:lone=1", CQ_EPARSE,
          "resource spec: options \"devices\" and \"lone\" conflict at "
          "column 11");
  refused("x:lone:class=1", CQ_EPARSE,
          "resource spec: options \"lone\" and \"class\" conflict at "
          "column 8");
  refused("x:lone:lone=1", CQ_EPARSE,
          "resource spec: option \"lone\" given twice at column 8");
  refused("x:devices : devices=1", CQ_EPARSE,
          "resource spec: option \"devices\" given twice at column 13");
  refused("gpu:lone=1", CQ_EPARSE,
          "resource spec: option \"lone\" does not apply to device pool "
          "\"gpu\" at column 5");
  refused("gpu:class=1", CQ_EPARSE,
          "resource spec: option \"class\" does not apply to device pool "
          "\"gpu\" at column 5");
  assert_cq_ok(add_spec("gpu:devices=1"));
  assert_res("gpu", CQ_KIND_DEVICES, 0, CQ_DEVICE_MILLI, 1);
}

static void test_auto_is_only_for_device_pools(void **s) {
  (void)s;
  setenv("CRONOQ_NUM_GPUS", "2", 1);
  refused("db=auto", CQ_EPARSE,
          "resource spec: \"auto\" is for device pools only, \"db\" is not "
          "one (column 4)");
  refused("c:class=auto", CQ_EPARSE,
          "resource spec: \"auto\" is for device pools only, \"c\" is not "
          "one (column 9)");
  refused("m:lone=auto", CQ_EPARSE,
          "resource spec: \"auto\" is for device pools only, \"m\" is not "
          "one (column 8)");
  refused("gpu=AUTO", CQ_EPARSE,
          "resource spec: expected a number or \"auto\" after \"gpu=\" at "
          "column 5");
}

static void test_stray_characters_are_refused_where_they_are(void **s) {
  (void)s;
  refused("db=1;x=2", CQ_EPARSE,
          "resource spec: unexpected character ';' at column 5");
  refused("d@b=1", CQ_EPARSE,
          "resource spec: unexpected character '@' at column 2");
  refused("@=1", CQ_EPARSE,
          "resource spec: unexpected character '@' at column 1");
  refused("db=1@", CQ_EPARSE,
          "resource spec: unexpected character '@' at column 5");
  /* A resource spec declares this host's resources: no "<name>@<host>". */
  refused("licence=1,gpu@hostB=2", CQ_EPARSE,
          "resource spec: unexpected character '@' at column 14");
  refused("db=\"1\"", CQ_EPARSE,
          "resource spec: unexpected character '\"' at column 4");
  refused("db:lo!ne=1", CQ_EPARSE,
          "resource spec: unexpected character '!' at column 6");
  refused("db=1 x", CQ_EPARSE,
          "resource spec: unexpected character 'x' at column 6");
  refused("db=1:lone", CQ_EPARSE,
          "resource spec: unexpected character ':' at column 5");
}

static void test_control_and_non_ascii_bytes_are_refused(void **s) {
  (void)s;
  refused("db=1\n", CQ_EPARSE,
          "resource spec: unexpected byte 0x0a at column 5");
  refused("db=1\r\n", CQ_EPARSE,
          "resource spec: unexpected byte 0x0d at column 5");
  refused("d\x01=1", CQ_EPARSE,
          "resource spec: unexpected byte 0x01 at column 2");
  refused("db=1\x7f", CQ_EPARSE,
          "resource spec: unexpected byte 0x7f at column 5");
  refused("db=\xff", CQ_EPARSE,
          "resource spec: unexpected byte 0xff at column 4");
  refused("\xff", CQ_EPARSE, "resource spec: unexpected byte 0xff at column 1");
  refused("db=\x80", CQ_EPARSE,
          "resource spec: unexpected byte 0x80 at column 4");
  /* Valid UTF-8 is still not a name. */
  refused("caf\xc3\xa9=1", CQ_EPARSE,
          "resource spec: unexpected byte 0xc3 at column 4");
  refused("db=1,\xc3(=2", CQ_EPARSE,
          "resource spec: unexpected byte 0xc3 at column 6");
}

static void test_embedded_nul_is_refused_through_the_length_entry(void **s) {
  (void)s;
  refused_n("db=1\0x=2", 8, CQ_EPARSE,
            "resource spec: unexpected byte 0x00 at column 5");
  refused_n("\0", 1, CQ_EPARSE,
            "resource spec: unexpected byte 0x00 at column 1");
  refused_n("d\0b=1", 5, CQ_EPARSE,
            "resource spec: unexpected byte 0x00 at column 2");
  refused_n("db=1,", 0, CQ_EPARSE, "resource spec: empty");
}

static void test_names_longer_than_the_limit_are_refused(void **s) {
  (void)s;
  char spec[160];
  char name64[CQ_NAME_MAX + 2];
  memset(name64, 'n', CQ_NAME_MAX + 1);
  name64[CQ_NAME_MAX + 1] = '\0';
  snprintf(spec, sizeof(spec), "%s=1", name64);
  refused(spec, CQ_EPARSE,
          "resource spec: name longer than 63 bytes at column 1");
  snprintf(spec, sizeof(spec), "a=1, %s:class=1", name64);
  refused(spec, CQ_EPARSE,
          "resource spec: name longer than 63 bytes at column 6");
}

static void test_bad_arguments_are_refused(void **s) {
  (void)s;
  assert_cq_err(cq_pool_add_spec(NULL, "db=1", NULL, err, sizeof(err)),
                CQ_EINVAL);
  assert_string_equal(err, "resource spec: invalid argument");
  assert_cq_err(cq_pool_add_spec(pool, NULL, NULL, err, sizeof(err)),
                CQ_EINVAL);
  assert_cq_err(cq_pool_add_spec(pool, NULL, NULL, NULL, 0), CQ_EINVAL);
  assert_string_equal(pool_str(pool), "");
}

static void test_error_buffer_is_optional_and_always_terminated(void **s) {
  (void)s;
  /* No buffer: the code alone. */
  assert_cq_err(cq_pool_add_spec(pool, "db", NULL, NULL, 0), CQ_EPARSE);
  assert_cq_err(cq_pool_add_spec(pool, "db", NULL, NULL, 99), CQ_EPARSE);
  /* A short buffer gets the start of the message. */
  char small[10];
  memset(small, 'x', sizeof(small));
  assert_cq_err(cq_pool_add_spec(pool, "db", NULL, small, sizeof(small)),
                CQ_EPARSE);
  assert_string_equal(small, "resource ");
  /* A buffer of zero bytes is not written. */
  small[0] = 'x';
  assert_cq_err(cq_pool_add_spec(pool, "db", NULL, small, 0), CQ_EPARSE);
  assert_int_equal(small[0], 'x');
  assert_cq_ok(cq_pool_add_spec(pool, "db=1", NULL, NULL, 0));
  assert_cq_ok(cq_pool_add_spec(pool, "x=1", NULL, small, 1));
  assert_string_equal(small, "");
}

static void test_detection_error_is_reported_with_its_own_message(void **s) {
  (void)s;
  setenv("CUDA_VISIBLE_DEVICES", "zero", 1);
  refused("gpu=auto", CQ_EPARSE,
          "resource spec: cannot detect GPUs for \"gpu\" (item at column 1): "
          "CUDA_VISIBLE_DEVICES: cannot use entry \"zero\" in \"zero\"");
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("CRONOQ_NUM_GPUS", "two", 1);
  refused("db=1, gpu=auto", CQ_EPARSE,
          "resource spec: cannot detect GPUs for \"gpu\" (item at column 7): "
          "CRONOQ_NUM_GPUS: expected a count of GPUs (0 to 65536), got "
          "\"two\"");
}

static void test_failing_add_in_the_middle_removes_what_was_added(void **s) {
  (void)s;
  assert_cq_ok(cq_budget_add(pool, "old", 7));
  /* Everything checks out, but detection fails on the third item, after
   * the first two were added: they must be removed again. */
  setenv("CUDA_VISIBLE_DEVICES", "0,0", 1);
  const char *spec = "a=1,b:class=2,gpu=auto,tpu:devices=2";
  refused(spec, CQ_EPARSE,
          "resource spec: cannot detect GPUs for \"gpu\" (item at column 15): "
          "CUDA_VISIBLE_DEVICES: \"0\" appears twice in \"0,0\"");
  assert_string_equal(pool_str(pool), "old:1:7");
  cq_resource_stats st;
  assert_cq_err(cq_resource_stats_get(pool, "a", &st), CQ_ENOENT);
  /* The names are free again: the same spec succeeds once detection does. */
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  assert_cq_ok(add_spec(spec));
  assert_string_equal(pool_str(pool),
                      "gpu:2:2000 tpu:2:2000 old:1:7 a:1:1 b:3:2");
}

/* An allocator that fails once `allocs_left` allocations have been made. */
static int allocs_left = INT_MAX;

static void *failing_alloc(size_t size, void *arg) {
  (void)arg;
  if (allocs_left == 0)
    return NULL;
  allocs_left--;
  return malloc(size);
}

static void *failing_realloc(void *ptr, size_t size, void *arg) {
  (void)arg;
  if (allocs_left == 0)
    return NULL;
  allocs_left--;
  return realloc(ptr, size);
}

static void failing_free(void *ptr, void *arg) {
  (void)arg;
  free(ptr);
}

static void test_out_of_memory_at_any_step_leaves_the_pool_as_it_was(void **s) {
  (void)s;
  cq_allocator alloc = {failing_alloc, failing_realloc, failing_free, NULL};
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &alloc;
  cq_pool *p;
  allocs_left = INT_MAX;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_budget_add(p, "old", 7));
  const char *spec = "a=1,b:lone=2,c:class=3,tpu:devices=2,d=4,e=5,f=6,g=7,"
                     "h=8,i=9";
  int failures = 0;
  for (int k = 0;; k++) {
    assert_true(k < 1000);
    allocs_left = k;
    int rc = cq_pool_add_spec(p, spec, NULL, err, sizeof(err));
    allocs_left = INT_MAX;
    if (rc == 0)
      break;
    assert_cq_err(rc, CQ_ENOMEM);
    assert_non_null(strstr(err, "resource spec: cannot add \""));
    assert_non_null(strstr(err, "out of memory"));
    assert_string_equal(pool_str(p), "old:1:7");
    failures++;
  }
  assert_true(failures > 1);
  assert_string_equal(pool_str(p),
                      "tpu:2:2000 old:1:7 a:1:1 b:1:2 c:3:3 d:1:4 e:1:5 "
                      "f:1:6 g:1:7 h:1:8 i:1:9");
  assert_cq_ok(cq_pool_destroy(p));
}

/* ------------------------------------------------------------------------ */
/* Request specs                                                             */
/* ------------------------------------------------------------------------ */

/* The resources the request tests ask for. */
static void request_pool(void) {
  assert_cq_ok(cq_devices_add(pool, "gpu", 2, NULL));
  assert_cq_ok(cq_budget_add(pool, "warehouse-db", 10));
  assert_cq_ok(cq_budget_add(pool, "license", 3));
  assert_cq_ok(cq_class_add(pool, "predict", 2));
}

/* Parsing `spec` (of `len` bytes) into `r` is refused with `code` and
 * exactly `msg`, and leaves the request as it was. */
static void req_refused_n(cq_req *r, const char *spec, size_t len, int code,
                          const char *msg) {
  cq_req before = *r;
  int rc = cq__req_parse_n(r, spec, len);
  if (rc != code)
    fail_msg("request spec \"%.*s\" returned %s (%s), expected %s", (int)len,
             spec, cq_err_name(rc), cq_req_error(r), cq_err_name(code));
  assert_string_equal(cq_req_error(r), msg);
  assert_ptr_equal(r->data, before.data);
  /* Everything but the message is untouched: every item, field by field
   * (the items' padding is not theirs to compare). */
  const struct cq__req *now = cq__req_ofc(r), *was = cq__req_ofc(&before);
  assert_int_equal(now->magic, was->magic);
  assert_ptr_equal(now->pool, was->pool);
  assert_int_equal(now->flags, was->flags);
  assert_int_equal(now->n_items, was->n_items);
  for (unsigned i = 0; i < was->n_items; i++) {
    assert_ptr_equal(now->items[i].res, was->items[i].res);
    assert_int_equal(now->items[i].amount, was->items[i].amount);
    assert_int_equal(now->items[i].mode, was->items[i].mode);
  }
}

/* A new request on the test pool, zeroed first so that its data is NULL. */
static void req_init(cq_req *r) {
  memset(r, 0, sizeof(*r));
  assert_cq_ok(cq_req_init(r, pool));
}

static void req_refused(cq_req *r, const char *spec, int code,
                        const char *msg) {
  req_refused_n(r, spec, strlen(spec), code, msg);
}

static void test_request_spec_items_are_added_and_granted(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  assert_cq_ok(cq_req_parse(&r, "gpu=0.5,warehouse-db=1,class=predict"));
  assert_int_equal(cq_req_count(&r), 3);
  assert_string_equal(cq_req_error(&r), "");
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_int_equal(cq_grant_held(&g, "gpu"), 500);
  assert_int_equal(cq_grant_held(&g, "warehouse-db"), 1);
  assert_int_equal(cq_grant_held(&g, "predict"), 1);
  assert_int_equal(cqt_budget(pool, "predict").in_use, 1);

  /* Whole devices, with blanks everywhere they are allowed. */
  cq_req w;
  req_init(&w);
  assert_cq_ok(cq_req_parse(&w, " \tgpu = 1 ,license= 3\t, class =predict "));
  assert_int_equal(cq_req_count(&w), 3);
  cq_grant h;
  cq_grant_init(&h);
  assert_cq_ok(cq_grant_try(pool, &h, &w));
  assert_int_equal(cq_grant_held(&h, "gpu"), CQ_DEVICE_MILLI);
  assert_int_equal(cq_grant_held(&h, "license"), 3);
  /* The whole device is the one the half does not use. */
  uint32_t half_on, whole_on, idx[2];
  assert_int_equal(cq_grant_devices(&g, "gpu", &half_on, 1), 1);
  assert_int_equal(cq_grant_devices(&h, "gpu", &whole_on, 1), 1);
  assert_int_not_equal(half_on, whole_on);
  assert_cq_ok(cq_grant_release(pool, &h));
  assert_cq_ok(cq_grant_release(pool, &g));

  cq_req two;
  req_init(&two);
  assert_cq_ok(cq_req_parse(&two, "gpu=2"));
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &two));
  assert_int_equal(cq_grant_held(&g, "gpu"), 2 * CQ_DEVICE_MILLI);
  assert_int_equal(cq_grant_devices(&g, "gpu", idx, 2), 2);
  assert_cq_ok(cq_grant_release(pool, &g));
}

static void test_empty_request_spec_adds_nothing(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  assert_cq_ok(cq_req_add(&r, "license", 1));
  assert_cq_ok(cq_req_parse(&r, ""));
  assert_cq_ok(cq_req_parse(&r, " \t "));
  assert_int_equal(cq_req_count(&r), 1);
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_int_equal(cq_grant_held(&g, "license"), 1);
  assert_cq_ok(cq_grant_release(pool, &g));
}

static void test_request_spec_adds_to_what_the_request_has(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  int mine;
  req_init(&r);
  r.data = &mine;
  assert_cq_ok(cq_req_add(&r, "license", 2));
  /* A failed parse leaves a message ... */
  req_refused(&r, "gpu=0.5,warehouse-db=2,nosuch=1", CQ_ENOENT,
              "request spec: request asks unknown resource \"nosuch\" (item "
              "at column 24)");
  /* ... which the next success clears; the caller's data stays. */
  assert_cq_ok(cq_req_parse(&r, "gpu=0.5,warehouse-db=2"));
  assert_string_equal(cq_req_error(&r), "");
  assert_ptr_equal(r.data, &mine);
  assert_int_equal(cq_req_count(&r), 3);
  cq_grant g;
  cq_grant_init(&g);
  assert_cq_ok(cq_grant_try(pool, &g, &r));
  assert_int_equal(cq_grant_held(&g, "license"), 2);
  assert_int_equal(cq_grant_held(&g, "warehouse-db"), 2);
  assert_int_equal(cq_grant_held(&g, "gpu"), 500);
  assert_cq_ok(cq_grant_release(pool, &g));
  /* What the request names already cannot be named again. */
  req_refused(&r, "class=predict,gpu=1", CQ_EEXIST,
              "request spec: request already names gpu (item at column 15)");
}

static void test_request_spec_syntax_errors_point_at_the_column(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  req_refused(&r, "gpu", CQ_EPARSE,
              "request spec: expected '=' after \"gpu\" at column 4");
  req_refused(&r, "gpu:0.5", CQ_EPARSE,
              "request spec: expected '=' after \"gpu\" at column 4");
  req_refused(&r, "license=1,gpu 1", CQ_EPARSE,
              "request spec: expected '=' after \"gpu\" at column 15");
  req_refused(&r, ",gpu=1", CQ_EPARSE, "request spec: empty item at column 1");
  req_refused(&r, "gpu=0.5,", CQ_EPARSE,
              "request spec: empty item at column 9");
  req_refused(&r, "gpu=0.5,,license=1", CQ_EPARSE,
              "request spec: empty item at column 9");
  req_refused(&r, "gpu=", CQ_EPARSE,
              "request spec: expected an amount after \"gpu=\" at column 5");
  req_refused(&r, "license=1, class= ", CQ_EPARSE,
              "request spec: expected a class name after \"class=\" at "
              "column 19");
  req_refused(&r, "=1", CQ_EPARSE, "request spec: expected a name at column 1");
  req_refused(&r, "gpu=0.5;license=1", CQ_EPARSE,
              "request spec: unexpected character ';' at column 8");
  req_refused(&r, "gpu=0.5 1", CQ_EPARSE,
              "request spec: unexpected character '1' at column 9");
  req_refused(&r, "gpu=0.5\n", CQ_EPARSE,
              "request spec: unexpected byte 0x0a at column 8");
  req_refused(&r, "license=\xff", CQ_EPARSE,
              "request spec: unexpected byte 0xff at column 9");
  req_refused(&r, "lic\xe9nse=1", CQ_EPARSE,
              "request spec: unexpected byte 0xe9 at column 4");
  req_refused_n(&r, "gpu=1\0", 6, CQ_EPARSE,
                "request spec: unexpected byte 0x00 at column 6");
  req_refused_n(&r, "\0gpu=1", 6, CQ_EPARSE,
                "request spec: unexpected byte 0x00 at column 1");

  char spec[160], long_text[CQ_NAME_MAX + 2];
  memset(long_text, 'n', CQ_NAME_MAX + 1);
  long_text[CQ_NAME_MAX + 1] = '\0';
  snprintf(spec, sizeof(spec), "%s=1", long_text);
  req_refused(&r, spec, CQ_EPARSE,
              "request spec: name longer than 63 bytes at column 1");
  memset(long_text, '0', CQ_NAME_MAX + 1);
  snprintf(spec, sizeof(spec), "license=%s", long_text);
  req_refused(&r, spec, CQ_EPARSE,
              "request spec: value longer than 63 bytes at column 9");
  assert_int_equal(cq_req_count(&r), 0);
  /* The length entry reads only the bytes given. */
  assert_cq_ok(cq__req_parse_n(&r, "license=1,gpu", 9));
  assert_int_equal(cq_req_count(&r), 1);
}

static void test_request_spec_refuses_a_resource_named_twice(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  req_refused(&r, "gpu=0.5,gpu=1", CQ_EEXIST,
              "request spec: \"gpu\" is named twice (column 9)");
  req_refused(&r, "class=predict, license=1, class=predict", CQ_EEXIST,
              "request spec: \"class\" is named twice (column 27)");
  assert_int_equal(cq_req_count(&r), 0);
}

static void test_request_spec_passes_on_each_adds_error(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  req_refused(&r, "warehouse-db=1,nosuch=2", CQ_ENOENT,
              "request spec: request asks unknown resource \"nosuch\" (item "
              "at column 16)");
  req_refused(&r, "warehouse-db=1.5", CQ_EPARSE,
              "request spec: request asks warehouse-db:1.5: not a number "
              "(item at column 1)");
  req_refused(&r, "warehouse-db=-1", CQ_ERANGE,
              "request spec: request asks warehouse-db:-1: out of range (item "
              "at column 1)");
  req_refused(&r, "license=0", CQ_ERANGE,
              "request spec: request asks license:0 but amounts must be "
              "positive (item at column 1)");
  req_refused(&r, "gpu=1.5", CQ_ERANGE,
              "request spec: request asks gpu:1.5, which is not a valid "
              "amount of a device pool: a fraction up to 1, or whole devices "
              "(item at column 1)");
  req_refused(&r, "gpu=auto", CQ_EPARSE,
              "request spec: request asks gpu:auto: not a number (item at "
              "column 1)");
  req_refused(&r, "class=warehouse-db", CQ_EINVAL,
              "request spec: warehouse-db is not a class (item at column 1)");
  req_refused(&r, "license=1, predict=1", CQ_EINVAL,
              "request spec: predict is a class: give it to the request as "
              "its class (item at column 12)");
  req_refused(&r, "class=nosuch", CQ_ENOENT,
              "request spec: request asks unknown resource \"nosuch\" (item "
              "at column 1)");
  assert_int_equal(cq_req_count(&r), 0);
}

/*
 * How an amount is read depends on the resource it is for (a device
 * fraction, or units of a budget), so an unknown resource is named first,
 * whatever the amount looks like: `gpu=0.5` on a pool without `gpu` once
 * said "not a number".
 */
static void
test_request_spec_names_an_unknown_resource_whatever_the_amount(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  static const char *const amounts[] = {"0.5", "2", "auto", "-1", "0x10"};
  for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
    char spec[32], want[128];
    snprintf(spec, sizeof(spec), "nosuch=%s", amounts[i]);
    snprintf(want, sizeof(want),
             "request spec: request asks unknown resource \"nosuch\" (item "
             "at column 1)");
    req_refused(&r, spec, CQ_ENOENT, want);
    assert_cq_err(cq_req_add_str(&r, "nosuch", amounts[i]), CQ_ENOENT);
    assert_string_equal(cq_req_error(&r),
                        "request asks unknown resource \"nosuch\"");
  }
  assert_int_equal(cq_req_count(&r), 0);
}

/*
 * A fleet pool names another host's device pool "gpu@hostB"; a request
 * spec takes such a name whole and leaves it to the pool. This pool has no
 * such resource, so the message shows the name as it was read.
 */
static void test_request_spec_names_another_hosts_device_pool(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  req_refused(&r, "gpu@hostB=0.5", CQ_ENOENT,
              "request spec: request asks unknown resource \"gpu@hostB\" "
              "(item at column 1)");
  req_refused(&r, "license=1, gpu@host-b.lan = 1", CQ_ENOENT,
              "request spec: request asks unknown resource "
              "\"gpu@host-b.lan\" (item at column 12)");
  /* The host is part of the name: "gpu" is not "gpu@hostB". */
  req_refused(&r, "gpu=0.5,gpu@hostB=1", CQ_ENOENT,
              "request spec: request asks unknown resource \"gpu@hostB\" "
              "(item at column 9)");

  /* The '@' counts towards the length of a name. */
  char spec[160], name[CQ_NAME_MAX + 2], msg[192];
  memset(name, 'n', CQ_NAME_MAX);
  name[3] = '@';
  name[CQ_NAME_MAX] = '\0';
  snprintf(spec, sizeof(spec), "%s=1", name);
  snprintf(msg, sizeof(msg),
           "request spec: request asks unknown resource \"%s\" (item at "
           "column 1)",
           name);
  req_refused(&r, spec, CQ_ENOENT, msg);
  strcat(name, "n");
  snprintf(spec, sizeof(spec), "%s=1", name);
  req_refused(&r, spec, CQ_EPARSE,
              "request spec: name longer than 63 bytes at column 1");
  assert_int_equal(cq_req_count(&r), 0);
}

static void test_request_spec_refuses_a_misplaced_at_sign(void **s) {
  (void)s;
  request_pool();
  cq_req r;
  req_init(&r);
  assert_cq_ok(cq_req_add(&r, "license", 1));
  req_refused(&r, "@hostB=1", CQ_EPARSE,
              "request spec: expected a name before '@' at column 1");
  req_refused(&r, "gpu=0.5,@hostB=1", CQ_EPARSE,
              "request spec: expected a name before '@' at column 9");
  req_refused(&r, "gpu@=1", CQ_EPARSE,
              "request spec: expected a host after '@' at column 5");
  req_refused(&r, "gpu@", CQ_EPARSE,
              "request spec: expected a host after '@' at column 5");
  req_refused(&r, "gpu@ hostB=1", CQ_EPARSE,
              "request spec: expected a host after '@' at column 5");
  /* One '@' only, with nothing around it. */
  req_refused(&r, "gpu@@hostB=1", CQ_EPARSE,
              "request spec: unexpected character '@' at column 5");
  req_refused(&r, "gpu@hostB@x=1", CQ_EPARSE,
              "request spec: unexpected character '@' at column 10");
  req_refused(&r, "gpu @hostB=1", CQ_EPARSE,
              "request spec: unexpected character '@' at column 5");
  req_refused(&r, "gpu@hostB:0.5", CQ_EPARSE,
              "request spec: expected '=' after \"gpu@hostB\" at column 10");
  /* Values never hold one. */
  req_refused(&r, "warehouse-db=1@hostB", CQ_EPARSE,
              "request spec: unexpected character '@' at column 15");
  req_refused(&r, "class=predict@hostB", CQ_EPARSE,
              "request spec: unexpected character '@' at column 14");
  assert_int_equal(cq_req_count(&r), 1);
}

static void test_request_spec_over_the_item_limit_is_refused_whole(void **s) {
  (void)s;
  char spec[512] = "";
  for (int i = 0; i <= CQ_REQ_MAX_ITEMS; i++) {
    char name[16], item[24];
    snprintf(name, sizeof(name), "b%d", i);
    assert_cq_ok(cq_budget_add(pool, name, 1));
    snprintf(item, sizeof(item), "%s%s=1", i ? "," : "", name);
    strcat(spec, item);
  }
  cq_req r;
  req_init(&r);
  char msg[128];
  snprintf(msg, sizeof(msg),
           "request spec: request names more than %d resources (item at "
           "column %zu)",
           CQ_REQ_MAX_ITEMS, (size_t)(strstr(spec, "b16=") - spec) + 1);
  req_refused(&r, spec, CQ_ETOOMANY, msg);
  assert_int_equal(cq_req_count(&r), 0);
  /* One fewer fits. */
  *strstr(spec, ",b16=") = '\0';
  assert_cq_ok(cq_req_parse(&r, spec));
  assert_int_equal(cq_req_count(&r), CQ_REQ_MAX_ITEMS);
}

static void test_request_spec_bad_arguments_are_refused(void **s) {
  (void)s;
  cq_req r;
  assert_cq_err(cq_req_parse(NULL, "x=1"), CQ_EINVAL);
  memset(&r, 0, sizeof(r)); /* never initialised */
  assert_cq_err(cq_req_parse(&r, "x=1"), CQ_EINVAL);
  assert_cq_err(cq__req_parse_n(&r, "x=1", 3), CQ_EINVAL);
  req_init(&r);
  assert_cq_err(cq_req_parse(&r, NULL), CQ_EINVAL);
  assert_int_equal(cq_req_count(&r), 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_one_spec_declares_budgets_classes_and_device_pools),
      T(test_gpu_auto_takes_the_count_from_cronoq_num_gpus),
      T(test_gpu_auto_takes_the_ids_from_cuda_visible_devices),
      T(test_gpu_auto_with_no_gpus_makes_an_empty_device_pool),
      T(test_blanks_are_allowed_around_items_options_and_equals),
      T(test_zero_capacities_are_valid),
      T(test_largest_values_and_leading_zeros_are_accepted),
      T(test_names_take_every_character_budget_names_take),
      T(test_length_entry_reads_only_the_bytes_given),
      T(test_empty_or_blank_spec_is_refused),
      T(test_empty_items_are_refused_at_their_column),
      T(test_missing_equals_is_reported_where_it_was_expected),
      T(test_missing_name_is_refused),
      T(test_missing_or_malformed_numbers_are_refused),
      T(test_numbers_above_the_limits_are_out_of_range),
      T(test_names_repeated_in_the_spec_are_refused),
      T(test_names_already_in_the_pool_are_refused),
      T(test_unknown_options_are_refused),
      T(test_conflicting_and_repeated_options_are_refused),
      T(test_auto_is_only_for_device_pools),
      T(test_stray_characters_are_refused_where_they_are),
      T(test_control_and_non_ascii_bytes_are_refused),
      T(test_embedded_nul_is_refused_through_the_length_entry),
      T(test_names_longer_than_the_limit_are_refused),
      T(test_bad_arguments_are_refused),
      T(test_error_buffer_is_optional_and_always_terminated),
      T(test_detection_error_is_reported_with_its_own_message),
      T(test_failing_add_in_the_middle_removes_what_was_added),
      T(test_out_of_memory_at_any_step_leaves_the_pool_as_it_was),
      T(test_request_spec_items_are_added_and_granted),
      T(test_empty_request_spec_adds_nothing),
      T(test_request_spec_adds_to_what_the_request_has),
      T(test_request_spec_syntax_errors_point_at_the_column),
      T(test_request_spec_refuses_a_resource_named_twice),
      T(test_request_spec_passes_on_each_adds_error),
      T(test_request_spec_names_an_unknown_resource_whatever_the_amount),
      T(test_request_spec_names_another_hosts_device_pool),
      T(test_request_spec_refuses_a_misplaced_at_sign),
      T(test_request_spec_over_the_item_limit_is_refused_whole),
      T(test_request_spec_bad_arguments_are_refused),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}

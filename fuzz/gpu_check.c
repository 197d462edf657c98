/*
 * Checks shared by the GPU-detection harnesses; see gpu_check.h.
 */
#include "gpu_check.h"

#include <string.h>

static bool id_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || c == '-' || c == '/' || c == '_';
}

/* An index ("0", "12") or a UUID ("GPU-8e0c...", "MIG-..."), as CUDA reads
 * them. */
static bool cuda_id(const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > CQ_DEVICE_ID_MAX)
    return false;
  bool digits = true;
  for (size_t i = 0; i < len; i++) {
    if (!id_char(id[i]))
      return false;
    digits = digits && id[i] >= '0' && id[i] <= '9';
  }
  return digits || (len > 4 && (strncmp(id, "GPU-", 4) == 0 ||
                                strncmp(id, "MIG-", 4) == 0));
}

char *gpu_join(const cq_gpu_list *list) {
  size_t len = 1;
  for (size_t i = 0; i < list->count; i++)
    len += strlen(list->ids[i]) + 1;
  char *s = malloc(len);
  FUZZ_CHECK(s != NULL);
  size_t at = 0;
  for (size_t i = 0; i < list->count; i++) {
    size_t n = strlen(list->ids[i]);
    if (i > 0)
      s[at++] = ',';
    memcpy(s + at, list->ids[i], n);
    at += n;
  }
  s[at] = '\0';
  return s;
}

static bool has_duplicates(const cq_gpu_list *list) {
  for (size_t i = 0; i < list->count; i++)
    for (size_t j = i + 1; j < list->count; j++)
      if (strcmp(list->ids[i], list->ids[j]) == 0)
        return true;
  return false;
}

/* What cq_gpu_detect()'s README example does with a list, checked. */
static void use_in_pool(const cq_gpu_list *list) {
  cq_pool *pool = NULL;
  FUZZ_CHECK_RC(cq_pool_create(&pool, NULL), 0);
  FUZZ_CHECK_RC(
      cq_devices_add(pool, "gpu", list->count, (const char *const *)list->ids),
      0);
  cq_resource_stats st;
  FUZZ_CHECK_RC(cq_resource_stats_get(pool, "gpu", &st), 0);
  FUZZ_CHECK(st.devices == list->count);
  if (list->count > 0) {
    cq_req req;
    FUZZ_CHECK_RC(cq_req_init(&req, pool), 0);
    FUZZ_CHECK_RC(cq_req_add_devices(&req, "gpu", (int64_t)list->count), 0);
    cq_grant grant;
    cq_grant_init(&grant);
    FUZZ_CHECK_RC(cq_grant_try(pool, &grant, &req), 0);
    char *want = gpu_join(list);
    size_t cap = strlen(want) + 1;
    char *visible = malloc(cap);
    FUZZ_CHECK(visible != NULL);
    FUZZ_CHECK_RC(cq_grant_cuda_visible(&grant, "gpu", visible, cap), 0);
    FUZZ_CHECK(strcmp(visible, want) == 0);
    free(visible);
    free(want);
    FUZZ_CHECK_RC(cq_grant_release(pool, &grant), 0);
  }
  FUZZ_CHECK_RC(cq_pool_destroy(pool), 0);
}

static void list_init(cq_gpu_list *list, struct fuzz_alloc *fa) {
  memset(list, 0, sizeof(*list));
  list->source = "fuzz";
  list->alloc_ = fuzz_allocator(fa);
}

static void list_free(cq_gpu_list *list, const struct fuzz_alloc *fa) {
  cq_gpu_list_free(list);
  FUZZ_CHECK(list->count == 0 && list->ids == NULL);
  FUZZ_CHECK(fa->live == 0);
}

void gpu_fuzz_one(const uint8_t *data, size_t size, gpu_parser parse,
                  const char *error_prefix, gpu_list_check check) {
  char *text = malloc(size + 1);
  FUZZ_CHECK(text != NULL);
  if (size > 0)
    memcpy(text, data, size);
  text[size] = '\0';

  struct fuzz_alloc fa = {0, -1, 0};
  cq_gpu_list list;
  list_init(&list, &fa);
  int rc = parse(text, &list);
  long calls = fa.calls;
  if (rc == 0) {
    FUZZ_CHECK(list.count <= CQ_DEVICES_MAX);
    for (size_t i = 0; i < list.count; i++)
      FUZZ_CHECK(list.ids[i] != NULL && cuda_id(list.ids[i]));
    FUZZ_CHECK(!has_duplicates(&list));
    check(text, &list);
    use_in_pool(&list);
  } else {
    FUZZ_CHECK_RC(rc, CQ_EPARSE);
    FUZZ_CHECK(fuzz_msg_ok(list.error, sizeof(list.error)));
    FUZZ_CHECK(strncmp(list.error, error_prefix, strlen(error_prefix)) == 0);
  }
  list_free(&list, &fa);

  for (long k = 0; k < fuzz_fail_points(calls); k++) {
    struct fuzz_alloc oom = {0, fuzz_fail_point(calls, k), 0};
    list_init(&list, &oom);
    FUZZ_CHECK_RC(parse(text, &list), CQ_ENOMEM);
    list_free(&list, &oom);
  }
  free(text);
}

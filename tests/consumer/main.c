/* Acquires and releases through an installed or vendored libcronoq. */
#include <cronoq/cronoq.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  cq_pool *pool;
  cq_req req;
  cq_grant grant;
  if (cq_pool_create(&pool, NULL) != 0 || cq_budget_add(pool, "db", 1) != 0 ||
      cq_req_init(&req, pool) != 0 || cq_req_add(&req, "db", 1) != 0)
    return 1;
  cq_grant_init(&grant);
  if (cq_grant_try(pool, &grant, &req) != 0 ||
      cq_grant_try(pool, &grant, &req) != CQ_ESTATE ||
      cq_grant_release(pool, &grant) != 0)
    return 1;
  if (strcmp(cq_version_string(), "0.0.0") <= 0)
    return 1;
  printf("consumer ok, libcronoq %s\n", cq_version_string());
  return cq_pool_destroy(pool);
}

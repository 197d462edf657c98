/*
 * Quick start: a pool with two budgets, a request built once, and acquire /
 * release around each attempt of a task. The README shows this file.
 */
#include <cronoq/cronoq.h>

#include <stdio.h>

static int run_task(int attempt) {
  printf("attempt %d runs with a connection and 2 GiB\n", attempt);
  return 0;
}

int main(void) {
  cq_pool *pool;
  if (cq_pool_create(&pool, NULL) != 0)
    return 1;
  cq_budget_add(pool, "warehouse-db", 10); /* connections */
  cq_budget_add(pool, "memory_mib", 24576);

  /* Built and checked once, reused for every attempt. */
  cq_req req;
  cq_req_init(&req, pool);
  if (cq_req_add(&req, "warehouse-db", 1) != 0 ||
      cq_req_add(&req, "memory_mib", 2048) != 0) {
    fprintf(stderr, "bad request: %s\n", cq_req_error(&req));
    return 1;
  }

  for (int attempt = 1; attempt <= 3; attempt++) {
    cq_grant grant;
    cq_grant_init(&grant);
    /* Wait at most 5 s for both resources, all at once. */
    int rc = cq_grant_acquire(pool, &grant, &req, cq_now() + 5000);
    if (rc != 0) {
      fprintf(stderr, "not granted: %s %s\n", cq_strerror(rc),
              cq_grant_error(&grant));
      continue;
    }
    run_task(attempt);
    cq_grant_release(pool, &grant); /* success, failure or timeout alike */
  }
  return cq_pool_destroy(pool) == 0 ? 0 : 1;
}

// Compiles the public headers as C++ and calls a few functions, so that the
// headers stay usable from C++ (extern "C", no C-only constructs).
#include <cronoq/cronoq.h>

#include <cstdio>
#include <cstring>

int main() {
  cq_pool *pool = nullptr;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  if (cq_pool_create(&pool, &cfg) != 0)
    return 1;
  if (cq_budget_add(pool, "db", 2) != 0)
    return 1;
  cq_req req;
  cq_grant grant;
  cq_grant_init(&grant);
  if (cq_req_init(&req, pool) != 0 || cq_req_add(&req, "db", 1) != 0)
    return 1;
  if (cq_grant_try(pool, &grant, &req) != 0)
    return 1;
  if (cq_grant_release(pool, &grant) != 0)
    return 1;
  if (std::strcmp(cq_err_name(CQ_EBUSY), "EBUSY") != 0)
    return 1;
  std::printf("libcronoq %s from C++\n", cq_version_string());
  return cq_pool_destroy(pool) == 0 ? 0 : 1;
}

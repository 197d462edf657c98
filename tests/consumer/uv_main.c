/* Acquires through an installed or vendored libcronoq's libuv adapter:
 * one grant on a loop, released from its callback, and a loop that closes
 * with the adapter. */
#include <cronoq/cronoq_uv.h>

#include <stdio.h>

static int granted;

static void on_grant(cq_uv_req *req, int status) {
  cq_uv *uv = req->data;
  if (status == 0 && cq_uv_release(req) == 0)
    granted++;
  (void)cq_uv_close(uv, NULL);
}

int main(void) {
  uv_loop_t loop;
  cq_pool *pool;
  cq_uv *uv;
  cq_req req;
  cq_uv_req ureq;
  if (uv_loop_init(&loop) != 0 || cq_pool_create(&pool, NULL) != 0 ||
      cq_budget_add(pool, "db", 1) != 0 || cq_req_init(&req, pool) != 0 ||
      cq_req_add(&req, "db", 1) != 0 || cq_uv_init(&uv, &loop, pool, NULL) != 0)
    return 1;
  cq_uv_req_init(&ureq);
  ureq.data = uv;
  if (cq_uv_acquire(uv, &ureq, &req, CQ_NEVER, on_grant) != 0)
    return 1;
  if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0 ||
      granted != 1)
    return 1;
  printf("adapter consumer ok, libcronoq %s\n", cq_version_string());
  return cq_pool_destroy(pool);
}

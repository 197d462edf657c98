/*
 * fleet_share: processes on several hosts share a licence, and each host's
 * GPUs, through one fleet pool on a Redis server.
 *
 *   fleet_share URL NAMESPACE JOBS [new]
 *
 * Run it as several processes (on one host or several, each with its own
 * CRONOQ_HOST): every process declares the same resources (`licence=2` for
 * the whole fleet, `gpu=auto` for its own host's GPUs), then runs JOBS jobs,
 * each of which needs half a GPU of its own host and one licence seat, all
 * at once. At most two jobs hold the licence across every process, in
 * arrival order. Each job prints when it started and ended (on the
 * monotonic clock, which every process of a host shares), its device and
 * its fencing token.
 *
 * A namespace the server has to create waits out a quarantine (its longest
 * TTL, 10 s) before its first grant, in case an earlier state of it was
 * lost with holders still running; `new` says that no process ever used
 * this namespace (CQ_FLEET_NEW_NAMESPACE), as in this example's test.
 *
 * The server is Redis 7 or later with `maxmemory-policy noeviction`; a
 * user that may not load functions needs the library loaded by an operator
 * first (`cronoq load URL`): docs/OPERATIONS.md.
 */
#include <cronoq/cronoq.h>
#include <cronoq/cronoq_fleet.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s URL NAMESPACE JOBS [new]\n", argv[0]);
    return 2;
  }
  int jobs = atoi(argv[3]);
  cq_fleet_opts opts = CQ_FLEET_OPTS_INIT;
  if (argc == 5)
    opts.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
  cq_pool *pool;
  int rc = cq_fleet_open(&pool, argv[1], argv[2], &opts);
  if (rc != 0) {
    fprintf(stderr, "fleet_share: %s: %s\n", cq_err_name(rc), cq_fleet_error());
    return 1;
  }
  char err[256];
  rc = cq_pool_add_spec(pool, "licence=2,gpu=auto", NULL, err, sizeof(err));
  if (rc != 0) {
    fprintf(stderr, "fleet_share: %s: %s\n", cq_err_name(rc), err);
    cq_pool_destroy(pool);
    return 1;
  }
  cq_req req;
  cq_req_init(&req, pool);
  rc = cq_req_parse(&req, "gpu=0.5,licence=1"); /* this host's gpu */
  for (int i = 0; rc == 0 && i < jobs; i++) {
    cq_grant grant;
    cq_grant_init(&grant);
    rc = cq_grant_acquire(pool, &grant, &req, cq_now() + 60000);
    if (rc != 0)
      break;
    char devices[64] = "";
    uint64_t fence = 0;
    cq_grant_cuda_visible(&grant, "gpu", devices, sizeof(devices));
    cq_fleet_grant_fence(&grant, &fence);
    int64_t start = cq_now();
    sleep_ms(50); /* the job, with CUDA_VISIBLE_DEVICES=devices */
    int64_t end = cq_now();
    /* Ended before it says so: whoever reads the lines sees the seat
     * free again only after this one's end. */
    rc = cq_grant_release(pool, &grant);
    printf("job %s.%d start %" PRId64 " end %" PRId64 " gpu %s token %" PRIu64
           "\n",
           cq_fleet_host(pool), i, start, end, devices, fence);
    fflush(stdout);
  }
  if (rc != 0)
    fprintf(stderr, "fleet_share: %s: %s\n", cq_err_name(rc), cq_fleet_error());
  /* Ends the session: what it holds comes back at once, where a process
   * that exits without it gives its units back at its TTL. */
  cq_pool_destroy(pool);
  return rc == 0 ? 0 : 1;
}

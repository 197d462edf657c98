/*
 * The pool the jobs are admitted by, made from the options.
 *
 * pool_open() is the only place that creates the pool and declares what is
 * in it; everything after it uses the public API on whatever pool it made.
 * With --pool it opens a fleet pool (cronoq_fleet.h) on a namespace of a
 * Redis server instead, shared by every runner that opens it: the rest of
 * the runner asks nothing of the pool but what the API offers. A fleet
 * pool has no backfill.
 *
 * What it makes:
 * - the resources of --resources, as cq_pool_add_spec() reads them;
 * - the jobs budget of -j (RUNNER_JOBS_BUDGET, one CPU each by default),
 *   which the default request asks one unit of, so that a job naming
 *   nothing is still limited (0: no budget, no limit). On a fleet pool -j
 *   is this runner's own, as it is each instance's in GNU parallel: no
 *   budget of the namespace, but slots the runner counts itself (run.c),
 *   which a job asking the default request takes before it queues; a
 *   `jobs` budget of --resources is the namespace's, as any resource;
 * - backfill on (CQ_POOL_BACKFILL): only requests with a hold limit ever
 *   backfill, and the runner gives one to every job with a time limit, so
 *   with no limits nothing changes but that every acquire takes the lock.
 * It checks the names the runner itself gives a meaning to: the GPU pool,
 * the pools of --device-env, the default request, and that no resource
 * takes a name the job lines use for the runner (timeout=, name=).
 */
#include "runner.h"

#include <stdlib.h>
#include <string.h>

#ifdef CRONOQ_RUN_FLEET
#include <cronoq/cronoq_fleet.h>
#endif

static int pool_error(const char *what, const char *detail) {
  fprintf(stderr, "cronoq-run: %s%s%s\n", what, detail[0] != '\0' ? ": " : "",
          detail);
  return 2;
}

/* Whether `name` is a device pool of the pool. */
static bool is_device_pool(cq_pool *pool, const char *name) {
  cq_resource_stats st;
  return cq_resource_stats_get(pool, name, &st) == 0 &&
         st.kind == CQ_KIND_DEVICES;
}

/* The pool itself: in-process, or the fleet pool of --pool. */
static int pool_make(struct runner *r, const struct options *o) {
  if (o->pool_url != NULL) {
#ifdef CRONOQ_RUN_FLEET
    const char *ns = o->pool_ns != NULL ? o->pool_ns : "cronoq-run";
    cq_fleet_opts fo = CQ_FLEET_OPTS_INIT;
    if (o->new_namespace)
      fo.fleet_flags = CQ_FLEET_NEW_NAMESPACE;
    int rc = cq_fleet_open(&r->pool, o->pool_url, ns, &fo);
    /* The URL as given may hold a password: it is never written. The
     * library's message names the URL with the password hidden. */
    if (rc != 0)
      return pool_error("--pool", cq_fleet_error()[0] != '\0'
                                      ? cq_fleet_error()
                                      : cq_strerror(rc));
    return 0;
#else
    return pool_error("--pool", "this cronoq-run was built without fleet "
                                "pools (hiredis)");
#endif
  }
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.flags = CQ_POOL_BACKFILL;
  int rc = cq_pool_create(&r->pool, &cfg);
  return rc != 0 ? pool_error(cq_strerror(rc), "") : 0;
}

int pool_open(struct runner *r, const struct options *o) {
  int rc = pool_make(r, o);
  if (rc != 0)
    return rc;
  char err[256] = "";
  if (o->resources != NULL &&
      (rc = cq_pool_add_spec(r->pool, o->resources, NULL, err, sizeof(err))) !=
          0)
    return pool_error(err[0] != '\0' ? err : cq_strerror(rc), "");
  static const char *const reserved[] = {"timeout", "name"};
  for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
    cq_resource_stats st;
    if (cq_resource_stats_get(r->pool, reserved[i], &st) == 0) {
      fprintf(stderr,
              "cronoq-run: --resources: \"%s\" is a word of the job lines "
              "(%s=); give the resource another name\n",
              reserved[i], reserved[i]);
      return 2;
    }
  }

  /* The jobs budget; a --resources budget of that name takes its place.
   * On a fleet pool, the runner's own slots instead. */
  cq_resource_stats st;
  bool own_jobs = cq_resource_stats_get(r->pool, RUNNER_JOBS_BUDGET, &st) == 0;
  bool local = o->pool_url != NULL && !own_jobs;
  if (local && o->request == NULL)
    r->local_jobs = o->jobs;
  else if (!own_jobs && !local && o->jobs > 0 &&
           (rc = cq_budget_add(r->pool, RUNNER_JOBS_BUDGET, o->jobs)) != 0)
    return pool_error("-j", cq_strerror(rc));
  const char *request = o->request;
  if (request == NULL)
    request =
        own_jobs || (!local && o->jobs > 0) ? RUNNER_JOBS_BUDGET "=1" : "";
  r->default_request = strdup(request);
  if (r->default_request == NULL)
    return pool_error("out of memory", "");
  cq_req check;
  if (cq_req_init(&check, r->pool) != 0 || cq_req_parse(&check, request) != 0)
    return pool_error("--request", cq_req_error(&check));

  const char *gpu = o->gpu_pool != NULL ? o->gpu_pool : "gpu";
  if (is_device_pool(r->pool, gpu))
    r->gpu_pool = gpu;
  else if (o->gpu_pool != NULL)
    return pool_error("--gpu-pool", "--resources has no device pool of that "
                                    "name");
  for (size_t i = 0; i < o->n_device_env; i++)
    if (!is_device_pool(r->pool, o->device_env[i].pool)) {
      fprintf(stderr,
              "cronoq-run: --device-env %s=%s: --resources has no device "
              "pool of that name\n",
              o->device_env[i].pool, o->device_env[i].var);
      return 2;
    }

  /* Room for every resource: they are only added here. (+ 1: calloc(0)
   * may return NULL, which would read as out of memory.) */
  (void)cq_pool_snapshot(r->pool, NULL, 0, &r->snapshot_cap);
  r->snapshot = calloc(r->snapshot_cap + 1, sizeof(*r->snapshot));
  if (r->snapshot == NULL)
    return pool_error("out of memory", "");
  return 0;
}

size_t pool_snapshot(struct runner *r) {
  /* Each try makes room for what the last one counted; a namespace that
   * grows faster than that keeps its first resources. */
  for (int tries = 0; tries < 4; tries++) {
    size_t count = 0;
    if (cq_pool_snapshot(r->pool, r->snapshot, r->snapshot_cap, &count) != 0)
      return 0;
    if (count <= r->snapshot_cap)
      return count;
    cq_resource_stats *more = realloc(r->snapshot, (count + 1) * sizeof(*more));
    if (more == NULL)
      break;
    r->snapshot = more;
    r->snapshot_cap = count;
  }
  return r->snapshot_cap;
}

void pool_say_limits(struct runner *r, const struct options *o) {
  if (o->pool_url == NULL)
    return;
  struct strbuf sb = {0};
  sb_puts(&sb, "cronoq-run: limits: ");
  if (r->local_jobs > 0)
    sb_printf(&sb, "-j %lld, this runner's own", (long long)r->local_jobs);
  else if (o->request != NULL)
    sb_puts(&sb, "no -j limit (--request)");
  else if (cq_resource_stats_get(r->pool, RUNNER_JOBS_BUDGET, r->snapshot) != 0)
    sb_puts(&sb, "no -j limit (-j 0)");
  else
    sb_puts(&sb, "-j: the namespace's budget jobs (from --resources)");
  /* What the namespace has now: the shared budgets and classes (with their
   * live capacities, which a declaration does not change), and the device
   * pools, each its host's ("gpu@host"). */
  size_t count = pool_snapshot(r);
  const char *ns = o->pool_ns != NULL ? o->pool_ns : "cronoq-run";
  for (int devices = 0; devices <= 1; devices++) {
    bool first = true;
    for (size_t i = 0; i < count; i++) {
      const cq_resource_stats *st = &r->snapshot[i];
      if ((st->kind == CQ_KIND_DEVICES) != devices)
        continue;
      if (first)
        sb_printf(&sb,
                  devices ? "; device pools, each its host's: "
                          : "; shared in namespace \"%s\": ",
                  ns);
      sb_printf(&sb, "%s%s", first ? "" : ", ", st->name);
      first = false;
      if (st->kind == CQ_KIND_DEVICES)
        sb_printf(&sb, "=%u", st->devices);
      else
        sb_printf(&sb, "%s=%lld", st->kind == CQ_KIND_CLASS ? ":class" : "",
                  (long long)st->capacity);
    }
    if (first && !devices)
      sb_printf(&sb, "; nothing shared in namespace \"%s\"", ns);
  }
  char *line = sb_take(&sb);
  if (line != NULL)
    fprintf(stderr, "%s\n", line);
  free(line);
}

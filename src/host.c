/*
 * What host schedulers ask besides acquire and release: headroom (how many
 * more copies of a request fit now), startup validation of a set of tasks,
 * and the room query of pull-based runners. All read the pool under its
 * lock, with the same rules as a new arrival: what is withheld or reserved
 * for waiters is not counted as free.
 */
#include "pool.h"

#include "place.h"
#include "validate.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int cq_req_headroom(cq_pool *pool, const cq_req *req, int64_t *copies) {
  if (pool == NULL || req == NULL || copies == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, req_headroom, pool, req, copies);
  const struct cq__req *r = cq__req_ofc(req);
  if (r->magic != CQ__REQ_MAGIC)
    return CQ_EINVAL;
  if (r->pool != pool)
    return CQ_EPOOL;
  char msg[CQ__MSG_MAX];
  int64_t n = INT64_MAX;
  cq__mutex_lock(&pool->lock);
  int rc = cq__validate(r, msg);
  for (uint32_t i = 0; rc == 0 && i < r->n_items; i++) {
    struct cq__res *res = r->items[i].res;
    int64_t k;
    if (res->kind == CQ__RES_DEVICES) {
      k = cq__dev_copies(res, r->items[i].mode, r->items[i].amount,
                         cq__policy_reservation(res));
    } else {
      int64_t need =
          cq__need_at(res, r->items[i].amount, cq__res_capacity(res));
      k = need > 0 ? cq__policy_open(res) / need : 0;
    }
    if (k < n)
      n = k;
  }
  cq__mutex_unlock(&pool->lock);
  *copies = rc == 0 ? n : 0;
  return rc;
}

/* Problems of one task's request, written into msgs; returns how many, and
 * the first code in *first. Lock held. */
static int task_problems(cq_pool *p, const cq_task *t, char msgs[][CQ__MSG_MAX],
                         int *first) {
  const char *name = t->name != NULL ? t->name : "?";
  if (t->req == NULL || cq__req_ofc(t->req)->magic != CQ__REQ_MAGIC) {
    cq__msgf(msgs[0], CQ__MSG_MAX, "task \"%.40s\" has no valid request", name);
    *first = CQ_EINVAL;
    return 1;
  }
  const struct cq__req *r = cq__req_ofc(t->req);
  if (r->pool != p) {
    cq__msgf(msgs[0], CQ__MSG_MAX,
             "task \"%.40s\": its request belongs to another pool", name);
    *first = CQ_EPOOL;
    return 1;
  }
  int n = 0;
  for (uint32_t i = 0; i < r->n_items; i++) {
    const struct cq__ritem *it = &r->items[i];
    char scratch[CQ__MSG_MAX], what[CQ_NAME_MAX + 40];
    int rc = cq__validate_item(it, scratch);
    if (rc == 0)
      continue;
    if (n == 0)
      *first = rc;
    const struct cq__res *res = it->res;
    cq__item_text(what, sizeof(what), it);
    if (rc == CQ_ENOENT)
      cq__msgf(msgs[n], CQ__MSG_MAX,
               "task \"%.40s\" requires %s, which was removed", name,
               res->name);
    else if (res->kind == CQ__RES_CLASS)
      cq__msgf(msgs[n], CQ__MSG_MAX,
               "task \"%.40s\" is of class %s, whose max_workers is %" PRId64,
               name, res->name, cq__res_capacity(res));
    else if (res->kind == CQ__RES_DEVICES)
      cq__msgf(msgs[n], CQ__MSG_MAX,
               "task \"%.40s\" requires %s but the pool only has %u", name,
               what, res->n_online);
    else
      cq__msgf(msgs[n], CQ__MSG_MAX,
               "task \"%.40s\" requires %s but the pool only has %" PRId64,
               name, what, cq__res_capacity(res));
    n++;
  }
  return n;
}

int cq_tasks_validate(cq_pool *pool, const cq_task *tasks, size_t n,
                      cq_problem_fn fn, void *arg) {
  if (pool == NULL || (tasks == NULL && n > 0))
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, tasks_validate, pool, tasks, n, fn, arg);
  int result = 0;
  for (size_t t = 0; t < n; t++) {
    char msgs[CQ_REQ_MAX_ITEMS][CQ__MSG_MAX];
    int first = 0;
    cq__mutex_lock(&pool->lock);
    int k = task_problems(pool, &tasks[t], msgs, &first);
    cq__mutex_unlock(&pool->lock);
    if (k > 0 && result == 0)
      result = first;
    for (int i = 0; i < k && fn != NULL; i++)
      fn(t, first, msgs[i], arg);
  }
  return result;
}

int cq_pool_room(cq_pool *pool, const char *job_class, cq_room *out) {
  if (pool == NULL || out == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, pool_room, pool, job_class, out);
  memset(out, 0, sizeof(*out));
  cq__mutex_lock(&pool->lock);
  struct cq__res *cls = NULL;
  if (job_class != NULL) {
    cls = cq__res_find(&pool->tab, job_class);
    if (cls == NULL || cls->kind != CQ__RES_CLASS) {
      cq__mutex_unlock(&pool->lock);
      return CQ_ENOENT;
    }
  }
  bool idle = pool->q.n_waiters + pool->q.n_sleepers == 0, all_lone = true,
       exhausted = false;
  size_t limited = 0;
  for (int pass = 0; pass < 2; pass++) { /* device pools first */
    for (uint32_t s = 0; s < pool->tab.n_slots; s++) {
      struct cq__res *r = pool->tab.res[s];
      if (r == NULL || r->kind == CQ__RES_CLASS ||
          (r->kind == CQ__RES_DEVICES) != (pass == 0))
        continue;
      limited++;
      idle = idle && cq__res_used(r) == 0;
      all_lone =
          all_lone && r->kind == CQ__RES_BUDGET && (r->flags & CQ_BUDGET_LONE);
      int64_t units, largest = 0;
      uint32_t whole = 0;
      if (r->kind == CQ__RES_DEVICES)
        cq__dev_room(r, cq__policy_reservation(r), &units, &largest, &whole);
      else
        units = cq__policy_open(r);
      exhausted = exhausted || units == 0;
      if (out->count < CQ_ROOM_MAX) {
        memcpy(out->items[out->count].name, r->name, sizeof(r->name));
        out->items[out->count].units = units;
        out->items[out->count].largest_milli = largest;
        out->items[out->count].whole = whole;
        out->count++;
      }
    }
  }
  if (cls != NULL && cq__policy_open(cls) == 0)
    out->kind = CQ_ROOM_NONE;
  else if (limited == 0)
    out->kind = CQ_ROOM_UNLIMITED;
  else if (idle && all_lone && (cls == NULL || cq__res_used(cls) == 0))
    out->kind = CQ_ROOM_EVERYTHING;
  else if (exhausted)
    out->kind = CQ_ROOM_NONE;
  else
    out->kind = CQ_ROOM_LIMITED;
  cq__mutex_unlock(&pool->lock);
  return 0;
}

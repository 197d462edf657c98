/*
 * Device pools through the API: adding one, taking a device offline and
 * back, and device amounts as text. Where work goes on the devices is
 * place.c's; who is granted, the policy's.
 */
#include "pool.h"

#include "place.h"
#include "util/name.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static inline struct cq__dev *node_dev(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct cq__dev, node);
}

static int id_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  return strcmp(node_dev(a)->id, node_dev(b)->id);
}

static int id_key_cmp(const cq__rbnode *n, const void *key) {
  return strcmp(node_dev(n)->id, key);
}

/* Whether two of the `count` devices share an id (n log n, without
 * allocating: the devices' own tree nodes are borrowed, then cleared). */
static bool ids_repeat(struct cq__dev *devs, size_t count) {
  cq__rbtree by_id;
  memset(&by_id, 0, sizeof(by_id));
  bool repeat = false;
  for (size_t i = 0; i < count && !repeat; i++) {
    cq__rbnode *same = cq__rb_lower_bound(&by_id, devs[i].id, id_key_cmp);
    repeat = same != NULL && strcmp(node_dev(same)->id, devs[i].id) == 0;
    if (!repeat)
      cq__rb_insert(&by_id, &devs[i].node, id_cmp);
  }
  for (size_t i = 0; i < count; i++)
    memset(&devs[i].node, 0, sizeof(devs[i].node));
  return repeat;
}

int cq_devices_add(cq_pool *pool, const char *name, size_t count,
                   const char *const *ids) {
  CQ__TO_BACKEND(pool, devices_add, pool, name, count, ids);
  if (pool == NULL || cq__name_check(name) != 0)
    return CQ_EINVAL;
  if (count > CQ_DEVICES_MAX)
    return CQ_ERANGE;
  for (size_t i = 0; ids != NULL && i < count; i++)
    if (ids[i] == NULL || cq__device_id_check(ids[i]) != 0)
      return CQ_EINVAL;

  struct cq__dev *devs = NULL;
  if (count > 0) {
    devs = cq__alloc(&pool->alloc, count * sizeof(*devs));
    if (devs == NULL)
      return CQ_ENOMEM;
    memset(devs, 0, count * sizeof(*devs));
  }
  for (size_t i = 0; i < count; i++) {
    devs[i].index = (uint32_t)i;
    devs[i].whole_next = -1;
    devs[i].online = true;
    if (ids != NULL)
      memcpy(devs[i].id, ids[i], strlen(ids[i]) + 1);
    else
      snprintf(devs[i].id, sizeof(devs[i].id), "%zu", i);
  }
  if (ids != NULL && ids_repeat(devs, count)) {
    cq__free(&pool->alloc, devs);
    return CQ_EINVAL;
  }

  cq__mutex_lock(&pool->lock);
  struct cq__res *r;
  int rc = cq__res_add(&pool->tab, &pool->alloc, name, CQ__RES_DEVICES, &r);
  if (rc == 0) {
    r->devs = devs;
    r->n_devs = (uint32_t)count;
    r->n_online = (uint32_t)count;
    atomic_store_explicit(&r->capacity, (int64_t)count * CQ_DEVICE_MILLI,
                          memory_order_relaxed);
    cq__dev_insert_all(r);
  }
  cq__mutex_unlock(&pool->lock);
  if (rc != 0)
    cq__free(&pool->alloc, devs);
  return rc;
}

int cq_device_amount_parse(const char *text, int64_t *milli) {
  if (text == NULL || milli == NULL)
    return CQ_EINVAL;
  const char *c = text;
  int64_t whole = 0, frac = 0;
  int digits = 0, decimals = 0;
  if (*c == '-' || *c == '+') {
    if (*c == '-' && c[1] >= '0' && c[1] <= '9')
      return CQ_ERANGE;
    return CQ_EPARSE;
  }
  for (; *c >= '0' && *c <= '9'; c++, digits++) {
    whole = whole * 10 + (*c - '0');
    if (whole > CQ_DEVICES_MAX)
      return CQ_ERANGE;
  }
  if (*c == '.') {
    c++;
    for (; *c >= '0' && *c <= '9'; c++, decimals++) {
      if (decimals >= 3) {
        if (*c != '0')
          return CQ_ERANGE; /* finer than 1/1000: refuse, never round */
        continue;
      }
      frac = frac * 10 + (*c - '0');
    }
    if (decimals == 0)
      return CQ_EPARSE;
  }
  if (*c != '\0' || (digits == 0 && decimals == 0))
    return CQ_EPARSE;
  for (int d = decimals < 3 ? decimals : 3; d < 3; d++)
    frac *= 10;
  int64_t v = whole * CQ_DEVICE_MILLI + frac;
  if (v <= 0)
    return CQ_ERANGE;
  *milli = v;
  return 0;
}

int cq_device_set_online(cq_pool *pool, const char *name, uint32_t index,
                         int online) {
  if (pool == NULL || name == NULL)
    return CQ_EINVAL;
  CQ__TO_BACKEND(pool, device_set_online, pool, name, index, online);
  struct cq__outbox o;
  cq__outbox_init(&o, pool);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = cq__res_find(&pool->tab, name);
  if (r == NULL || r->kind != CQ__RES_DEVICES || index >= r->n_devs) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOENT;
  }
  struct cq__dev *d = &r->devs[index];
  if (d->online != (online != 0)) {
    cq__dev_set_online(r, d, online != 0);
    cq__policy_capacity_changed(pool, r, online == 0, &o);
  }
  CQ__POLICY_CHECK(pool);
  cq__mutex_unlock(&pool->lock);
  cq__outbox_flush(&o);
  return 0;
}

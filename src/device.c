/*
 * Device pools: N devices, each of capacity CQ_DEVICE_MILLI thousandths.
 *
 * Rules kept here (queue.c decides who is granted, this file decides where):
 * - Admission is per device, never on the sum: a fraction f fits when some
 *   allowed device has f free; n whole devices fit when n allowed devices
 *   are entirely free.
 * - A fraction goes best fit: the allowed device with the least free
 *   capacity that still fits it, ties to the lowest index.
 * - Whole devices are the lowest-index allowed devices that are entirely
 *   free. A device is held whole or in fractions, never both: whole needs
 *   it entirely free, and once held whole it has nothing free.
 * - Reservation: the pool's claimant (the oldest waiter that claimed it)
 *   reserves only what it needs, chosen afresh at every question, since
 *   capacities change: one device for a fraction, the one with the most
 *   free capacity (ties to the lowest index); n devices for n whole ones,
 *   the n with the most free capacity. Requests younger than the claimant
 *   may use every device that is not reserved; the claimant and older
 *   requests may use them all. "Allowed" above means exactly that.
 *
 * Online devices sit in `by_free`, ordered by (free, index), so best fit is
 * a lower-bound search and the most free devices are found from the end: the
 * cost grows with the logarithm of the number of devices. A reservation is
 * a stamp written on the reserved devices for the duration of one question.
 */
#include "cq_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct dev_key {
  int64_t free;
  uint32_t index;
};

static inline struct cq__dev *node_dev(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct cq__dev, node);
}

static int key_order(int64_t fa, uint32_t ia, int64_t fb, uint32_t ib) {
  if (fa != fb)
    return fa < fb ? -1 : 1;
  return (ia > ib) - (ia < ib);
}

static int dev_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  const struct cq__dev *x = node_dev(a), *y = node_dev(b);
  return key_order(cq__dev_free(x), x->index, cq__dev_free(y), y->index);
}

static int dev_key_cmp(const cq__rbnode *n, const void *key) {
  const struct cq__dev *d = node_dev(n);
  const struct dev_key *k = key;
  return key_order(cq__dev_free(d), d->index, k->free, k->index);
}

/* The first online device with at least `free` free, lowest index first. */
static cq__rbnode *first_with(const struct cq__res *r, int64_t free) {
  struct dev_key k = {free, 0};
  return cq__rb_lower_bound(&r->by_free, &k, dev_key_cmp);
}

/* Change a device's use, keeping its place in the tree. */
static void dev_use(struct cq__res *r, struct cq__dev *d, int64_t delta) {
  if (d->online)
    cq__rb_remove(&r->by_free, &d->node);
  d->used += delta;
  if (d->used > d->peak)
    d->peak = d->used;
  if (d->online)
    cq__rb_insert(&r->by_free, &d->node, dev_cmp);
  uint64_t w = atomic_fetch_add_explicit(&r->word, (uint64_t)delta,
                                         memory_order_relaxed);
  cq__peak_raise(r, cq__w_used(w) + delta);
}

/* ------------------------------------------------------------------------ */
/* Reservation                                                               */
/* ------------------------------------------------------------------------ */

static const struct cq__gitem *pool_claimant(const struct cq__res *r) {
  cq__rbnode *n = cq__rb_first(&r->claims);
  return n != NULL ? CQ__CONTAINER_OF(n, struct cq__gitem, u.claim) : NULL;
}

uint64_t cq__dev_reserve(struct cq__res *r, const struct cq__gitem *c) {
  const struct cq__ritem *ask = cq__item_ask(c);
  uint64_t stamp = ++r->stamp;
  int64_t want = ask->mode == CQ__MODE_WHOLE ? ask->amount : 1;
  cq__rbnode *last = cq__rb_last(&r->by_free);
  /* Walk the groups of equal free capacity from the most free down; within
   * a group, lowest index first. */
  while (want > 0 && last != NULL) {
    int64_t free = cq__dev_free(node_dev(last));
    cq__rbnode *group = first_with(r, free);
    cq__rbnode *n = group;
    for (; n != NULL && want > 0; n = cq__rb_next(n)) {
      struct cq__dev *d = node_dev(n);
      if (cq__dev_free(d) != free)
        break;
      d->mark = stamp;
      want--;
    }
    last = cq__rb_prev(group);
  }
  return stamp;
}

int64_t cq__dev_withheld(struct cq__res *r, const struct cq__gitem *c) {
  uint64_t stamp = cq__dev_reserve(r, c);
  int64_t sum = 0;
  for (uint32_t i = 0; i < r->n_devs; i++)
    if (r->devs[i].online && r->devs[i].mark == stamp)
      sum += cq__dev_free(&r->devs[i]);
  return sum;
}

/* ------------------------------------------------------------------------ */
/* Fitting and placing                                                       */
/* ------------------------------------------------------------------------ */

/*
 * The devices a request would get: for a fraction the best-fit device, for
 * whole devices the first of `count` found (they are chained through
 * whole_next when `chain` is set). Returns NULL when it does not fit.
 */
static struct cq__dev *find(struct cq__res *r, uint8_t mode, int64_t amount,
                            const struct cq__gitem *excl, bool chain) {
  uint64_t stamp = excl != NULL ? cq__dev_reserve(r, excl) : 0;
  if (mode == CQ__MODE_FRACTION) {
    for (cq__rbnode *n = first_with(r, amount); n != NULL; n = cq__rb_next(n))
      if (stamp == 0 || node_dev(n)->mark != stamp)
        return node_dev(n);
    return NULL;
  }
  struct cq__dev *first = NULL, *prev = NULL;
  int64_t found = 0;
  for (cq__rbnode *n = first_with(r, CQ_DEVICE_MILLI);
       n != NULL && found < amount; n = cq__rb_next(n)) {
    struct cq__dev *d = node_dev(n);
    if (stamp != 0 && d->mark == stamp)
      continue;
    if (chain) {
      if (prev != NULL)
        prev->whole_next = (int32_t)d->index;
      d->whole_next = -1;
    }
    if (first == NULL)
      first = d;
    prev = d;
    found++;
  }
  return found == amount ? first : NULL;
}

int32_t cq__dev_peek(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__gitem *excl) {
  struct cq__dev *first = find(r, mode, amount, excl, true);
  return first != NULL ? (int32_t)first->index : -1;
}

bool cq__dev_fits(struct cq__res *r, uint8_t mode, int64_t amount,
                  const struct cq__gitem *excl) {
  return find(r, mode, amount, excl, false) != NULL;
}

int32_t cq__dev_take(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__gitem *excl) {
  struct cq__dev *first = find(r, mode, amount, excl, true);
  CQ__ASSERT(first != NULL);
  if (mode == CQ__MODE_FRACTION) {
    dev_use(r, first, amount);
    first->grants++;
    return (int32_t)first->index;
  }
  /* Taking a device moves it in the tree, so follow the chain built by
   * find(), not the tree. */
  for (struct cq__dev *d = first; d != NULL;) {
    int32_t next = d->whole_next;
    dev_use(r, d, CQ_DEVICE_MILLI);
    d->whole = true;
    d->grants++;
    d = next >= 0 ? &r->devs[next] : NULL;
  }
  return (int32_t)first->index;
}

void cq__dev_put(struct cq__res *r, uint8_t mode, int32_t dev, int64_t amount) {
  if (mode == CQ__MODE_FRACTION) {
    if (amount > 0)
      dev_use(r, &r->devs[dev], -amount);
    return;
  }
  while (dev >= 0) {
    struct cq__dev *d = &r->devs[dev];
    dev = d->whole_next;
    d->whole = false;
    d->whole_next = -1;
    dev_use(r, d, -CQ_DEVICE_MILLI);
  }
}

void cq__dev_put_one(struct cq__res *r, struct cq__gitem *it, uint32_t index) {
  int32_t *link = &it->u.hold.dev;
  while (*link >= 0 && (uint32_t)*link != index)
    link = &r->devs[*link].whole_next;
  CQ__ASSERT(*link >= 0);
  struct cq__dev *d = &r->devs[index];
  *link = d->whole_next;
  d->whole = false;
  d->whole_next = -1;
  dev_use(r, d, -CQ_DEVICE_MILLI);
  it->u.hold.held -= CQ_DEVICE_MILLI;
}

/* Stamp the reservation that applies to a new request; 0 if none. */
static uint64_t newcomer_stamp(struct cq__res *r) {
  const struct cq__gitem *c = pool_claimant(r);
  return c != NULL ? cq__dev_reserve(r, c) : 0;
}

int64_t cq__dev_copies(struct cq__res *r, uint8_t mode, int64_t amount) {
  uint64_t stamp = newcomer_stamp(r);
  int64_t copies = 0;
  if (mode == CQ__MODE_FRACTION) {
    /* Fractions never span devices: each device hosts free / f copies. */
    for (cq__rbnode *n = first_with(r, amount); n != NULL; n = cq__rb_next(n))
      if (stamp == 0 || node_dev(n)->mark != stamp)
        copies += cq__dev_free(node_dev(n)) / amount;
    return copies;
  }
  for (cq__rbnode *n = first_with(r, CQ_DEVICE_MILLI); n != NULL;
       n = cq__rb_next(n))
    if (stamp == 0 || node_dev(n)->mark != stamp)
      copies++;
  return copies / amount;
}

void cq__dev_room(struct cq__res *r, int64_t *units, int64_t *largest,
                  uint32_t *whole) {
  uint64_t stamp = newcomer_stamp(r);
  *units = *largest = 0;
  *whole = 0;
  for (cq__rbnode *n = cq__rb_first(&r->by_free); n != NULL;
       n = cq__rb_next(n)) {
    struct cq__dev *d = node_dev(n);
    if (stamp != 0 && d->mark == stamp)
      continue;
    int64_t free = cq__dev_free(d);
    *units += free;
    if (free > *largest)
      *largest = free;
    if (free == CQ_DEVICE_MILLI)
      (*whole)++;
  }
}

bool cq__dev_any_free(const struct cq__res *r) {
  cq__rbnode *last = cq__rb_last(&r->by_free);
  return last != NULL && cq__dev_free(node_dev(last)) > 0;
}

/* ------------------------------------------------------------------------ */
/* Public: adding, parsing, stats                                            */
/* ------------------------------------------------------------------------ */

static int id_check(const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > CQ_DEVICE_ID_MAX)
    return CQ_EINVAL;
  for (const char *c = id; *c; c++)
    if (*c == ',' || *c == ' ' || *c == '\t' || *c == '\n' || *c == '=' ||
        (unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
      return CQ_EINVAL;
  return 0;
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
  if (pool == NULL || cq__name_check(name) != 0)
    return CQ_EINVAL;
  if (count > CQ_DEVICES_MAX)
    return CQ_ERANGE;
  for (size_t i = 0; ids != NULL && i < count; i++)
    if (ids[i] == NULL || id_check(ids[i]) != 0)
      return CQ_EINVAL;

  struct cq__dev *devs = NULL;
  if (count > 0) {
    devs = cq__alloc(pool, count * sizeof(*devs));
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
    cq__free(pool, devs);
    return CQ_EINVAL;
  }

  cq__mutex_lock(&pool->lock);
  struct cq__res *r;
  int rc = cq__res_add(pool, name, CQ__RES_DEVICES, &r);
  if (rc == 0) {
    r->devs = devs;
    r->n_devs = (uint32_t)count;
    r->n_online = (uint32_t)count;
    atomic_store_explicit(&r->capacity, (int64_t)count * CQ_DEVICE_MILLI,
                          memory_order_relaxed);
    for (size_t i = 0; i < count; i++)
      cq__rb_insert(&r->by_free, &devs[i].node, dev_cmp);
  }
  cq__mutex_unlock(&pool->lock);
  if (rc != 0)
    cq__free(pool, devs);
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

static struct cq__res *find_devices(cq_pool *p, const char *name) {
  struct cq__res *r = cq__res_find(p, name);
  return r != NULL && r->kind == CQ__RES_DEVICES ? r : NULL;
}

void cq__dev_snapshot(struct cq__res *r, uint32_t index, cq_device_stats *out) {
  const struct cq__dev *d = &r->devs[index];
  const struct cq__gitem *c = pool_claimant(r);
  uint64_t stamp = c != NULL ? cq__dev_reserve(r, c) : 0;
  memcpy(out->id, d->id, sizeof(out->id));
  out->index = d->index;
  out->online = d->online;
  out->whole = d->whole;
  out->reserved = stamp != 0 && d->mark == stamp;
  out->used_milli = d->used;
  out->peak_milli = d->peak;
  out->grants = d->grants;
}

int cq_device_stats_get(cq_pool *pool, const char *name, uint32_t index,
                        cq_device_stats *out) {
  if (pool == NULL || name == NULL || out == NULL)
    return CQ_EINVAL;
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = find_devices(pool, name);
  if (r != NULL && index < r->n_devs)
    cq__dev_snapshot(r, index, out);
  cq__mutex_unlock(&pool->lock);
  return r != NULL && index < r->n_devs ? 0 : CQ_ENOENT;
}

int cq_device_set_online(cq_pool *pool, const char *name, uint32_t index,
                         int online) {
  if (pool == NULL || name == NULL)
    return CQ_EINVAL;
  struct cq__ctx ctx;
  cq__ctx_init(&ctx, pool);
  cq__mutex_lock(&pool->lock);
  struct cq__res *r = find_devices(pool, name);
  if (r == NULL || index >= r->n_devs) {
    cq__mutex_unlock(&pool->lock);
    return CQ_ENOENT;
  }
  struct cq__dev *d = &r->devs[index];
  if (d->online != (online != 0)) {
    d->online = online != 0;
    cq__bf_invalidate(pool);
    if (d->online) {
      cq__rb_insert(&r->by_free, &d->node, dev_cmp);
      r->n_online++;
    } else {
      /* Holders keep it; it just takes no new work. */
      cq__rb_remove(&r->by_free, &d->node);
      r->n_online--;
    }
    atomic_store_explicit(&r->capacity, (int64_t)r->n_online * CQ_DEVICE_MILLI,
                          memory_order_relaxed);
    if (!d->online)
      cq__fail_unsatisfiable(pool, &ctx);
    if (r->blocked.count != 0)
      cq__res_mark_dirty(pool, r, 0); /* reservations move */
    cq__sweep(pool, &ctx);
  }
  cq__mutex_unlock(&pool->lock);
  cq__ctx_finish(&ctx);
  return 0;
}

/*
 * Device placement (place.h says the rules): the free tree of a device
 * pool, best fit for fractions, the lowest-index free devices for whole
 * ones, and the devices a reservation covers.
 */
#include "place.h"

#include "budget.h"

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

uint64_t cq__dev_reserve(struct cq__res *r, int64_t count) {
  if (count <= 0)
    return 0;
  uint64_t stamp = ++r->stamp;
  int64_t want = count;
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

int64_t cq__dev_withheld(struct cq__res *r, int64_t count) {
  uint64_t stamp = cq__dev_reserve(r, count);
  if (stamp == 0)
    return 0;
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
                            uint64_t stamp, bool chain) {
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
                     uint64_t stamp) {
  struct cq__dev *first = find(r, mode, amount, stamp, true);
  return first != NULL ? (int32_t)first->index : -1;
}

bool cq__dev_fits(struct cq__res *r, uint8_t mode, int64_t amount,
                  uint64_t stamp) {
  return find(r, mode, amount, stamp, false) != NULL;
}

int32_t cq__dev_take(struct cq__res *r, uint8_t mode, int64_t amount,
                     uint64_t stamp) {
  struct cq__dev *first = find(r, mode, amount, stamp, true);
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

void cq__dev_put_one(struct cq__res *r, int32_t *chain, uint32_t index) {
  int32_t *link = chain;
  while (*link >= 0 && (uint32_t)*link != index)
    link = &r->devs[*link].whole_next;
  CQ__ASSERT(*link >= 0);
  struct cq__dev *d = &r->devs[index];
  *link = d->whole_next;
  d->whole = false;
  d->whole_next = -1;
  dev_use(r, d, -CQ_DEVICE_MILLI);
}

int64_t cq__dev_copies(struct cq__res *r, uint8_t mode, int64_t amount,
                       uint64_t stamp) {
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

void cq__dev_room(struct cq__res *r, uint64_t stamp, int64_t *units,
                  int64_t *largest, uint32_t *whole) {
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

bool cq__dev_may_fit(const struct cq__res *r, int64_t fraction, int64_t whole) {
  const cq__rbnode *n = cq__rb_last(&r->by_free);
  if (n == NULL)
    return false;
  if (fraction <= cq__dev_free(node_dev(n)))
    return true;
  /* The entirely free devices sit at the end of the tree. */
  int64_t count = 0;
  for (; n != NULL && cq__dev_free(node_dev(n)) == CQ_DEVICE_MILLI;
       n = cq__rb_prev(n))
    if (++count >= whole)
      return true;
  return false;
}

void cq__dev_set_online(struct cq__res *r, struct cq__dev *d, bool online) {
  d->online = online;
  if (online) {
    cq__rb_insert(&r->by_free, &d->node, dev_cmp);
    r->n_online++;
  } else {
    /* Holders keep it; it just takes no new work. */
    cq__rb_remove(&r->by_free, &d->node);
    r->n_online--;
  }
  atomic_store_explicit(&r->capacity, (int64_t)r->n_online * CQ_DEVICE_MILLI,
                        memory_order_relaxed);
}

bool cq__dev_tree_check(const struct cq__res *r) {
  return cq__rb_check(&r->by_free, dev_cmp) >= 0;
}

void cq__dev_insert_all(struct cq__res *r) {
  for (uint32_t i = 0; i < r->n_devs; i++)
    cq__rb_insert(&r->by_free, &r->devs[i].node, dev_cmp);
}

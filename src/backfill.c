/*
 * Hold limits and backfill (CQ_POOL_BACKFILL). docs/POLICY.md's "Backfill"
 * section is the specification; this comment says how the code keeps it.
 *
 * Hold limits. A grant of a request with a hold limit promises to end by
 * limit_end = grant time + limit. Such grants sit in the pool's `limits`
 * tree, ordered by (limit_end, grant order), until they are released or
 * their limit passes; then they are overdue: an event, a count, and from
 * then on they count as holding forever, as grants without a limit do.
 *
 * The head and its shadow time. H is the oldest waiter. Its shadow time S
 * is the earliest limit end at which H would fit if every limited holder
 * let go at its limit end, giving back what it holds on the very devices it
 * holds; CQ_NEVER (unknown) if H would not fit even then. S is sticky: while
 * H stays the head, a recomputation can only lower it.
 *
 * The projection. Alongside S the code keeps what H's resources will have
 * free at S given the holders of now: per budget in cq__res.bf_free, per
 * device in cq__dev.bf_free, for the resources marked with the current
 * stamp (the ones H names). Grants made after it was computed are applied
 * to it as they come and go, so checking a candidate walks nothing; a
 * change it cannot follow (a holder counted in it letting go early or
 * going overdue, a partial release, a capacity or device change, a new
 * head) marks it dirty, and it is computed again when next needed, by
 * walking the limits tree once: O(devices + holders that end before S).
 *
 * Backfill. A request g younger than H, with a limit, that is covered on
 * everything once H's withholding is ignored (queue.c checks that), may be
 * granted while now < S if it ends by S, or if H still fits the projection
 * with g placed where it would go.
 */
#include "pool.h"

#include "backfill.h"

#include "place.h"

#include <string.h>

static struct cq__grant *lim_grant(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct cq__grant, lnode);
}

static int lim_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  const struct cq__grant *x = lim_grant(a), *y = lim_grant(b);
  if (x->limit_end != y->limit_end)
    return x->limit_end < y->limit_end ? -1 : 1;
  return (x->gseq > y->gseq) - (x->gseq < y->gseq);
}

/* A device that is offline can give the head nothing: far below any need,
 * and far enough from overflow that adding holders back cannot lift it. */
#define OFFLINE_FREE (INT64_MIN / 4)
/* Likewise a budget that a lone grant holds gives nothing until that grant
 * is projected to leave: its projection carries this much less, added by
 * the lone holder and taken away with it. */
#define LONE_BLOCK (INT64_MIN / 4)

/* ------------------------------------------------------------------------ */
/* The projection                                                            */
/* ------------------------------------------------------------------------ */

/* Whether the projection of the head's state is current. */
static bool proj_valid(const cq_pool *p) {
  return (p->flags & CQ_POOL_BACKFILL) && !p->bf.dirty &&
         p->bf.shadow != CQ_NEVER && p->q.head != NULL &&
         p->q.head->seq == p->bf.head_seq;
}

/* Add `sign` times what held grant g holds on the head's resources. */
static void proj_apply(cq_pool *p, const struct cq__grant *g, int64_t sign) {
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    if (r->bf_mark != p->bf.stamp)
      continue;
    int64_t held = g->it[i].u.hold.held;
    if (r->kind != CQ__RES_DEVICES) {
      r->bf_free += sign * held;
      if (g->it[i].flags & CQ__IT_LONE)
        r->bf_free -= sign * LONE_BLOCK;
    } else if (g->it[i].mode == CQ__MODE_FRACTION) {
      if (held > 0)
        r->devs[g->it[i].u.hold.dev].bf_free += sign * held;
    } else {
      for (int32_t d = g->it[i].u.hold.dev; d >= 0; d = r->devs[d].whole_next)
        r->devs[d].bf_free += sign * CQ_DEVICE_MILLI;
    }
  }
}

/* Whether a device item fits the projected devices of r. */
static bool devices_fit(const struct cq__res *r, uint8_t mode, int64_t amount) {
  int64_t whole = 0;
  for (uint32_t d = 0; d < r->n_devs; d++) {
    int64_t f = r->devs[d].bf_free;
    if (mode == CQ__MODE_FRACTION ? f >= amount : f == CQ_DEVICE_MILLI)
      if (mode == CQ__MODE_FRACTION || ++whole >= amount)
        return true;
  }
  return false;
}

/* Whether head h fits the projection. */
static bool head_fits(const struct cq__grant *h) {
  for (unsigned i = 0; i < h->n_items; i++) {
    const struct cq__res *r = h->it[i].res;
    int64_t need = cq__item_need(h, i);
    if (r->kind == CQ__RES_DEVICES ? !devices_fit(r, h->it[i].mode, need)
                                   : need > r->bf_free)
      return false;
  }
  return true;
}

/* Start the projection from what is free now, on h's resources. */
static void proj_start(cq_pool *p, const struct cq__grant *h) {
  uint64_t stamp = ++p->bf.stamp;
  for (unsigned i = 0; i < h->n_items; i++) {
    struct cq__res *r = h->it[i].res;
    r->bf_mark = stamp;
    if (r->kind != CQ__RES_DEVICES) {
      uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
      r->bf_free = cq__res_capacity(r) - cq__w_used(w) +
                   ((w & CQ__W_LONE) ? LONE_BLOCK : 0);
      continue;
    }
    for (uint32_t d = 0; d < r->n_devs; d++)
      r->devs[d].bf_free =
          r->devs[d].online ? cq__dev_free(&r->devs[d]) : OFFLINE_FREE;
  }
}

/*
 * Project the limited holders that end after `now` and no later than
 * `until` (CQ_NEVER: all) back into the head's resources, group by group
 * of equal ends; with `stop` set, stop at the first group after which the
 * head fits and return its end. Returns CQ_NEVER when it never fits.
 * Holders whose limit has passed count as holding forever.
 */
static int64_t proj_walk(cq_pool *p, const struct cq__grant *h, int64_t now,
                         int64_t until, bool stop) {
  cq__rbnode *n = cq__rb_first(&p->bf.limits);
  while (n != NULL && lim_grant(n)->limit_end <= now)
    n = cq__rb_next(n);
  while (n != NULL && lim_grant(n)->limit_end <= until) {
    int64_t end = lim_grant(n)->limit_end;
    for (; n != NULL && lim_grant(n)->limit_end == end; n = cq__rb_next(n))
      proj_apply(p, lim_grant(n), +1);
    if (stop && head_fits(h))
      return end;
  }
  return CQ_NEVER;
}

/* The head, with its shadow time and projection current; NULL if the
 * queue is empty. */
static const struct cq__grant *refresh(cq_pool *p, int64_t now) {
  const struct cq__grant *h = p->q.head;
  if (h == NULL)
    return NULL;
  if (h->seq != p->bf.head_seq) {
    p->bf.head_seq = h->seq;
    p->bf.shadow = CQ_NEVER;
    p->bf.dirty = true;
  }
  if (!p->bf.dirty)
    return h;
  proj_start(p, h);
  int64_t s = head_fits(h) ? now : proj_walk(p, h, now, CQ_NEVER, true);
  if (s > p->bf.shadow) {
    /* Sticky: keep the earlier S, and project to it instead. */
    proj_start(p, h);
    proj_walk(p, h, now, p->bf.shadow, false);
  }
  p->bf.shadow = s < p->bf.shadow ? s : p->bf.shadow;
  p->bf.epoch = p->bf.next_gseq;
  p->bf.dirty = false;
  p->bf.kick = true;
  return h;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

void cq__limit_granted(cq_pool *p, struct cq__grant *g, int64_t now) {
  g->gseq = p->bf.next_gseq++;
  g->overdue = 0;
  g->limited = 0;
  /* The request may be gone once granted: keep what is needed of it. */
  int64_t limit = g->req != NULL ? g->req->limit_ms : 0;
  g->limit_ms = limit;
  if (limit > 0) {
    g->limit_end = now < INT64_MAX - limit ? now + limit : INT64_MAX - 1;
    cq__rb_insert(&p->bf.limits, &g->lnode, lim_cmp);
    g->limited = 1;
    cq__timer_kick(&p->timer, g->limit_end);
  }
  /* Holding past S (or for ever), it takes from what the head will have. */
  if (proj_valid(p) && (!g->limited || g->limit_end > p->bf.shadow))
    proj_apply(p, g, -1);
}

void cq__limit_released(cq_pool *p, struct cq__grant *g) {
  bool counted = g->limited && !g->overdue;
  if (g->limited) {
    cq__rb_remove(&p->bf.limits, &g->lnode);
    g->limited = 0;
  }
  if (!proj_valid(p))
    return;
  if (g->gseq < p->bf.epoch)
    p->bf.dirty = true; /* counted in the projection: S may come earlier */
  else if (!counted || g->limit_end > p->bf.shadow)
    proj_apply(p, g, +1); /* taken off at its grant: give it back */
}

void cq__bf_init(struct cq__bf *bf) {
  memset(bf, 0, sizeof(*bf));
  bf->next_gseq = 1;
  bf->shadow = CQ_NEVER;
}

void cq__bf_invalidate(cq_pool *p) { p->bf.dirty = true; }

void cq__limits_expire(cq_pool *p, int64_t now) {
  cq__rbnode *n;
  while ((n = cq__rb_first(&p->bf.limits)) != NULL) {
    struct cq__grant *g = lim_grant(n);
    if (g->limit_end > now)
      break;
    cq__rb_remove(&p->bf.limits, n);
    g->limited = 0;
    g->overdue = 1;
    p->bf.overdue++;
    p->bf.dirty = true; /* it holds for ever now */
    cq__event(p, CQ_EVENT_OVERDUE, g, NULL, g->limit_ms);
  }
}

bool cq__bf_check(const cq_pool *p) {
  if (cq__rb_check(&p->bf.limits, lim_cmp) < 0)
    return false;
  for (cq__rbnode *n = cq__rb_first(&p->bf.limits); n != NULL;
       n = cq__rb_next(n))
    if (!lim_grant(n)->limited || lim_grant(n)->overdue)
      return false;
  return true;
}

int64_t cq__limits_first(const cq_pool *p) {
  cq__rbnode *n = cq__rb_first(&p->bf.limits);
  return n != NULL ? lim_grant(n)->limit_end : CQ_NEVER;
}

const struct cq__grant *cq__bf_head(cq_pool *p, int64_t now) {
  if (!(p->flags & CQ_POOL_BACKFILL))
    return NULL;
  const struct cq__grant *h = refresh(p, now);
  if (h == NULL || p->bf.shadow == CQ_NEVER || now >= p->bf.shadow)
    return NULL;
  return h;
}

/* Whether item i of waiting or arriving g would be granted as a lone
 * request. */
static bool lone_item(const struct cq__grant *g, unsigned i) {
  const struct cq__res *r = g->it[i].res;
  return r->kind == CQ__RES_BUDGET &&
         cq__is_lone(r, g->req->items[i].amount, cq__res_capacity(r));
}

bool cq__bf_allows(cq_pool *p, struct cq__grant *g, int64_t now) {
  const struct cq__grant *h = p->q.head;
  int64_t limit = g->req->limit_ms;
  if (limit <= 0)
    return false;
  if (now <= p->bf.shadow - limit)
    return true; /* it ends by S */
  /* Does H still fit at S with g running, placed where it would go? */
  int32_t placed[CQ_REQ_MAX_ITEMS];
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    placed[i] = -1;
    if (r->bf_mark != p->bf.stamp)
      continue;
    int64_t need = cq__item_need(g, i);
    if (r->kind != CQ__RES_DEVICES) {
      r->bf_free -= need + (lone_item(g, i) ? -LONE_BLOCK : 0);
      continue;
    }
    placed[i] =
        cq__dev_peek(r, g->it[i].mode, need, cq__reserved_devices_for(r, g, h));
    if (placed[i] < 0)
      continue; /* cannot happen: the caller found it covered */
    if (g->it[i].mode == CQ__MODE_FRACTION)
      r->devs[placed[i]].bf_free -= need;
    else
      for (int32_t d = placed[i]; d >= 0; d = r->devs[d].whole_next)
        r->devs[d].bf_free -= CQ_DEVICE_MILLI;
  }
  bool fits = head_fits(h);
  for (unsigned i = 0; i < g->n_items; i++) {
    struct cq__res *r = g->it[i].res;
    if (r->bf_mark != p->bf.stamp)
      continue;
    int64_t need = cq__item_need(g, i);
    if (r->kind != CQ__RES_DEVICES) {
      r->bf_free += need + (lone_item(g, i) ? -LONE_BLOCK : 0);
    } else if (placed[i] >= 0 && g->it[i].mode == CQ__MODE_FRACTION) {
      r->devs[placed[i]].bf_free += need;
    } else if (placed[i] >= 0) {
      int32_t d = placed[i];
      while (d >= 0) {
        int32_t next = r->devs[d].whole_next;
        r->devs[d].bf_free += CQ_DEVICE_MILLI;
        r->devs[d].whole_next = -1; /* the chain was only a sketch */
        d = next;
      }
    }
  }
  return fits;
}

void cq__bf_head_granted(cq_pool *p, const struct cq__grant *g, int64_t now) {
  if (g->seq != p->bf.head_seq)
    return;
  if (p->bf.shadow != CQ_NEVER && now > p->bf.shadow)
    p->bf.late_heads++;
  p->bf.head_seq = 0;
}

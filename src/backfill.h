/*
 * Hold limits and backfill (backfill.c): the policy's clock. The
 * specification's "Backfill" section is the specification; backfill.c says how
 * the code keeps it. Only the policy (queue.c) calls these, with the pool lock
 * held; its state, struct cq__bf, is the policy's part of the pool (policy.h).
 */
#ifndef CRONOQ_BACKFILL_H
#define CRONOQ_BACKFILL_H

#include "policy.h"

struct cq__grant;

void cq__bf_init(struct cq__bf *bf);

/* A grant was just made (units held): keep its limit in order, and account
 * for it in the head's projection. */
void cq__limit_granted(cq_pool *p, struct cq__grant *g, int64_t now);
/* A grant is being released in full: the reverse. */
void cq__limit_released(cq_pool *p, struct cq__grant *g);
/* Part of a grant went back, or a capacity or device changed: the shadow
 * time and projection must be computed again. */
void cq__bf_invalidate(cq_pool *p);
/* Mark every limited grant whose limit ended at or before `now` overdue. */
void cq__limits_expire(cq_pool *p, int64_t now);
/* The earliest limit end still pending, or CQ_NEVER. */
int64_t cq__limits_first(const cq_pool *p);
/* Whether `g` (not the head) may be backfilled now, going by what the
 * caller found: it is covered everywhere once the head's withholding is
 * ignored. */
bool cq__bf_allows(cq_pool *p, struct cq__grant *g, int64_t now);
/* The head waiter the backfill rules protect, when backfill is on and it
 * may be passed now; else NULL. */
const struct cq__grant *cq__bf_head(cq_pool *p, int64_t now);
/* Whether the limits tree is in order and holds only limited holders. */
bool cq__bf_check(const cq_pool *p);
/* A waiter is being granted: count it if it was the head and its shadow
 * time has passed. */
void cq__bf_head_granted(cq_pool *p, const struct cq__grant *g, int64_t now);

struct cq__res;
/* Asked of the policy (queue.c): the stamp of the devices of r reserved
 * by claimers older than g; when backfilling (`ignore` is the head), only
 * by r's claimant, and by nobody when that is the head; 0 when no device
 * is reserved (place.h). */
uint64_t cq__reserved_devices_for(struct cq__res *r, const struct cq__grant *g,
                                  const struct cq__grant *ignore);

#endif /* CRONOQ_BACKFILL_H */

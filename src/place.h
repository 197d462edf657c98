/*
 * Device placement (place.c): where a fraction or n whole devices go on a
 * device pool, and which devices a waiter's reservation covers. The policy
 * (queue.c) decides who is granted; this decides where. device.c
 * administers the pools (adding them, devices going offline).
 *
 * Rules kept here:
 * - Admission is per device, never on the sum: a fraction f fits when some
 *   allowed device has f free; n whole devices fit when n allowed devices
 *   are entirely free.
 * - A fraction goes best fit: the allowed device with the least free
 *   capacity that still fits it, ties to the lowest index.
 * - Whole devices are the lowest-index allowed devices that are entirely
 *   free. A device is held whole or in fractions, never both.
 * - Reservation: a reserving ask (the policy says whose) covers only what it
 *   needs, chosen afresh at every question, since capacities change: one
 *   device for a fraction, the one with the most free capacity (ties to the
 *   lowest index); n devices for n whole ones, the n with the most free
 *   capacity. "Allowed" above means: not reserved by an ask that applies.
 *
 * Online devices sit in the pool's `by_free` tree, ordered by (free, index),
 * so best fit is a lower-bound search and the most free devices are found
 * from the end: the cost grows with the logarithm of the number of
 * devices. A reservation is a stamp written on the reserved devices for the
 * duration of one question.
 */
#ifndef CRONOQ_PLACE_H
#define CRONOQ_PLACE_H

#include "request.h"
#include "resource.h"

/* One device of a device pool. */
struct cq__dev {
  cq__rbnode node;
  int64_t used; /* thousandths held, 0..CQ_DEVICE_MILLI */
  int64_t peak;
  uint64_t grants;
  uint64_t mark;   /* == the pool's stamp: reserved in this question */
  int64_t bf_free; /* backfill: thousandths free at the shadow time */
  uint32_t index;
  int32_t whole_next; /* next device of the same whole-device grant, or -1 */
  bool online;
  bool whole; /* held whole by one grant */
  char id[CQ_DEVICE_ID_MAX + 1];
};

static inline int64_t cq__dev_free(const struct cq__dev *d) {
  return CQ_DEVICE_MILLI - d->used;
}

/*
 * In every call, `excl` is the ask whose reservation applies to the asker
 * (the pool's claimant's item, when it is older than the asker), or NULL.
 * All with the pool lock held.
 */
bool cq__dev_fits(struct cq__res *r, uint8_t mode, int64_t amount,
                  const struct cq__ritem *excl);
/* Place a request that fits; returns the device (the first, for whole). */
int32_t cq__dev_take(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__ritem *excl);
/* Where a request that fits would be placed, without placing it: the
 * device (for whole devices the first, the others chained through
 * whole_next, which the caller resets), or -1. */
int32_t cq__dev_peek(struct cq__res *r, uint8_t mode, int64_t amount,
                     const struct cq__ritem *excl);
/* Give back `amount` thousandths of a fraction on `dev`, or a whole grant's
 * chain starting at `dev` (amount = its devices * CQ_DEVICE_MILLI). */
void cq__dev_put(struct cq__res *r, uint8_t mode, int32_t dev, int64_t amount);
/* Give back device `index` of the whole-device chain at *chain (the chain
 * loses it). */
void cq__dev_put_one(struct cq__res *r, int32_t *chain, uint32_t index);
/* How many copies of (mode, amount) fit now, one after another. */
int64_t cq__dev_copies(struct cq__res *r, uint8_t mode, int64_t amount,
                       const struct cq__ritem *excl);
/* Free thousandths on the allowed devices, the largest fraction that fits
 * one, and the entirely free allowed devices. */
void cq__dev_room(struct cq__res *r, const struct cq__ritem *excl,
                  int64_t *units, int64_t *largest, uint32_t *whole);
/* Whether some online device has free capacity. */
bool cq__dev_any_free(const struct cq__res *r);
/* Stamp the devices `ask` reserves; returns the stamp. */
uint64_t cq__dev_reserve(struct cq__res *r, const struct cq__ritem *ask);
/* Free thousandths on the devices `ask` reserves. */
int64_t cq__dev_withheld(struct cq__res *r, const struct cq__ritem *ask);
/* Take device d in or out of the free tree (it goes offline or online). */
void cq__dev_set_online(struct cq__res *r, struct cq__dev *d, bool online);
/* Put the devices of a new pool in its free tree. */
void cq__dev_insert_all(struct cq__res *r);
/* Whether the free tree is a red-black tree in (free, index) order. */
bool cq__dev_tree_check(const struct cq__res *r);

#endif /* CRONOQ_PLACE_H */

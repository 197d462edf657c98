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
 * - Reservation: the waiters that claimed the pool reserve devices in
 *   arrival order, each from what older ones left, chosen afresh at every
 *   question, since capacities change: one device for a fraction, the one
 *   with the most free capacity (ties to the lowest index); n devices for
 *   n whole ones, the n with the most free capacity. So together the older
 *   claimers of a request reserve the first `count` devices in that order,
 *   count being what they want in all, and "allowed" above means: not among
 *   them. The policy says what count applies to whom.
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
 * In every call, `stamp` marks the devices reserved for older claimers
 * (from cq__dev_reserve()), which the asker may not use; 0 when none are.
 * All with the pool lock held.
 */
bool cq__dev_fits(struct cq__res *r, uint8_t mode, int64_t amount,
                  uint64_t stamp);
/* Place a request that fits; returns the device (the first, for whole). */
int32_t cq__dev_take(struct cq__res *r, uint8_t mode, int64_t amount,
                     uint64_t stamp);
/* Where a request that fits would be placed, without placing it: the
 * device (for whole devices the first, the others chained through
 * whole_next, which the caller resets), or -1. */
int32_t cq__dev_peek(struct cq__res *r, uint8_t mode, int64_t amount,
                     uint64_t stamp);
/* Give back `amount` thousandths of a fraction on `dev`, or a whole grant's
 * chain starting at `dev` (amount = its devices * CQ_DEVICE_MILLI). */
void cq__dev_put(struct cq__res *r, uint8_t mode, int32_t dev, int64_t amount);
/* Give back device `index` of the whole-device chain at *chain (the chain
 * loses it). */
void cq__dev_put_one(struct cq__res *r, int32_t *chain, uint32_t index);
/* How many copies of (mode, amount) fit now, one after another. */
int64_t cq__dev_copies(struct cq__res *r, uint8_t mode, int64_t amount,
                       uint64_t stamp);
/* Free thousandths on the allowed devices, the largest fraction that fits
 * one, and the entirely free allowed devices. */
void cq__dev_room(struct cq__res *r, uint64_t stamp, int64_t *units,
                  int64_t *largest, uint32_t *whole);
/* Whether some online device has `fraction` free, or `whole` online
 * devices are entirely free, reservations aside: false means that no
 * request asking at least that much can fit. */
bool cq__dev_may_fit(const struct cq__res *r, int64_t fraction, int64_t whole);
/* Stamp the first `count` devices in reservation order (the most free,
 * ties to the lowest index); returns the stamp, 0 when count is 0. */
uint64_t cq__dev_reserve(struct cq__res *r, int64_t count);
/* Free thousandths on those devices. */
int64_t cq__dev_withheld(struct cq__res *r, int64_t count);
/* Take device d in or out of the free tree (it goes offline or online). */
void cq__dev_set_online(struct cq__res *r, struct cq__dev *d, bool online);
/* Put the devices of a new pool in its free tree. */
void cq__dev_insert_all(struct cq__res *r);
/* Whether the free tree is a red-black tree in (free, index) order. */
bool cq__dev_tree_check(const struct cq__res *r);

#endif /* CRONOQ_PLACE_H */

/*
 * A reference model of libcronoq's waiting policy, written from the
 * specification (docs/POLICY.md)
 * ("The waiting policy: FIFO with reservation", "Device pools", "Live
 * capacity changes", "Backfill") and not from the library's code. It is a
 * second implementation meant to be obviously right rather than fast: every
 * decision is recomputed from the whole state (claimants, reservations,
 * coverage, shadow times) with loops over every waiter and holder, so that a
 * reader can check it line by line against the specification. The
 * interpreter (ops.c) runs the same operations through it and through the
 * library and compares the two after each one.
 *
 * The model knows nothing of names or threads: resources and grants are
 * small integers (slots), and time is the interpreter's virtual clock.
 * Where the specification leaves a point open, the model follows what the
 * library does; the top of model.c lists every such point, and the comment at
 * its line says so again.
 */
#ifndef CRONOQ_TEST_MODEL_H
#define CRONOQ_TEST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sizes of one run; small so that requests collide often. */
#define M_RES_MAX 10  /* resources added in a run, removed ones included */
#define M_DEV_MAX 5   /* devices in one device pool */
#define M_SLOT_MAX 12 /* grants the interpreter juggles */
#define M_ITEMS_MAX 6 /* items in one request, its class included */
#define M_OUT_MAX 64  /* callbacks one operation can run */

#define M_MILLI 1000
#define M_INF INT64_MAX

/* Same values as enum cq_resource_kind. */
enum m_kind { M_BUDGET = 1, M_DEVICES = 2, M_CLASS = 3 };

typedef struct m_res {
  bool live; /* added and not removed */
  int kind;
  bool lone;   /* budgets: the lone-request allowance */
  int64_t cap; /* budgets: units; classes: max workers */
  int64_t used;
  bool lone_held;  /* budgets: a lone grant holds it, so nothing else fits */
  uint64_t grants; /* grants that named it, ever */
  uint64_t added;  /* order of addition, for the resource order */
  int ndev;
  int64_t dev_used[M_DEV_MAX]; /* thousandths held on each device */
  bool dev_whole[M_DEV_MAX];   /* held whole by one grant */
  bool dev_online[M_DEV_MAX];
} m_res;

/* One (resource, amount) pair. A class is an item of amount 1. */
typedef struct m_item {
  int res;
  int64_t amount; /* units, thousandths of a fraction, or whole devices */
  bool whole;     /* device pools: `amount` whole devices */
} m_item;

/* Items are kept in resource order (m_req_sort). */
typedef struct m_req {
  int n;
  m_item items[M_ITEMS_MAX];
  int64_t limit_ms; /* hold limit; 0: none */
} m_req;

enum m_state { M_IDLE = 0, M_WAITING = 1, M_HELD = 2 };

typedef struct m_slot {
  int state;
  m_req req;
  /* Waiting: arrival order, claims (a bit per item), blocker (an item). */
  uint64_t seq;
  uint32_t claims;
  int blocker;
  int64_t deadline;
  /* Held: per item, units held, and per device thousandths held. */
  int64_t held[M_ITEMS_MAX];
  int64_t dev_held[M_ITEMS_MAX][M_DEV_MAX];
  int64_t end;     /* grant time + limit; M_INF without a limit */
  bool backfilled; /* granted by backfill */
  uint32_t lone;   /* held: the items granted as lone requests (a bit each) */
  bool partial;    /* held: gave part of its units back early */
} m_slot;

/* A callback the operation ran: which slot, with which status. */
typedef struct m_out {
  int slot;
  int status;
} m_out;

/* The head's shadow time (docs/POLICY.md, "Backfill"). */
typedef struct m_shadow {
  int head;            /* the slot S belongs to; -1: none */
  uint64_t seq;        /* ... and its arrival, so a new attempt is a new head */
  bool computed;       /* S has been computed for this head */
  bool stale;          /* recompute when next needed, keeping the earlier */
  int64_t at;          /* S; M_INF: unknown */
  int64_t computed_at; /* when S was last computed (see head_fits_at()) */
  uint32_t counted;    /* slots whose release went into S */
  bool excused;        /* a grant outside the rule may delay the head */
  bool device_excused; /* an ordinary grant on a device pool it claimed */
} m_shadow;

typedef struct m_model {
  unsigned flags; /* CQ_POOL_STAGED_CLAIMS | CQ_POOL_BACKFILL */
  int64_t now;
  int nres;
  uint64_t next_added;
  m_res res[M_RES_MAX];
  m_slot slot[M_SLOT_MAX];
  uint64_t next_seq;
  m_shadow shadow;
  /* An arrival left a resource for the library's next sweep (m_release()). */
  bool pending;
  uint64_t backfilled;
  /* Heads granted after their sticky S although every holder kept its
   * limit and nothing outside the rule explains it: the promise broken. */
  uint64_t broken_promises;
  /* Heads granted after S (cq_pool_stats.late_heads). */
  uint64_t late_heads;
  /* ... of which only an ordinary grant on a device pool the head claimed
   * explains it (one of the specification's exceptions, see model.c). */
  uint64_t device_late_heads;
  /* Callbacks of the current operation, in the order they run. */
  int nouts;
  m_out outs[M_OUT_MAX];
  /* Resources that received a grant during the current operation, and
   * per device pool the devices that did. */
  uint32_t granted_res;
  uint32_t granted_dev[M_RES_MAX];
  /* A self-check of the model failed (a bug here, not in the library). */
  const char *broken;
} m_model;

void m_init(m_model *m, unsigned flags, int64_t now);
/* Forget the outcomes of the previous operation. */
void m_begin_op(m_model *m);

/* Each returns the new resource's index, or -1 when the table is full. */
int m_add_budget(m_model *m, int64_t cap, bool lone);
int m_add_class(m_model *m, int64_t max_workers);
int m_add_devices(m_model *m, int ndev);
int m_remove(m_model *m, int res); /* 0 or CQ_EINUSE */

/* Put the request's items in resource order. */
void m_req_sort(const m_model *m, m_req *req);

/* Acquires on an idle slot. Return what the library call returns. */
int m_try(m_model *m, int s, const m_req *req);
int m_submit(m_model *m, int s, const m_req *req, int64_t deadline);
int m_cancel(m_model *m, int s);
int m_release(m_model *m, int s);
/* cq_grant_release_part() of `amount` units of budget or class res. */
int m_release_part(m_model *m, int s, int res, int64_t amount);
/* cq_grant_release_device() of `milli` on device `dev` of pool res. */
int m_release_device(m_model *m, int s, int res, int dev, int64_t milli);
/* What cq_pool_destroy() returns now: CQ_EINUSE while a grant is held or
 * a request waits, else 0. */
int m_destroy_rc(const m_model *m);

int m_set_capacity(m_model *m, int res, int64_t cap);
int m_set_online(m_model *m, int res, int dev, bool online);

/* Move the clock to `now` and do what cq_pool_expire() does. */
void m_expire(m_model *m, int64_t now);

/* Queries for the comparison. */
int64_t m_withheld(const m_model *m, int res);
uint32_t m_reserved_devices(const m_model *m, int res);
uint64_t m_waiting_on(const m_model *m, int res);
uint64_t m_waiting(const m_model *m);
int m_claimant(const m_model *m, int res);
int m_head(const m_model *m);
/* Units (thousandths for device pools) slot s holds of res; 0 if none. */
int64_t m_slot_held(const m_model *m, int s, int res);
/* Bit mask of the devices of res slot s holds. */
uint32_t m_slot_devices(const m_model *m, int s, int res);
/* The sum of what waiters naming `res` need of it. */
int64_t m_waiters_need(const m_model *m, int res);
/* Whether the request could never be granted with today's capacities. */
bool m_never(const m_model *m, const m_req *req);
bool m_names(const m_req *req, int res);

#endif /* CRONOQ_TEST_MODEL_H */

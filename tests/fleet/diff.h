/*
 * The differential interpreter: one sequence of operations through an
 * in-process pool and a fleet pool at once, compared after every
 * operation. Both pools run on the interpreter's virtual clock with manual
 * timers (deadlines pass only in cq_pool_expire()), and the waiters are
 * callbacks, so that every outcome is decided within the operation that
 * caused it, on both sides, in an order that can be compared.
 *
 * A program is a flags byte (bit 0: staged claims; bits 1-2: how much work
 * one fleet script may do before it leaves the rest to the next: all, 16
 * calls or 3) and a list of 8-byte operations. Every byte string decodes
 * to a valid program: arguments are reduced modulo what exists, so random
 * bytes make interesting programs and the shrinker can simplify any byte.
 */
#ifndef CRONOQ_TEST_FLEET_DIFF_H
#define CRONOQ_TEST_FLEET_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DF_OP_BYTES 8
#define DF_LITERAL 0x80 /* b0: the arguments are literal (hand-written) */

enum df_code {
  DF_ADD_BUDGET = 0, /* b1: capacity % 10; b2 & 1: lone */
  DF_ADD_CLASS,      /* b1: max workers (0..3) */
  DF_ADD_DEVICES,    /* b1: devices (0..5) */
  DF_REMOVE,         /* b1: resource */
  DF_TRY,            /* b1: slot; b2..b5: request */
  DF_SUBMIT,         /* as DF_TRY; b7: deadline */
  DF_CANCEL,         /* b1: slot */
  DF_RELEASE,        /* b1: slot */
  DF_ADVANCE,        /* b1: milliseconds (1..24), then cq_pool_expire() */
  DF_SET_CAP,        /* b1: budget or class; b2: capacity % 10 */
  DF_ONLINE,         /* b1: device pool; b2: device; b3 & 1: online */
  DF_ACQUIRE_NOW,    /* as DF_TRY, blocking, with a deadline already past */
  DF_PART,           /* b1: slot; b2: item; b3: amount */
  DF_TIMEOUT,        /* b1: slot: cq_grant_abort(CQ_ETIMEDOUT) */
  DF_NCODES
};

typedef struct df_op {
  uint8_t b[DF_OP_BYTES];
} df_op;

enum df_fail {
  DF_FAIL_NONE = 0,
  DF_FAIL_SETUP,     /* a pool or a request could not be built */
  DF_FAIL_RC,        /* an operation returned differently */
  DF_FAIL_CALLBACKS, /* the callbacks run, their order or status differ */
  DF_FAIL_MESSAGE,   /* a failure's message differs */
  DF_FAIL_SLOT,      /* a grant's state or holdings differ */
  DF_FAIL_RESOURCE,  /* a resource's figures differ */
  DF_FAIL_DEVICE,    /* a device's figures differ */
  DF_FAIL_POOL,      /* the pool's figures differ */
  DF_FAIL_FSCK,      /* the fleet namespace's own invariants */
  DF_FAIL_NKINDS
};

const char *df_fail_name(int kind);

typedef struct df_result {
  size_t ops_run;
  long failed_at;
  int kind; /* enum df_fail */
  const char *call;
  int lib_rc, fleet_rc;
  char why[512];
} df_result;

/* The server the fleet side uses, and a way to empty it between runs. */
typedef struct df_env {
  const char *url;
  void (*flush)(void *arg);
  void *flush_arg;
} df_env;

extern df_env df_server;

/* What the runs of this process exercised, summed. */
typedef struct df_totals {
  uint64_t ops, granted_at_once, parked, granted_after_wait, busy, never;
  uint64_t timed_out, cancelled, failed_never, device_items, whole_items;
  uint64_t class_items, lone_grants, owed_scripts, parts;
  uint64_t device_queued; /* parked behind another device waiter */
} df_totals;

extern df_totals df_total;

/* Run a program; 0 when both sides agree after every operation, 1 when
 * not (see res). `trace` (may be NULL) gets each step and its outcome. */
int df_run(uint8_t flags, const df_op *ops, size_t n, FILE *trace,
           df_result *res);

void df_generate(uint64_t seed, uint8_t *flags, df_op *ops, size_t n);

int df_same_failure(const df_result *a, const df_result *b);

#define DF_SHRINK_MAX 2048
size_t df_shrink(uint8_t *flags, df_op *ops, size_t n);

#endif

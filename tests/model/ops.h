/*
 * The operation-sequence interpreter: runs a sequence of operations through
 * the real library (a pool with manual timers on a virtual clock, callback
 * acquires) and through the reference model (model.h), and compares the two
 * after every operation, checking the invariants of the reliability suite
 * (docs/RELIABILITY.md) on what the library reports.
 *
 * A program is a flags byte (pool options) and a list of 8-byte operations;
 * every byte string decodes to a valid program, so a fuzzer can feed one
 * directly (model_run_bytes()). Arguments are reduced modulo what exists:
 * "resource 7" of a pool of three resources is resource 1.
 */
#ifndef CRONOQ_TEST_MODEL_OPS_H
#define CRONOQ_TEST_MODEL_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MO_OP_BYTES 8

/*
 * Byte 0 of an operation: the code (low 7 bits, modulo MO_NCODES), and
 * MO_LITERAL, which makes the arguments literal, for hand-written programs:
 * capacities, maxima, device counts and milliseconds as written; a request
 * names resource i when bit i % 8 of b2 is set, with the amounts b3, b4, b5
 * for its first, second and third item (cycling): units of a budget, for a
 * device pool 0x80 | n whole devices or a fraction in hundredths (50:
 * 0.5); b6 is the hold limit in ms (0: none) and b7 the deadline in ms from
 * now (255: never). Otherwise the arguments are reduced so that random
 * bytes make interesting programs (see ops.c).
 */
#define MO_LITERAL 0x80

enum mo_code {
  MO_ADD_BUDGET = 0, /* b1: capacity % 10; b2 & 1: lone */
  MO_ADD_CLASS,      /* b1: max workers (1..3; 0 when b1 % 8 == 0) */
  MO_ADD_DEVICES,    /* b1: devices (1..M_DEV_MAX; 0 when b1 % 16 == 0) */
  MO_REMOVE,         /* b1: resource */
  MO_TRY,            /* b1: slot; b2..b6: request (see ops.c) */
  MO_SUBMIT,         /* as MO_TRY; b7: deadline */
  MO_CANCEL,         /* b1: slot */
  MO_RELEASE,        /* b1: slot */
  MO_ADVANCE,        /* b1: milliseconds (1..24), then cq_pool_expire();
                        with backfill, event by event (ops.c) */
  MO_SET_CAP,        /* b1: budget or class; b2: capacity % 10 */
  MO_ONLINE,         /* b1: device pool; b2: device; b3 & 1: online */
  MO_ACQUIRE_NOW,    /* as MO_TRY, blocking with a deadline already past */
  MO_RELEASE_PART,   /* b1: slot; b2: resource; b3: amount (budgets: units,
                        all held when b3 % 4 == 0; devices: which device it
                        holds, and all of it or part of a fraction) */
  MO_DESTROY,        /* cq_pool_destroy() while something is held or waits:
                        refused (skipped when nothing is) */
  MO_NCODES
};

typedef struct mo_op {
  uint8_t b[MO_OP_BYTES];
} mo_op;

/* What the runs of this process exercised, so a test can show that the
 * random programs reach every outcome (summed over every mo_run()). */
typedef struct mo_totals {
  uint64_t ops, granted_at_once, parked, granted_after_wait, backfilled;
  uint64_t busy, never, timed_out, cancelled, failed_never;
  uint64_t device_items, whole_device_items, class_items, lone_grants;
  uint64_t late_heads, device_late_heads, capacity_changes, offline;
  uint64_t partial_releases; /* part of a grant given back early */
  uint64_t emptied;          /* ... after which it held nothing at all */
  uint64_t destroys_refused; /* cq_pool_destroy() refused, something held */
  uint64_t lone_at_zero;     /* lone requests made at a capacity of 0 */
} mo_totals;

extern mo_totals mo_total;

/* Pool flags a program's flags byte selects: bit 1 staged claims, bit 2
 * backfill, bit 8 strict order (no barging window); bit 4 sets an event
 * hook, which turns the library's lock-free paths off (a backfill pool
 * never takes them, hook or not). */
unsigned mo_pool_flags(uint8_t flags_byte);

/* How a run failed: the comparison or invariant that caught it. The
 * shrinker keeps a change only when the program still fails the same way
 * (same kind, and for MO_FAIL_RC the same call and codes), so that it
 * cannot drift from one bug to another. */
enum mo_fail {
  MO_FAIL_NONE = 0,
  MO_FAIL_SETUP,     /* the library refused to build a pool or a request */
  MO_FAIL_RC,        /* an operation's return code differs */
  MO_FAIL_CALLBACKS, /* the callbacks run, or their order, differ */
  MO_FAIL_SLOT,      /* a grant's state or holdings differ */
  MO_FAIL_PARTIAL,   /* a grant holds less or more than its request */
  MO_FAIL_RESOURCE,  /* a resource's capacity, use or waiters differ */
  MO_FAIL_SUM,       /* in use is not the sum of the grants */
  MO_FAIL_CAPACITY,  /* in use above capacity, and not by a shrink */
  MO_FAIL_WITHHELD,  /* withheld differs, or exceeds needs or free units */
  MO_FAIL_DEVICE,    /* a device's figures or reservations */
  MO_FAIL_POOL,      /* the pool's waiting, backfilled or late heads */
  MO_FAIL_PROMISE,   /* a head granted after its sticky shadow time */
  MO_FAIL_MODEL,     /* the model's self-check (a bug in the model) */
  MO_FAIL_DESTROY,   /* the pool could not be destroyed after draining */
  MO_FAIL_SABOTAGE_IN_USE,  /* mo_sabotage_in_use */
  MO_FAIL_SABOTAGE_WAITING, /* mo_sabotage_waiting */
  MO_FAIL_NKINDS
};

/* A short name for a failure kind ("callbacks", "capacity", ...). */
const char *mo_fail_name(int kind);

/* What one run found. */
typedef struct mo_result {
  size_t ops_run; /* operations executed and compared */
  long failed_at; /* index of the operation that failed; -1: none */
  int kind;       /* enum mo_fail; MO_FAIL_NONE when it passed */
  /* MO_FAIL_RC: the call, and what the library and the model returned. */
  const char *call;
  int lib_rc, model_rc;
  char why[512]; /* the mismatch or broken invariant */
} mo_result;

/* Whether two failed runs failed the same way (see enum mo_fail). */
int mo_same_failure(const mo_result *a, const mo_result *b);

/*
 * Run a program. `trace` (may be NULL) gets each operation in readable
 * form with its outcome. Returns 0 when library and model agree and every
 * invariant holds after every operation, 1 otherwise (see res->why).
 */
int mo_run(uint8_t flags, const mo_op *ops, size_t n, FILE *trace,
           mo_result *res);

/* The same from raw bytes: data[0] is the flags byte, then operations of
 * MO_OP_BYTES bytes (a trailing partial one is ignored). Returns 0 or 1 as
 * mo_run(), and the reason in `why`. For the libFuzzer harness. */
int model_run_bytes(const uint8_t *data, size_t size, char *why,
                    size_t why_len);

/* A random program of n operations from `seed`: a few resources first, then
 * a weighted mix of every operation. */
void mo_generate(uint64_t seed, uint8_t *flags, mo_op *ops, size_t n);

/*
 * Shrink a failing program: remove chunks, then single operations, then
 * simplify each byte towards 0, keeping each change that still fails the
 * same way (mo_same_failure()), until nothing more can go. Returns the new
 * length (ops and *flags are updated).
 */
#define MO_SHRINK_MAX 4096 /* longer programs are left as they are */
size_t mo_shrink(uint8_t *flags, mo_op *ops, size_t n);

/*
 * Test-only sabotage of the comparison, to prove the shrinker and the
 * reporting work: when non-zero, a budget whose in-use reaches
 * mo_sabotage_in_use units is reported as a mismatch
 * (MO_FAIL_SABOTAGE_IN_USE), and one with mo_sabotage_waiting waiters or
 * more as another (MO_FAIL_SABOTAGE_WAITING). 0 (the default) in every
 * real run.
 */
extern int mo_sabotage_in_use;
extern int mo_sabotage_waiting;

#endif /* CRONOQ_TEST_MODEL_OPS_H */

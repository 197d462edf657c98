/*
 * Grants passed with a pool they are not bound to, for the suites that
 * check every kind of pool answers them alike (test_backend.c,
 * fleet/test_fleet_kinds.c): the calls that need a grant in a state, what
 * every pool answers a grant of another pool, and a held, a waiting and an
 * unbound grant to pass.
 *
 * The answer is an in-process pool's to a grant of another in-process
 * pool: by the grant's state where it is bound, CQ_EPOOL when it is in the
 * state the call needs (held for a release, waiting for a cancel),
 * CQ_ESTATE when it is not; a grant bound to no pool is idle.
 */
#ifndef CRONOQ_TEST_SUPPORT_FOREIGN_H
#define CRONOQ_TEST_SUPPORT_FOREIGN_H

#include "support/cqt.h"

#include <stdatomic.h>

/* Where the grant is bound: held, waiting, or idle (or bound to none). */
enum { CQT_HELD, CQT_WAITING, CQT_IDLE };

static const struct {
  const char *name;
  int want[3]; /* by CQT_HELD, CQT_WAITING, CQT_IDLE */
} cqt_foreign_calls[] = {
    {"release", {CQ_EPOOL, CQ_ESTATE, CQ_ESTATE}},
    {"release_part", {CQ_EPOOL, CQ_ESTATE, CQ_ESTATE}},
    {"release_device", {CQ_EPOOL, CQ_ESTATE, CQ_ESTATE}},
    {"cancel", {CQ_ESTATE, CQ_EPOOL, CQ_ESTATE}},
    {"abort", {CQ_ESTATE, CQ_EPOOL, CQ_ESTATE}},
};
#define CQT_FOREIGN_CALLS                                                      \
  (sizeof(cqt_foreign_calls) / sizeof(cqt_foreign_calls[0]))

/* Call i of the table on `pool` with `g`. */
static inline int cqt_foreign_call(size_t i, cq_pool *pool, cq_grant *g) {
  switch (i) {
  case 0:
    return cq_grant_release(pool, g);
  case 1:
    return cq_grant_release_part(pool, g, "db", 1);
  case 2:
    return cq_grant_release_device(pool, g, "gpu", 0, 250);
  case 3:
    return cq_grant_cancel(pool, g);
  default:
    return cq_grant_abort(pool, g, CQ_ETIMEDOUT);
  }
}

/* Every call of the table with `g` on each of the `n` pools, none of which
 * it is bound to, answers as to a grant in `state` (CQT_HELD...)
 * elsewhere. */
static inline void cqt_expect_foreign(cq_pool *const *pools, size_t n,
                                      cq_grant *g, int state) {
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < CQT_FOREIGN_CALLS; i++) {
      int rc = cqt_foreign_call(i, pools[k], g);
      int want = cqt_foreign_calls[i].want[state];
      if (rc != want)
        fail_msg("%s on pool %zu: %s, want %s", cqt_foreign_calls[i].name, k,
                 cq_err_name(rc), cq_err_name(want));
    }
}

/* What the waiting grant's callback was told; CQT_NOT_TOLD before. */
#define CQT_NOT_TOLD 1
static _Atomic int cqt_told = CQT_NOT_TOLD;
static inline void cqt_tell(cq_grant *g, int status) {
  (void)g;
  atomic_store(&cqt_told, status);
}

/* Three grants on one pool: `held` holds `one` (granted by a try), `waiting`
 * waits for `all` (a callback, cqt_tell()), `unbound` was never used. */
struct cqt_grants {
  cq_req one, all;
  cq_grant held, waiting, unbound;
};

/* Make them on `p`: `one` must fit now, and `all` not once it is held. */
static inline void cqt_grants_start(struct cqt_grants *k, cq_pool *p,
                                    const char *one, const char *all) {
  cqt_req(&k->one, p, one);
  cqt_req(&k->all, p, all);
  cq_grant_init(&k->held);
  cq_grant_init(&k->waiting);
  cq_grant_init(&k->unbound);
  assert_cq_ok(cq_grant_try(p, &k->held, &k->one));
  atomic_store(&cqt_told, CQT_NOT_TOLD);
  assert_cq_ok(cq_grant_submit(p, &k->waiting, &k->all, CQ_NEVER, cqt_tell));
}

/* That nothing changed: `held` holds 1 of "db", `waiting` has not been
 * told. */
static inline void cqt_grants_unchanged(struct cqt_grants *k) {
  assert_true(cq_grant_is_held(&k->held));
  assert_int_equal(cq_grant_held(&k->held, "db"), 1);
  assert_int_equal(atomic_load(&cqt_told), CQT_NOT_TOLD);
}

/* End them in their pool `p`, each once: the waiter is cancelled, the
 * holder released, and a second release refused. */
static inline void cqt_grants_end(struct cqt_grants *k, cq_pool *p) {
  assert_cq_ok(cq_grant_cancel(p, &k->waiting));
  assert_int_equal(atomic_load(&cqt_told), CQ_ECANCELED);
  assert_cq_ok(cq_grant_release(p, &k->held));
  assert_cq_err(cq_grant_release(p, &k->held), CQ_ESTATE);
}

#endif /* CRONOQ_TEST_SUPPORT_FOREIGN_H */

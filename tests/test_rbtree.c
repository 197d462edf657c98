/*
 * The intrusive red-black tree against a plain sorted array, under random
 * inserts and removals, with every red-black property checked after each
 * change.
 */
#include "support/cqt.h"

#include "cq_internal.h"

#include <stdlib.h>

struct item {
  cq__rbnode node;
  int key;
  int in;
};

static int item_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  int ka = CQ__CONTAINER_OF(a, struct item, node)->key;
  int kb = CQ__CONTAINER_OF(b, struct item, node)->key;
  return (ka > kb) - (ka < kb);
}

static int item_key_cmp(const cq__rbnode *n, const void *key) {
  int k = CQ__CONTAINER_OF(n, struct item, node)->key;
  int want = *(const int *)key;
  return (k > want) - (k < want);
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)rng_state;
}

#define N 2000

static void check_against_model(cq__rbtree *t, struct item *items) {
  assert_true(cq__rb_check(t, item_cmp) >= 0);
  size_t n = 0;
  const cq__rbnode *node = cq__rb_first(t);
  for (int k = 0; k < N; k++) {
    if (!items[k].in)
      continue;
    assert_non_null(node);
    assert_int_equal(CQ__CONTAINER_OF(node, struct item, node)->key, k);
    node = cq__rb_next(node);
    n++;
  }
  assert_null(node);
  assert_int_equal(t->count, n);
}

static void test_random_inserts_and_removals_keep_order_and_balance(void **s) {
  (void)s;
  static struct item items[N];
  cq__rbtree t = {0};
  for (int k = 0; k < N; k++)
    items[k].key = k;
  for (int step = 0; step < 20000; step++) {
    struct item *it = &items[rnd() % N];
    if (it->in)
      cq__rb_remove(&t, &it->node);
    else
      cq__rb_insert(&t, &it->node, item_cmp);
    it->in = !it->in;
    if (step % 97 == 0)
      check_against_model(&t, items);
  }
  check_against_model(&t, items);
}

static void test_lower_bound_finds_the_first_key_not_below(void **s) {
  (void)s;
  static struct item items[100];
  cq__rbtree t = {0};
  for (int k = 0; k < 100; k++) {
    items[k].key = k * 2; /* even keys only */
    cq__rb_insert(&t, &items[k].node, item_cmp);
  }
  for (int want = -1; want < 201; want++) {
    cq__rbnode *n = cq__rb_lower_bound(&t, &want, item_key_cmp);
    if (want > 198) {
      assert_null(n);
      continue;
    }
    int expect = want <= 0 ? 0 : (want + 1) / 2 * 2;
    assert_non_null(n);
    assert_int_equal(CQ__CONTAINER_OF(n, struct item, node)->key, expect);
  }
}

static void test_walks_both_ways_and_keeps_first_and_last(void **s) {
  (void)s;
  static struct item items[50];
  cq__rbtree t = {0};
  assert_null(cq__rb_first(&t));
  assert_null(cq__rb_last(&t));
  for (int k = 49; k >= 0; k--) {
    items[k].key = k;
    cq__rb_insert(&t, &items[k].node, item_cmp);
  }
  assert_ptr_equal(cq__rb_first(&t), &items[0].node);
  assert_ptr_equal(cq__rb_last(&t), &items[49].node);
  int k = 49;
  for (cq__rbnode *n = cq__rb_last(&t); n != NULL; n = cq__rb_prev(n), k--)
    assert_int_equal(CQ__CONTAINER_OF(n, struct item, node)->key, k);
  assert_int_equal(k, -1);
  cq__rb_remove(&t, &items[0].node);
  assert_ptr_equal(cq__rb_first(&t), &items[1].node);
  assert_true(cq__rb_check(&t, item_cmp) >= 0);
}

/* An augmented tree: each node keeps the smallest value in its subtree. */
struct aitem {
  cq__rbnode node;
  int key, value, min;
  int in;
};

static struct aitem *aitem_of(const cq__rbnode *n) {
  return CQ__CONTAINER_OF(n, struct aitem, node);
}

static int aitem_cmp(const cq__rbnode *a, const cq__rbnode *b) {
  int ka = aitem_of(a)->key, kb = aitem_of(b)->key;
  return (ka > kb) - (ka < kb);
}

static bool aitem_aug(cq__rbnode *n) {
  struct aitem *it = aitem_of(n);
  int m = it->value;
  for (int d = 0; d < 2; d++)
    if (n->child[d] != NULL && aitem_of(n->child[d])->min < m)
      m = aitem_of(n->child[d])->min;
  bool changed = m != it->min;
  it->min = m;
  return changed;
}

/* The smallest value under n, the slow way. */
static int subtree_min(const cq__rbnode *n) {
  if (n == NULL)
    return INT32_MAX;
  int m = aitem_of(n)->value;
  for (int d = 0; d < 2; d++) {
    int c = subtree_min(n->child[d]);
    m = c < m ? c : m;
  }
  return m;
}

static void check_summaries(const cq__rbnode *n) {
  if (n == NULL)
    return;
  assert_int_equal(aitem_of(n)->min, subtree_min(n));
  check_summaries(n->child[0]);
  check_summaries(n->child[1]);
}

/* Take `it` out of the tree if it is in, else put it in. */
static void toggle(cq__rbtree *t, struct aitem *it) {
  if (it->in)
    cq__rb_remove_aug(t, &it->node, aitem_aug);
  else
    cq__rb_insert_aug(t, &it->node, aitem_cmp, aitem_aug);
  it->in = !it->in;
}

static void test_augmented_tree_keeps_every_subtree_minimum(void **s) {
  (void)s;
  enum { A = 600 };
  static struct aitem items[A];
  cq__rbtree t = {0};
  for (int k = 0; k < A; k++) {
    items[k].key = k;
    items[k].value = (int)(rnd() % 1000);
    items[k].in = 0;
  }
  for (int round = 0; round < 6000; round++) {
    toggle(&t, &items[rnd() % A]);
    if (round % 97 == 0 || round > 5900) {
      assert_true(cq__rb_check(&t, aitem_cmp) >= 0);
      check_summaries(t.root);
    }
  }
}

/* Few distinct values: most summaries stay the same after a change, so
 * the walk up stops early, and must stop only where that is right (a
 * removed node with two children is replaced by its successor, whose old
 * summary was of another subtree). Checked after every operation. */
static void test_summaries_stay_right_where_the_walk_up_stops_early(void **s) {
  (void)s;
  enum { A = 48 };
  static struct aitem items[A];
  for (int trial = 0; trial < 40; trial++) {
    cq__rbtree t = {0};
    for (int k = 0; k < A; k++) {
      items[k].key = k;
      items[k].value = (int)(rnd() % 3);
      items[k].min = -1;
      items[k].in = 0;
    }
    for (int round = 0; round < 2000; round++) {
      toggle(&t, &items[rnd() % A]);
      assert_true(cq__rb_check(&t, aitem_cmp) >= 0);
      check_summaries(t.root);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_inserts_and_removals_keep_order_and_balance),
      cmocka_unit_test(test_augmented_tree_keeps_every_subtree_minimum),
      cmocka_unit_test(test_summaries_stay_right_where_the_walk_up_stops_early),
      cmocka_unit_test(test_lower_bound_finds_the_first_key_not_below),
      cmocka_unit_test(test_walks_both_ways_and_keeps_first_and_last),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

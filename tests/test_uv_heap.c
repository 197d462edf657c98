/*
 * The libuv adapter's deadline heap (src/uv/uvheap.h): after every insert
 * and every removal, wherever the node is, the tree is complete (positions
 * 1..count filled, nothing beyond), its links agree both ways, every
 * parent orders before its children, and the root is the earliest item;
 * draining it gives the items in order, equal keys in insertion order.
 */
#include "support/cqt.h"

#include "uv/uvheap.h"

struct item {
  cq__uvheap_node node;
  long key;
  long seq; /* breaks ties, as the adapter's acquire order does */
  int in_heap;
};

#define ITEM_OF(n)                                                             \
  ((struct item *)(void *)((char *)(n)-offsetof(struct item, node)))

static int item_less(const cq__uvheap_node *a, const cq__uvheap_node *b) {
  const struct item *x = ITEM_OF(a), *y = ITEM_OF(b);
  if (x->key != y->key)
    return x->key < y->key;
  return x->seq < y->seq;
}

/* Walk position k's subtree: count its nodes and check links and order. */
static size_t check_subtree(const cq__uvheap *h, const cq__uvheap_node *n,
                            size_t k) {
  if (n == NULL)
    return 0;
  assert_true(k <= h->count); /* complete: nothing past the last place */
  const cq__uvheap_node *kids[2] = {n->left, n->right};
  for (int i = 0; i < 2; i++) {
    if (kids[i] == NULL)
      continue;
    assert_ptr_equal(kids[i]->parent, n);
    assert_false(h->less(kids[i], n));
  }
  if (n->right != NULL)
    assert_non_null(n->left);
  return 1 + check_subtree(h, n->left, 2 * k) +
         check_subtree(h, n->right, 2 * k + 1);
}

static void check_heap(const cq__uvheap *h, struct item *items, size_t n) {
  if (h->root != NULL)
    assert_null(h->root->parent);
  /* Every place up to count is reached, so count nodes means no gap. */
  assert_int_equal(check_subtree(h, h->root, 1), h->count);
  const struct item *least = NULL;
  size_t in = 0;
  for (size_t i = 0; i < n; i++) {
    if (!items[i].in_heap)
      continue;
    in++;
    if (least == NULL || item_less(&items[i].node, &least->node))
      least = &items[i];
  }
  assert_int_equal(in, h->count);
  if (least == NULL)
    assert_null(cq__uvheap_min(h));
  else
    assert_ptr_equal(cq__uvheap_min(h), &least->node);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

#define N_ITEMS 300

static void test_every_insert_and_removal_keeps_the_heap_whole(void **state) {
  (void)state;
  static struct item items[N_ITEMS];
  memset(items, 0, sizeof(items));
  cq__uvheap h;
  cq__uvheap_init(&h, item_less);
  long seq = 0;
  for (int op = 0; op < 20000; op++) {
    struct item *it = &items[rnd() % N_ITEMS];
    if (it->in_heap) {
      /* Any node: the root, a leaf, the last place or one in between. */
      cq__uvheap_remove(&h, &it->node);
      it->in_heap = 0;
      assert_null(it->node.parent);
    } else {
      it->key = (long)(rnd() % 64); /* few keys: many ties */
      it->seq = seq++;
      cq__uvheap_insert(&h, &it->node);
      it->in_heap = 1;
    }
    check_heap(&h, items, N_ITEMS);
  }
}

static void test_draining_gives_items_in_order_ties_by_arrival(void **state) {
  (void)state;
  static struct item items[N_ITEMS];
  memset(items, 0, sizeof(items));
  cq__uvheap h;
  cq__uvheap_init(&h, item_less);
  for (int i = 0; i < N_ITEMS; i++) {
    items[i].key = (long)(rnd() % 16);
    items[i].seq = i;
    items[i].in_heap = 1;
    cq__uvheap_insert(&h, &items[i].node);
  }
  check_heap(&h, items, N_ITEMS);
  const struct item *prev = NULL;
  for (int i = 0; i < N_ITEMS; i++) {
    struct item *first = ITEM_OF(cq__uvheap_min(&h));
    if (prev != NULL)
      assert_true(item_less(&prev->node, &first->node));
    cq__uvheap_remove(&h, &first->node);
    first->in_heap = 0;
    prev = first;
  }
  assert_null(cq__uvheap_min(&h));
  assert_int_equal(h.count, 0);
}

static void test_one_node_comes_and_goes(void **state) {
  (void)state;
  struct item it = {{NULL, NULL, NULL}, 5, 0, 1};
  cq__uvheap h;
  cq__uvheap_init(&h, item_less);
  assert_null(cq__uvheap_min(&h));
  cq__uvheap_insert(&h, &it.node);
  assert_ptr_equal(cq__uvheap_min(&h), &it.node);
  cq__uvheap_remove(&h, &it.node);
  assert_null(cq__uvheap_min(&h));
  assert_int_equal(h.count, 0);
  cq__uvheap_insert(&h, &it.node); /* and again, from a removed node */
  assert_ptr_equal(cq__uvheap_min(&h), &it.node);
  cq__uvheap_remove(&h, &it.node);
  assert_null(h.root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_insert_and_removal_keeps_the_heap_whole),
      cmocka_unit_test(test_draining_gives_items_in_order_ties_by_arrival),
      cmocka_unit_test(test_one_node_comes_and_goes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

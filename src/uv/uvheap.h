/*
 * The libuv adapter's deadlines: an intrusive binary min-heap.
 *
 * Each node lives in the item it orders (a pending request), so inserting
 * and removing never allocate and never fail. The heap is a complete
 * binary tree linked by pointers: position k (1 for the root) has its
 * children at 2k and 2k + 1, so the bits of k below its leading one spell
 * the path from the root (0: left, 1: right), and the next free place and
 * the last node are found from the count alone. Every parent orders no
 * later than its children; the earliest item is the root. Insert and
 * remove (of any node) take O(log n) steps.
 *
 * Not thread-safe: the adapter uses it on its loop's thread only.
 */
#ifndef CRONOQ_UV_UVHEAP_H
#define CRONOQ_UV_UVHEAP_H

#include <stddef.h>

typedef struct cq__uvheap_node {
  struct cq__uvheap_node *left, *right, *parent;
} cq__uvheap_node;

/* Non-zero when `a` must come out before `b`: a strict order. */
typedef int (*cq__uvheap_less)(const cq__uvheap_node *a,
                               const cq__uvheap_node *b);

typedef struct cq__uvheap {
  cq__uvheap_node *root; /* the earliest node; NULL when empty */
  size_t count;
  cq__uvheap_less less;
} cq__uvheap;

void cq__uvheap_init(cq__uvheap *h, cq__uvheap_less less);

/* The earliest node, or NULL. */
static inline cq__uvheap_node *cq__uvheap_min(const cq__uvheap *h) {
  return h->root;
}

/* Add `n`, which must not be in a heap. */
void cq__uvheap_insert(cq__uvheap *h, cq__uvheap_node *n);

/* Take out `n`, which must be in `h`. */
void cq__uvheap_remove(cq__uvheap *h, cq__uvheap_node *n);

#endif /* CRONOQ_UV_UVHEAP_H */

/*
 * An intrusive red-black tree (rbtree.c): the node lives inside the member,
 * and the tree never allocates. Insert, remove, neighbours and a lower-bound
 * search are O(log n); the first and last members are O(1).
 */
#ifndef CRONOQ_UTIL_RBTREE_H
#define CRONOQ_UTIL_RBTREE_H

#include "util/base.h"

typedef struct cq__rbnode {
  uintptr_t parent_color; /* parent pointer, low bit set when red */
  struct cq__rbnode *child[2];
} cq__rbnode;

typedef struct cq__rbtree {
  cq__rbnode *root;
  cq__rbnode *first; /* leftmost node, NULL when empty */
  cq__rbnode *last;  /* rightmost node, NULL when empty */
  size_t count;
} cq__rbtree;

/* Orders two nodes: < 0, 0 or > 0. Keys in one tree must be unique. */
typedef int (*cq__rbcmp)(const cq__rbnode *a, const cq__rbnode *b);
/* Orders a node against a search key. */
typedef int (*cq__rbkeycmp)(const cq__rbnode *node, const void *key);
/* An augmented tree keeps, in each member, a summary of its subtree (the
 * smallest need below it, say): this computes n's from its own value and
 * its children's summaries, and says whether it changed (the walk up after
 * an insertion or removal stops where a summary stays the same). */
typedef bool (*cq__rbaug)(cq__rbnode *n);

void cq__rb_insert(cq__rbtree *t, cq__rbnode *n, cq__rbcmp cmp);
void cq__rb_remove(cq__rbtree *t, cq__rbnode *z);
/* The same for an augmented tree: every summary is kept right, in
 * O(log n) summary computations. */
void cq__rb_insert_aug(cq__rbtree *t, cq__rbnode *n, cq__rbcmp cmp,
                       cq__rbaug aug);
void cq__rb_remove_aug(cq__rbtree *t, cq__rbnode *z, cq__rbaug aug);
cq__rbnode *cq__rb_next(const cq__rbnode *n);
cq__rbnode *cq__rb_prev(const cq__rbnode *n);
/* The first node that is not ordered before `key`, or NULL. */
cq__rbnode *cq__rb_lower_bound(const cq__rbtree *t, const void *key,
                               cq__rbkeycmp cmp);
/* Checks every red-black property; returns the black height or -1. */
int cq__rb_check(const cq__rbtree *t, cq__rbcmp cmp);

static inline cq__rbnode *cq__rb_first(const cq__rbtree *t) { return t->first; }
static inline cq__rbnode *cq__rb_last(const cq__rbtree *t) { return t->last; }

#endif /* CRONOQ_UTIL_RBTREE_H */

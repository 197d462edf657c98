/*
 * Intrusive red-black tree.
 *
 * The library keeps several ordered sets whose members live in caller-owned
 * storage: waiters by arrival (claims and blocked sets), waiters by deadline.
 * None of them may allocate, and each needs insert, remove of any member,
 * in-order walks and a lower-bound search, all in O(log n). The node lives
 * inside the member; the tree never allocates.
 *
 * Invariants (checked by cq__rb_check): the root is black; a red node has
 * black children; every path from a node down to a missing child crosses the
 * same number of black nodes; the in-order sequence is sorted by the tree's
 * comparison. `first` is always the leftmost node, so the minimum costs O(1).
 *
 * The colour is the low bit of the parent pointer (nodes are at least 2-byte
 * aligned). `last` is kept too, and an insert that goes after the last node
 * attaches there without descending. Directions are indices: child[0] is left,
 * child[1] right, so each case is written once for both mirror images.
 */
#include "util/rbtree.h"

#define RED ((uintptr_t)1)

static inline cq__rbnode *parent_of(const cq__rbnode *n) {
  /* The integer is the pointer with its colour bit; clearing the bit gives
   * back the pointer it was made from. */
  /* NOLINTNEXTLINE(performance-no-int-to-ptr) */
  return (cq__rbnode *)(n->parent_color & ~RED);
}

static inline bool is_red(const cq__rbnode *n) {
  return n != NULL && (n->parent_color & RED) != 0;
}

static inline void set_parent(cq__rbnode *n, cq__rbnode *parent) {
  n->parent_color = (uintptr_t)parent | (n->parent_color & RED);
}

static inline void set_red(cq__rbnode *n) { n->parent_color |= RED; }

static inline void set_black(cq__rbnode *n) {
  if (n != NULL)
    n->parent_color &= ~RED;
}

static inline void copy_color(cq__rbnode *to, const cq__rbnode *from) {
  to->parent_color = (to->parent_color & ~RED) | (from->parent_color & RED);
}

/* Put `v` where `u` hangs (under u's parent, or as root). */
static void replace_child(cq__rbtree *t, cq__rbnode *u, cq__rbnode *v) {
  cq__rbnode *p = parent_of(u);
  if (p == NULL)
    t->root = v;
  else
    p->child[p->child[1] == u] = v;
  if (v != NULL)
    set_parent(v, p);
}

/*
 * Rotate `x` down towards direction `d`: its child on the other side takes
 * its place, and x becomes that child's `d` child.
 */
static void rotate(cq__rbtree *t, cq__rbnode *x, int d, cq__rbaug aug) {
  cq__rbnode *y = x->child[!d];
  x->child[!d] = y->child[d];
  if (y->child[d] != NULL)
    set_parent(y->child[d], x);
  replace_child(t, x, y);
  y->child[d] = x;
  set_parent(x, y);
  /* Only these two subtrees changed members: x's, then y's above it. */
  if (aug != NULL) {
    aug(x);
    aug(y);
  }
}

/* Summaries from `n` up, after its subtree changed: up to the root, or to
 * the first one that stays the same, once `past` (a node whose own value
 * changed, or NULL) has been recomputed. A summary depends only on its
 * node's value and its children's summaries, so above an unchanged one
 * nothing changes. */
static void aug_up(cq__rbnode *n, cq__rbaug aug, const cq__rbnode *past) {
  if (aug == NULL)
    return;
  for (; n != NULL; n = parent_of(n)) {
    bool changed = aug(n);
    if (n == past)
      past = NULL;
    if (!changed && past == NULL)
      return;
  }
}

static cq__rbnode *extreme(cq__rbnode *n, int d) {
  while (n != NULL && n->child[d] != NULL)
    n = n->child[d];
  return n;
}

void cq__rb_insert(cq__rbtree *t, cq__rbnode *n, cq__rbcmp cmp) {
  cq__rb_insert_aug(t, n, cmp, NULL);
}

void cq__rb_remove(cq__rbtree *t, cq__rbnode *z) {
  cq__rb_remove_aug(t, z, NULL);
}

void cq__rb_insert_aug(cq__rbtree *t, cq__rbnode *n, cq__rbcmp cmp,
                       cq__rbaug aug) {
  cq__rbnode *parent = NULL;
  cq__rbnode **link = &t->root;
  bool leftmost = true, rightmost = true;

  if (t->last != NULL && cmp(n, t->last) > 0) {
    /* Appending (the common case: arrivals are the youngest) skips the
     * descent, so the cost does not grow with the tree. */
    parent = t->last;
    link = &parent->child[1];
    leftmost = false;
  } else {
    while (*link != NULL) {
      parent = *link;
      int d = cmp(n, parent) > 0;
      if (d)
        leftmost = false;
      else
        rightmost = false;
      link = &parent->child[d];
    }
  }
  n->child[0] = n->child[1] = NULL;
  n->parent_color = (uintptr_t)parent | RED;
  *link = n;
  if (leftmost)
    t->first = n;
  if (rightmost)
    t->last = n;
  t->count++;
  if (aug != NULL) {
    (void)aug(n); /* a new leaf: its summary had no value before */
    aug_up(parent, aug, NULL);
  }

  /* Restore the colours: `n` is red and may have a red parent. */
  cq__rbnode *x = n;
  cq__rbnode *p;
  while ((p = parent_of(x)) != NULL && is_red(p)) {
    cq__rbnode *g = parent_of(p); /* exists: a red node is never the root */
    int side = g->child[1] == p;
    cq__rbnode *uncle = g->child[!side];
    if (is_red(uncle)) {
      set_black(p);
      set_black(uncle);
      set_red(g);
      x = g;
      continue;
    }
    if (x == p->child[!side]) {
      /* Inner grandchild: turn it into the outer case. */
      rotate(t, p, side, aug);
      x = p;
      p = parent_of(x);
    }
    rotate(t, g, !side, aug);
    set_black(p);
    set_red(g);
    break;
  }
  set_black(t->root);
}

void cq__rb_remove_aug(cq__rbtree *t, cq__rbnode *z, cq__rbaug aug) {
  cq__rbnode *x;           /* node that moves into the removed position */
  cq__rbnode *xp;          /* its parent (x may be NULL) */
  cq__rbnode *past = NULL; /* the walk up may stop only after this one */
  bool removed_red;

  if (t->first == z)
    t->first = cq__rb_next(z);
  if (t->last == z)
    t->last = cq__rb_prev(z);
  t->count--;

  if (z->child[0] == NULL || z->child[1] == NULL) {
    x = z->child[z->child[0] == NULL];
    xp = parent_of(z);
    removed_red = is_red(z);
    replace_child(t, z, x);
  } else {
    /* Two children: splice out the successor y and put it where z was. */
    cq__rbnode *y = extreme(z->child[1], 0);
    removed_red = is_red(y);
    x = y->child[1];
    if (parent_of(y) == z) {
      xp = y;
    } else {
      xp = parent_of(y);
      replace_child(t, y, x);
      y->child[1] = z->child[1];
      set_parent(y->child[1], y);
    }
    replace_child(t, z, y);
    y->child[0] = z->child[0];
    set_parent(y->child[0], y);
    copy_color(y, z);
    /* y's summary before was of another subtree: no stop until above it. */
    past = parent_of(y) != NULL ? parent_of(y) : y;
  }
  z->child[0] = z->child[1] = NULL;
  z->parent_color = 0;
  /* Every subtree that lost z lies on the path from xp up. */
  aug_up(xp, aug, past);

  if (removed_red)
    return;

  /* A black node left: x carries an extra black until it is absorbed. */
  while (x != t->root && !is_red(x)) {
    int side = xp->child[1] == x;
    cq__rbnode *w = xp->child[!side]; /* sibling: never NULL here */
    if (is_red(w)) {
      set_black(w);
      set_red(xp);
      rotate(t, xp, side, aug);
      w = xp->child[!side];
    }
    if (!is_red(w->child[0]) && !is_red(w->child[1])) {
      set_red(w);
      x = xp;
      xp = parent_of(x);
      continue;
    }
    if (!is_red(w->child[!side])) {
      set_black(w->child[side]);
      set_red(w);
      rotate(t, w, !side, aug);
      w = xp->child[!side];
    }
    copy_color(w, xp);
    set_black(xp);
    set_black(w->child[!side]);
    rotate(t, xp, side, aug);
    x = t->root;
    break;
  }
  set_black(x);
}

static cq__rbnode *step(const cq__rbnode *n, int d) {
  if (n->child[d] != NULL)
    return extreme(n->child[d], !d);
  cq__rbnode *p = parent_of(n);
  while (p != NULL && n == p->child[d]) {
    n = p;
    p = parent_of(p);
  }
  return p;
}

cq__rbnode *cq__rb_next(const cq__rbnode *n) { return step(n, 1); }
cq__rbnode *cq__rb_prev(const cq__rbnode *n) { return step(n, 0); }

cq__rbnode *cq__rb_lower_bound(const cq__rbtree *t, const void *key,
                               cq__rbkeycmp cmp) {
  cq__rbnode *n = t->root;
  cq__rbnode *best = NULL;
  while (n != NULL) {
    if (cmp(n, key) >= 0) {
      best = n;
      n = n->child[0];
    } else {
      n = n->child[1];
    }
  }
  return best;
}

static int check_node(const cq__rbnode *n, const cq__rbnode *parent,
                      size_t *count) {
  if (n == NULL)
    return 1;
  if (parent_of(n) != parent)
    return -1;
  if (is_red(n) && (is_red(n->child[0]) || is_red(n->child[1])))
    return -1;
  int l = check_node(n->child[0], n, count);
  int r = check_node(n->child[1], n, count);
  if (l < 0 || r < 0 || l != r)
    return -1;
  (*count)++;
  return l + (is_red(n) ? 0 : 1);
}

int cq__rb_check(const cq__rbtree *t, cq__rbcmp cmp) {
  if (is_red(t->root))
    return -1;
  size_t count = 0;
  int h = check_node(t->root, NULL, &count);
  if (h < 0 || count != t->count)
    return -1;
  if (t->first != extreme(t->root, 0) || t->last != extreme(t->root, 1))
    return -1;
  const cq__rbnode *prev = NULL;
  for (const cq__rbnode *n = t->first; n != NULL; n = cq__rb_next(n)) {
    if (prev != NULL && cmp(prev, n) >= 0)
      return -1;
    prev = n;
  }
  return h;
}

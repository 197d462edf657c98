/*
 * The intrusive binary min-heap of the adapter's deadlines (see uvheap.h
 * for its shape). Nodes move by relinking, never by copying: an item's
 * node stays its own, wherever in the tree it is.
 */
#include "uvheap.h"

void cq__uvheap_init(cq__uvheap *h, cq__uvheap_less less) {
  h->root = NULL;
  h->count = 0;
  h->less = less;
}

/* The link that holds position `k` (1-based, at most count + 1), and the
 * node it hangs from (NULL for the root). */
static cq__uvheap_node **link_at(cq__uvheap *h, size_t k,
                                 cq__uvheap_node **parent) {
  int depth = 0;
  for (size_t m = k; m > 1; m >>= 1)
    depth++;
  cq__uvheap_node **link = &h->root;
  *parent = NULL;
  for (int bit = depth - 1; bit >= 0; bit--) {
    *parent = *link;
    link = (k >> bit) & 1 ? &(*parent)->right : &(*parent)->left;
  }
  return link;
}

/* Make `n` take its parent's place, and the parent take n's. */
static void swap_with_parent(cq__uvheap *h, cq__uvheap_node *n) {
  cq__uvheap_node *p = n->parent;
  cq__uvheap_node *up = p->parent;
  cq__uvheap_node *left = n->left, *right = n->right;
  if (p->left == n) {
    n->left = p;
    n->right = p->right;
    if (n->right != NULL)
      n->right->parent = n;
  } else {
    n->right = p;
    n->left = p->left; /* a right child always has a left sibling */
    n->left->parent = n;
  }
  p->left = left;
  p->right = right;
  if (left != NULL)
    left->parent = p;
  if (right != NULL)
    right->parent = p;
  p->parent = n;
  n->parent = up;
  if (up == NULL)
    h->root = n;
  else if (up->left == p)
    up->left = n;
  else
    up->right = n;
}

static void sift_up(cq__uvheap *h, cq__uvheap_node *n) {
  while (n->parent != NULL && h->less(n, n->parent))
    swap_with_parent(h, n);
}

static void sift_down(cq__uvheap *h, cq__uvheap_node *n) {
  for (;;) {
    cq__uvheap_node *child = n->left;
    if (child == NULL)
      return; /* a leaf: with no left child there is no right one */
    if (n->right != NULL && h->less(n->right, child))
      child = n->right;
    if (!h->less(child, n))
      return;
    swap_with_parent(h, child);
  }
}

void cq__uvheap_insert(cq__uvheap *h, cq__uvheap_node *n) {
  cq__uvheap_node *parent;
  cq__uvheap_node **link = link_at(h, h->count + 1, &parent);
  n->left = n->right = NULL;
  n->parent = parent;
  *link = n;
  h->count++;
  sift_up(h, n);
}

void cq__uvheap_remove(cq__uvheap *h, cq__uvheap_node *n) {
  /* The last node leaves its place, and takes n's unless it is n. */
  cq__uvheap_node *parent;
  cq__uvheap_node **link = link_at(h, h->count, &parent);
  cq__uvheap_node *last = *link;
  *link = NULL;
  h->count--;
  if (last != n) {
    last->left = n->left;
    last->right = n->right;
    last->parent = n->parent;
    if (last->left != NULL)
      last->left->parent = last;
    if (last->right != NULL)
      last->right->parent = last;
    if (n->parent == NULL)
      h->root = last;
    else if (n->parent->left == n)
      n->parent->left = last;
    else
      n->parent->right = last;
    /* It may order before n's parent or after n's children, not both. */
    sift_up(h, last);
    sift_down(h, last);
  }
  n->left = n->right = n->parent = NULL;
}

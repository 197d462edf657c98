/*
 * Parkers (parker.h): one per thread, recycled through a free list, never
 * freed.
 */
#define _GNU_SOURCE
#include "util/parker.h"

#include "util/platform.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CQ__FUTEX 1
#else
#define CQ__FUTEX 0
#endif

struct cq__parker {
  _Atomic uint32_t permit; /* 1: an unpark is waiting to be taken */
#if !CQ__FUTEX
  cq__mutex lock;
  pthread_cond_t cond;
#endif
  struct cq__parker *next; /* on the free list */
};

/* The free list, and the key whose destructor puts a thread's parker on
 * it when the thread ends. */
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cq__parker *free_list;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local struct cq__parker *mine;

static void give_back(void *arg) {
  struct cq__parker *p = arg;
  pthread_mutex_lock(&free_lock);
  p->next = free_list;
  free_list = p;
  pthread_mutex_unlock(&free_lock);
}

static void make_key(void) { (void)pthread_key_create(&key, give_back); }

static struct cq__parker *parker_new(void) {
  pthread_mutex_lock(&free_lock);
  struct cq__parker *p = free_list;
  if (p != NULL)
    free_list = p->next;
  pthread_mutex_unlock(&free_lock);
  if (p != NULL)
    return p;
  p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  atomic_init(&p->permit, 0);
#if !CQ__FUTEX
  if (cq__mutex_init(&p->lock) != 0 || cq__cond_init(&p->cond) != 0) {
    free(p);
    return NULL;
  }
#endif
  return p;
}

cq__parker *cq__parker_self(void) {
  if (mine != NULL)
    return mine;
  if (pthread_once(&key_once, make_key) != 0)
    return NULL;
  struct cq__parker *p = parker_new();
  if (p == NULL)
    return NULL;
  if (pthread_setspecific(key, p) != 0) {
    give_back(p);
    return NULL;
  }
  mine = p;
  return p;
}

#if CQ__FUTEX

int cq__parker_park(cq__parker *p, int64_t deadline_ms) {
  struct timespec ts;
  if (deadline_ms != CQ_NEVER) {
    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
  }
  for (;;) {
    if (atomic_exchange_explicit(&p->permit, 0, memory_order_acquire) == 1)
      return 0;
    if (deadline_ms != CQ_NEVER && cq_now() >= deadline_ms)
      return CQ_ETIMEDOUT;
    /* Sleeps only while the word is still 0: an unpark in between makes
     * it return at once. The deadline is absolute, on the monotonic
     * clock. */
    (void)syscall(SYS_futex, &p->permit, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
                  0, deadline_ms != CQ_NEVER ? &ts : NULL, NULL,
                  FUTEX_BITSET_MATCH_ANY);
  }
}

void cq__parker_unpark(cq__parker *p) {
  if (atomic_exchange_explicit(&p->permit, 1, memory_order_release) == 0)
    (void)syscall(SYS_futex, &p->permit, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1,
                  NULL, NULL, 0);
}

#else

int cq__parker_park(cq__parker *p, int64_t deadline_ms) {
  int rc = 0;
  cq__mutex_lock(&p->lock);
  while (atomic_load_explicit(&p->permit, memory_order_relaxed) == 0) {
    if (deadline_ms != CQ_NEVER && cq_now() >= deadline_ms) {
      rc = CQ_ETIMEDOUT;
      break;
    }
    cq__cond_wait(&p->cond, &p->lock, deadline_ms);
  }
  if (rc == 0)
    atomic_store_explicit(&p->permit, 0, memory_order_relaxed);
  cq__mutex_unlock(&p->lock);
  atomic_thread_fence(memory_order_acquire);
  return rc;
}

void cq__parker_unpark(cq__parker *p) {
  atomic_thread_fence(memory_order_release);
  cq__mutex_lock(&p->lock);
  atomic_store_explicit(&p->permit, 1, memory_order_relaxed);
  (void)pthread_cond_signal(&p->cond);
  cq__mutex_unlock(&p->lock);
}

#endif

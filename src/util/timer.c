/* The timer thread (timer.h). */
#include "util/timer.h"

static void *timer_main(void *arg) {
  struct cq__timer *t = arg;
  cq__mutex_lock(t->mutex);
  while (!t->stop) {
    int64_t next = t->fn(t->arg);
    if (t->stop)
      break;
    t->wake_ms = next;
    cq__cond_wait(&t->cond, t->mutex, next);
  }
  cq__mutex_unlock(t->mutex);
  return NULL;
}

int cq__timer_init(struct cq__timer *t, cq__mutex *mutex, cq__timer_fn fn,
                   void *arg) {
  t->mutex = mutex;
  t->fn = fn;
  t->arg = arg;
  t->running = false;
  t->stop = false;
  t->wake_ms = CQ_NEVER;
  return cq__cond_init(&t->cond);
}

int cq__timer_ensure(struct cq__timer *t) {
  if (t->running)
    return 0;
  t->wake_ms = CQ_NEVER;
  if (pthread_create(&t->thread, NULL, timer_main, t) != 0)
    return CQ_ESYS;
  t->running = true;
  return 0;
}

void cq__timer_kick(struct cq__timer *t, int64_t deadline_ms) {
  if (t->running && deadline_ms < t->wake_ms) {
    t->wake_ms = deadline_ms;
    (void)pthread_cond_signal(&t->cond);
  }
}

bool cq__timer_is_self(const struct cq__timer *t) {
  return t->running && pthread_equal(pthread_self(), t->thread);
}

void cq__timer_destroy(struct cq__timer *t) {
  cq__mutex_lock(t->mutex);
  bool joining = t->running;
  t->stop = true;
  (void)pthread_cond_signal(&t->cond);
  cq__mutex_unlock(t->mutex);
  if (joining)
    (void)pthread_join(t->thread, NULL);
  t->running = false;
  (void)pthread_cond_destroy(&t->cond);
}

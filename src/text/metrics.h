/*
 * The Prometheus text exposition of a pool (metrics.c): formatting only, of
 * figures taken beforehand, so that it knows nothing but the public types.
 */
#ifndef CRONOQ_TEXT_METRICS_H
#define CRONOQ_TEXT_METRICS_H

#include "cronoq/cronoq.h"
#include "cronoq/cronoq_backend.h"

/* A whole pool's figures, as one scrape shows them. */
struct cq__metrics {
  cq_pool_stats pool;
  cq_resource_stats *res; /* in resource order */
  size_t n_res;
  cq_device_stats *devs; /* every device of every device pool, pool by pool */
  size_t n_devs;
  size_t *dev_res; /* for each device, its pool's index in `res` */
  /* A backend pool's figures of its own (cq_backend_ops.metrics_get). */
  cq_backend_metric own[CQ_BACKEND_METRICS_MAX];
  size_t n_own;
};

/* Write them in the text exposition format (version 0.0.4); 0, or what
 * `write` returned when it stopped. */
int cq__metrics_write(const struct cq__metrics *m, cq_write_fn write,
                      void *arg);

#endif /* CRONOQ_TEXT_METRICS_H */

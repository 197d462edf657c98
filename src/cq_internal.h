/*
 * The core's internal headers, all of them, in the order of the layers
 * (src/README.md draws them). A file of the core includes this, or the
 * module headers it needs; tests that must reach internals include it.
 *
 *   util/      leaves that call nothing back: base, platform, alloc, msg,
 *              hist, rbtree, name, timer; errors and the version
 *   objects    resource.h (a resource, the table), budget.h (the usage
 *              word), request.h, grant.h, place.h (device placement),
 *              validate.h (never fits), outbox.h, event.h
 *   policy     policy.h: the only way into queue.c and backfill.c
 *   API        pool.h and the files that hold the public functions
 */
#ifndef CRONOQ_CQ_INTERNAL_H
#define CRONOQ_CQ_INTERNAL_H

#include "util/alloc.h"
#include "util/base.h"
#include "util/hist.h"
#include "util/msg.h"
#include "util/name.h"
#include "util/platform.h"
#include "util/rbtree.h"
#include "util/timer.h"

#include "budget.h"
#include "event.h"
#include "grant.h"
#include "outbox.h"
#include "place.h"
#include "request.h"
#include "resource.h"
#include "validate.h"

#include "backfill.h"
#include "policy.h"

#include "pool.h"

/* spec.c: the spec parsers with an explicit length, so that fuzzers can
 * feed any bytes, NUL included. */
int cq__pool_add_spec_n(cq_pool *pool, const char *spec, size_t len,
                        const cq_detect_opts *detect, char *err,
                        size_t err_len);
int cq__req_parse_n(cq_req *req, const char *spec, size_t len);

/* detect.c: the parsers, reachable by tests and fuzzers. They append to
 * `out` (whose allocator must be set) and fill out->error on CQ_EPARSE. */
int cq__parse_cuda_visible(const char *text, cq_gpu_list *out);
int cq__parse_nvidia_smi(const char *text, cq_gpu_list *out);

#endif /* CRONOQ_CQ_INTERNAL_H */

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
 *   text/      specs, GPU detection, metrics: on the public API and util
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

#include "text/metrics.h"
#include "text/text.h"

#endif /* CRONOQ_CQ_INTERNAL_H */

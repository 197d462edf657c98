/*
 * Whether a request can ever fit (validate.c): the rule that a request
 * larger than a capacity fails at once instead of waiting, and its
 * messages, which name the resource, the amount and the capacity. The
 * policy asks it when capacities shrink; the API on every acquire; the
 * host's startup validation for whole task sets.
 */
#ifndef CRONOQ_VALIDATE_H
#define CRONOQ_VALIDATE_H

#include "request.h"

/* Check one item against its resource as it is now: 0, or CQ_ENOENT
 * (removed) / CQ_ENEVER with `msg` (CQ__MSG_MAX bytes) filled. Lock held. */
int cq__validate_item(const struct cq__ritem *it, char *msg);
/* The same for every item of `req`. */
int cq__validate(const struct cq__req *req, char *msg);

#endif /* CRONOQ_VALIDATE_H */

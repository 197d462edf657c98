/*
 * The text layer: resource and request specs (spec.c), GPU detection
 * (detect.c) and the metrics exposition (metrics.c). It is written on the
 * public API and the util leaves only, so that it serves every kind of pool
 * (a backend's too) and knows nothing of the core's internals; the build
 * refuses any other include here.
 *
 * What the layer offers beyond the public API, for tests and fuzzers:
 */
#ifndef CRONOQ_TEXT_TEXT_H
#define CRONOQ_TEXT_TEXT_H

#include "cronoq/cronoq.h"

/* The spec parsers with an explicit length, so that fuzzers can feed any
 * bytes, NUL included. */
int cq__pool_add_spec_n(cq_pool *pool, const char *spec, size_t len,
                        const cq_detect_opts *detect, char *err,
                        size_t err_len);
int cq__req_parse_n(cq_req *req, const char *spec, size_t len);

/* The GPU list parsers. They append to `out` (whose allocator must be set)
 * and fill out->error on CQ_EPARSE. */
int cq__parse_cuda_visible(const char *text, cq_gpu_list *out);
int cq__parse_nvidia_smi(const char *text, cq_gpu_list *out);

#endif /* CRONOQ_TEXT_TEXT_H */

/*
 * Checks shared by the two GPU-detection harnesses (fuzz_cuda_visible.c,
 * fuzz_nvidia_smi.c): what a list that a detection parser accepted must be
 * for the rest of the library, and the driver both harnesses run.
 */
#ifndef CRONOQ_FUZZ_GPU_CHECK_H
#define CRONOQ_FUZZ_GPU_CHECK_H

#include "cq_internal.h"
#include "fuzz_util.h"

/* A detection parser: cq__parse_cuda_visible or cq__parse_nvidia_smi. */
typedef int (*gpu_parser)(const char *text, cq_gpu_list *out);

/* Called on a list the parser accepted from `text`, for the checks that
 * belong to one parser. */
typedef void (*gpu_list_check)(const char *text, const cq_gpu_list *list);

/*
 * Run `parse` on the input as a C string (the text comes from getenv() or
 * from a NUL-terminated buffer, so a NUL ends it) and check:
 * - it returns 0, or CQ_EPARSE with an error that starts with `error_prefix`;
 * - on success, every id is one CUDA_VISIBLE_DEVICES can carry (an index, or
 *   a GPU-/MIG- UUID of id characters), no id appears twice (two devices
 *   with one id could not be told apart; both parsers refuse that and a
 *   device pool would too), then `check` runs, and the list goes
 *   through the library as cq_gpu_detect()'s caller would use it: a device
 *   pool accepts the ids, and a grant of all its devices formats them back
 *   as CUDA_VISIBLE_DEVICES, in order;
 * - cq_gpu_list_free() frees every block, after a success or a failure;
 * - failing any one allocation the parse made gives CQ_ENOMEM, and the
 *   partial list is freed just as well.
 */
void gpu_fuzz_one(const uint8_t *data, size_t size, gpu_parser parse,
                  const char *error_prefix, gpu_list_check check);

/* The ids, comma separated, as CUDA_VISIBLE_DEVICES writes them; the
 * caller frees the string. */
char *gpu_join(const cq_gpu_list *list);

#endif /* CRONOQ_FUZZ_GPU_CHECK_H */

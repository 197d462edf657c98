/*
 * Names of resources and ids of devices (name.c): one character class for
 * names, shared by the API's checks and the spec lexer, and the rules for a
 * device id.
 */
#ifndef CRONOQ_UTIL_NAME_H
#define CRONOQ_UTIL_NAME_H

#include "util/base.h"

/* Whether `c` may appear in a resource name: letters, digits and "_-./". */
static inline bool cq__name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '/';
}

/* A resource name: 1 to CQ_NAME_MAX name characters. 0 or CQ_EINVAL. */
int cq__name_check(const char *name);

/* A device id: 1 to CQ_DEVICE_ID_MAX printable ASCII bytes, none of them
 * a comma, a blank or '=', so that a list of ids reads back. 0 or
 * CQ_EINVAL. */
int cq__device_id_check(const char *id);

#endif /* CRONOQ_UTIL_NAME_H */

/*
 * Error codes and the version: cq_strerror() and cq_err_name() are
 * generated from the one table in the public header, CQ_ERRNO_MAP; and
 * what an internal invariant that broke says before the process aborts.
 */
#include "util/base.h"

#include <stdio.h>

const char *cq_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
#define CQ_STRERROR_CASE_(name, value, msg)                                    \
  case CQ_##name:                                                              \
    return msg;
    CQ_ERRNO_MAP(CQ_STRERROR_CASE_)
#undef CQ_STRERROR_CASE_
  default:
    return "unknown error";
  }
}

const char *cq_err_name(int err) {
  switch (err) {
  case 0:
    return "OK";
#define CQ_ERR_NAME_CASE_(name, value, msg)                                    \
  case CQ_##name:                                                              \
    return #name;
    CQ_ERRNO_MAP(CQ_ERR_NAME_CASE_)
#undef CQ_ERR_NAME_CASE_
  default:
    return "UNKNOWN";
  }
}

const char *cq_version_string(void) {
#define CQ_STR2_(x) #x
#define CQ_STR_(x) CQ_STR2_(x)
  return CQ_STR_(CQ_VERSION_MAJOR) "." CQ_STR_(CQ_VERSION_MINOR) "." CQ_STR_(
      CQ_VERSION_PATCH);
#undef CQ_STR_
#undef CQ_STR2_
}

int cq_version_number(void) { return CQ_VERSION_NUMBER; }

const char *cq_event_type_name(int type) {
  switch (type) {
#define CQ_EVENT_NAME_CASE_(name, value, text, help)                           \
  case CQ_EVENT_##name:                                                        \
    return text;
    CQ_EVENT_MAP(CQ_EVENT_NAME_CASE_)
#undef CQ_EVENT_NAME_CASE_
  default:
    return "unknown";
  }
}

void cq__panic(const char *file, int line, const char *what) {
  fprintf(stderr, "libcronoq: internal invariant broken at %s:%d: %s\n", file,
          line, what);
  abort();
}

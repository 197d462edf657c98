/* Names and device ids (name.h). */
#include "util/name.h"

#include <string.h>

int cq__name_check(const char *name) {
  if (name == NULL)
    return CQ_EINVAL;
  size_t len = 0;
  for (const char *c = name; *c != '\0'; c++, len++)
    if (!cq__name_char(*c) || len >= CQ_NAME_MAX)
      return CQ_EINVAL;
  return len == 0 ? CQ_EINVAL : 0;
}

int cq__device_id_check(const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > CQ_DEVICE_ID_MAX)
    return CQ_EINVAL;
  for (const char *c = id; *c; c++)
    if (*c == ',' || *c == ' ' || *c == '\t' || *c == '\n' || *c == '=' ||
        (unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
      return CQ_EINVAL;
  return 0;
}

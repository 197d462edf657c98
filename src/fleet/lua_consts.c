/*
 * Writes the fleet library's constants as Lua (lua/consts.lua in the build
 * tree), from the headers that define them, so that each is stated once:
 * cronoq.h's error codes (CQ_ERRNO_MAP), kinds of resource and the lone
 * flag, the device unit; fleet.h's reply statuses and schema version; the
 * layout of util/hist.h's waiting-time histogram. The build joins the
 * file into the library right after lua/lib/base.lua
 * (src/fleet/CMakeLists.txt), and test_fleet_basic reads the values back
 * from a server.
 *
 *   lua_consts OUT.lua
 */
#include "fleet.h"
#include "util/hist.h"

#include <stdio.h>

struct named {
  const char *name;
  long long value;
  const char *what;
};

static void put_all(FILE *out, const struct named *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(out, "local %s = %lld -- %s\n", v[i].name, v[i].value, v[i].what);
}

#define LUA_ERRNO_(name, value, msg) {#name, (value), msg},
static const struct named errors[] = {CQ_ERRNO_MAP(LUA_ERRNO_)};
#undef LUA_ERRNO_

static const struct named statuses[] = {
    {"OK", FL_R_OK, "done"},
    {"WAITING", FL_R_WAITING, "queued: the outcome comes later"},
    {"OWED", FL_R_OWED, "the namespace owes work: call again"},
    {"NOSESSION", FL_R_NOSESSION, "the session expired, or was never there"},
    {"NONS", FL_R_NONS, "the namespace is gone, or has another schema"},
    {"UNKNOWN", FL_R_UNKNOWN, "no such lease or waiter"},
    {"QUARANTINE", FL_R_QUARANTINE, "the namespace grants nothing yet"},
};

static const struct named kinds[] = {
    {"BUDGET", CQ_KIND_BUDGET, "CQ_KIND_BUDGET"},
    {"DEVICES", CQ_KIND_DEVICES, "CQ_KIND_DEVICES"},
    {"CLASS", CQ_KIND_CLASS, "CQ_KIND_CLASS"},
    {"LONE", CQ_BUDGET_LONE, "CQ_BUDGET_LONE: a budget's lone flag"},
    {"MILLI", CQ_DEVICE_MILLI, "CQ_DEVICE_MILLI: thousandths in a device"},
};

static const struct named hist[] = {
    {"HIST_SUB_BITS", CQ__HIST_SUB_BITS, "util/hist.h"},
    {"HIST_SUB", CQ__HIST_SUB, "exact below; buckets per power of two"},
    {"HIST_TOP_EXP", CQ__HIST_TOP_EXP, "from 2^(this + 1) on: the last"},
    {"HIST_BUCKETS", CQ__HIST_BUCKETS, "buckets in all"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.lua\n", argv[0]);
    return 2;
  }
  FILE *out = fopen(argv[1], "w");
  if (out == NULL) {
    perror(argv[1]);
    return 1;
  }
  fputs("\n-- "
        "------------------------------------------------------------------"
        "--------\n"
        "-- Constants, written by src/fleet/lua_consts.c from the C headers "
        "that\n"
        "-- define them: change them there.\n"
        "-- "
        "------------------------------------------------------------------"
        "--------\n\n",
        out);
  fputs("-- Error codes (cronoq.h), as the scripts reply them.\n", out);
  put_all(out, errors, COUNT(errors));
  fputs("\n-- Reply statuses besides the error codes (fleet.h).\n", out);
  put_all(out, statuses, COUNT(statuses));
  fputs("\n-- The namespace's layout version (fleet.h FL_SCHEMA).\n", out);
  fprintf(out, "local SCHEMA = '%s'\n", FL_SCHEMA);
  fputs("\n-- Kinds of resource and flags, as records keep them (cronoq.h).\n",
        out);
  put_all(out, kinds, COUNT(kinds));
  fputs("\n-- The waiting-time histogram's layout (util/hist.h).\n", out);
  put_all(out, hist, COUNT(hist));
  fputs("\n", out);
  if (fclose(out) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}

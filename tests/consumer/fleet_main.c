/* Links an installed libcronoq's fleet pools and asks one of a server that
 * is not there: it must fail closed, saying why. */
#include <cronoq/cronoq_fleet.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  cq_fleet_opts opts = CQ_FLEET_OPTS_INIT;
  opts.timeout_ms = 200;
  cq_pool *pool = NULL;
  int rc = cq_fleet_open(&pool, "unix:///nonexistent/cronoq-consumer.sock",
                         "consumer", &opts);
  if (rc != CQ_EUNAVAILABLE || pool != NULL ||
      strstr(cq_fleet_error(), "cronoq-consumer.sock") == NULL)
    return 1;
  printf("fleet consumer ok, libcronoq %s: %s\n", cq_version_string(),
         cq_fleet_error());
  return 0;
}

/*
 * cronoq: the operator's command for fleet pools.
 *
 *   cronoq load URL [--replace]       load the library of functions
 *   cronoq acl NAMESPACE [USER [PW]]  the ACL an application's user needs
 *   cronoq version
 *
 * Exit codes: 0 done; 1 the server refused, or holds something that must
 * be fixed first (the message says what); 2 a usage error; 3 the server
 * could not be reached. Messages never show a password.
 */
#include <cronoq/cronoq.h>
#include <cronoq/cronoq_fleet.h>

#include <stdio.h>
#include <string.h>

enum { EXIT_DONE = 0, EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_UNREACHED = 3 };

static const char usage[] =
    "usage: cronoq load URL [--replace]\n"
    "       cronoq acl NAMESPACE [USER [PASSWORD]]\n"
    "       cronoq version\n"
    "\n"
    "  load     load this library's functions on the Redis server at URL\n"
    "           (redis://[user:password@]host[:port][/db] or\n"
    "           unix://[user:password@]/path/to/redis.sock[?db=N]), as an\n"
    "           operator's user, once per server; --replace loads over a\n"
    "           library of the same name whose code is not this library's\n"
    "  acl      print the ACL rules a Redis user of NAMESPACE needs (with\n"
    "           USER, as an ACL SETUSER command)\n"
    "  version  print the version and the library's name on a server\n"
    "\n"
    "exit codes: 0 done, 1 refused (the message says why), 2 usage,\n"
    "3 the server could not be reached\n";

static int usage_error(const char *what) {
  fprintf(stderr, "cronoq: %s\n\n%s", what, usage);
  return EXIT_USAGE;
}

static int load(int argc, char **argv) {
  const char *url = NULL;
  unsigned flags = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--replace") == 0)
      flags |= CQ_FLEET_LOAD_REPLACE;
    else if (argv[i][0] == '-')
      return usage_error("load: unknown option");
    else if (url == NULL)
      url = argv[i];
    else
      return usage_error("load: one URL");
  }
  if (url == NULL)
    return usage_error("load: which server? (a URL)");
  int rc = cq_fleet_load(url, NULL, flags);
  if (rc == 0) {
    printf("%s\n", cq_fleet_error());
    return EXIT_DONE;
  }
  fprintf(stderr, "cronoq: load: %s: %s\n", cq_err_name(rc), cq_fleet_error());
  if (rc == CQ_EUNAVAILABLE)
    return EXIT_UNREACHED;
  return rc == CQ_EINVAL && strncmp(cq_fleet_error(), "URL", 3) == 0
             ? EXIT_USAGE
             : EXIT_REFUSED;
}

static int acl(int argc, char **argv) {
  if (argc < 1 || argc > 3)
    return usage_error("acl: NAMESPACE [USER [PASSWORD]]");
  char rules[1024];
  if (cq_fleet_acl(argv[0], rules, sizeof(rules)) != 0)
    return usage_error("acl: a namespace is 1 to 64 letters, digits and "
                       "\"_-.\"");
  if (argc == 1)
    printf("%s\n", rules);
  else
    printf("ACL SETUSER %s on >%s %s\n", argv[1],
           argc == 3 ? argv[2] : "PASSWORD", rules);
  return EXIT_DONE;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage_error("which command?");
  const char *cmd = argv[1];
  if (strcmp(cmd, "load") == 0)
    return load(argc - 2, argv + 2);
  if (strcmp(cmd, "acl") == 0)
    return acl(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0) {
    printf("cronoq %s (functions %s)\n", cq_version_string(),
           cq_fleet_library());
    return EXIT_DONE;
  }
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return EXIT_DONE;
  }
  return usage_error("unknown command");
}

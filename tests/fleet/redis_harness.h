/*
 * The fleet tests' Redis server: each test process starts its own
 * redis-server on a Unix socket in a temporary directory (never a TCP
 * port, so never 6379), waits for it to answer PING, and stops it by its
 * PID at exit, also when a test fails. The server dies with the test
 * process too (PR_SET_PDEATHSIG), so that a crash leaves nothing behind.
 * Where redis-server is not installed the test is skipped (exit 77) with a
 * message saying so, or fails when CRONOQ_REQUIRE_REDIS is set (CI sets it
 * in its fleet step, so that a skip cannot hide there).
 */
#ifndef CRONOQ_TEST_REDIS_HARNESS_H
#define CRONOQ_TEST_REDIS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#define CQR_SKIP 77

struct cqr_server {
  pid_t pid;
  char dir[256];
  char sock[300];
  char url[320]; /* unix://<dir>/redis.sock */
};

/* Whether redis-server is on PATH. */
int cqr_available(void);

/* Start a server with the standard options and `extra` (NULL-terminated,
 * may be NULL), e.g. {"--maxmemory-policy", "noeviction", NULL}. Exits 77
 * when redis-server is absent, 1 when it does not come up. */
void cqr_start(struct cqr_server *s, const char *const *extra);

/* Start the server again in s->dir, on the same socket (what it wrote
 * there, an AOF, is kept); extra as for cqr_start(). */
void cqr_launch(struct cqr_server *s, const char *const *extra);

/* Send `sig` to the server: SIGSTOP and SIGCONT only that; any other
 * signal waits for it to exit (bounded) and keeps its directory, for
 * cqr_launch(). */
void cqr_kill(struct cqr_server *s, int sig);

/* cqr_kill(SIGKILL), then cqr_launch(): a crash and a restart. */
void cqr_restart(struct cqr_server *s, const char *const *extra);

/* Stop it (SIGTERM, then SIGKILL after a bounded wait) and remove its
 * directory. Idempotent; also runs at exit for every server started. */
void cqr_stop(struct cqr_server *s);

/* Run one command on the server and return its integer reply (or -1);
 * for checks from tests, e.g. cqr_int(s, "ZCARD", "cq:{t}:Q", NULL). */
long long cqr_int(const struct cqr_server *s, ...);

/* The same for a reply that is a string: copied into buf, "" if none. */
void cqr_str(const struct cqr_server *s, char *buf, size_t len, ...);

/* Run commands as one transaction (MULTI ... EXEC) on one connection, so
 * that no other client runs between them: `cmds` lists NULL-terminated
 * argument lists and ends with NULL. Returns how many of them succeeded,
 * or -1 when the transaction could not run. */
int cqr_atomically(const struct cqr_server *s, const char *const *const *cmds);

#endif

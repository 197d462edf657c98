/*
 * The two-host example of docs/FLEET-POOLS.md, as two processes on one machine:
 * two cronoq-run instances, "hostA" and "hostB" (CRONOQ_HOST), started at once
 * with the same --resources, share a licence of 2 through one namespace,
 * each with its own host's gpu. Every job writes when it starts and ends;
 * at no moment do more than 2 jobs run, across both runners, every job
 * runs and succeeds, and each job sees its own host's device in
 * CUDA_VISIBLE_DEVICES. A third runner, whose --resources declares the
 * licence as another kind of resource (a class), stops at start with what
 * the namespace has in its message (another capacity is accepted: the
 * namespace keeps its live one). The first runners pass --new-namespace (no
 * process used "demo" before on this test's own server), so that the first
 * grant comes at once instead of after a new namespace's quarantine.
 *
 * Then -j on a fleet pool: each runner's own, as in GNU parallel, not a
 * budget of the namespace; and a runner says at start which limits apply.
 *
 * Usage: test_fleet_runner PATH-TO-CRONOQ-RUN
 */
#include "cronoq/cronoq.h"
#include "cronoq/cronoq_fleet.h"
#include "redis_harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOBS_PER_HOST 6
#define LICENCES 2

static struct cqr_server srv;
static char dir[256], log_path[300];

static void die(const char *what) {
  printf("FAIL: %s\n", what);
  fflush(stdout);
  exit(1);
}

/* The job file of one host: each job logs "S <host> <ns> <devices>" and
 * "E <host> <ns>" around a short sleep. */
static void write_jobs(const char *path, const char *host) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    die("cannot write a job file");
  for (int i = 0; i < JOBS_PER_HOST; i++)
    fprintf(f,
            "licence=1,gpu=0.5 -- sh -c 'echo S %s $(date +%%s%%N) "
            "$CUDA_VISIBLE_DEVICES >> %s; sleep 0.15; echo E %s "
            "$(date +%%s%%N) >> %s'\n",
            host, log_path, host, log_path);
  fclose(f);
}

/* Start one runner as `host`, its stderr into `err` (NULL: this one's);
 * returns its PID. */
static pid_t runner(const char *exe, const char *host, const char *resources,
                    const char *jobs, const char *err) {
  pid_t pid = fork();
  if (pid < 0)
    die("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (err != NULL && freopen(err, "w", stderr) == NULL)
      _exit(126);
    setenv("CRONOQ_HOST", host, 1);
    setenv("CRONOQ_NUM_GPUS", "1", 1);
    execl(exe, exe, "--pool", srv.url, "--namespace", "demo", "--new-namespace",
          "--resources", resources, "--summary", "none", "--no-progress", jobs,
          (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  return pid;
}

/* The runner's exit status, or -1 when it did not exit. */
static int wait_exit(pid_t pid) {
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
    return -1;
  return WEXITSTATUS(st);
}

static int wait_ok(pid_t pid) { return wait_exit(pid) == 0; }

/* Start cronoq-run with `args` (NULL-terminated, after the program's
 * name), its stdout and stderr into `out`; returns its PID. */
static pid_t start_into(const char *exe, const char *const *args,
                        const char *out) {
  fflush(stdout); /* the child's freopen() would write what is buffered */
  pid_t pid = fork();
  if (pid < 0)
    die("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (freopen(out, "w", stdout) == NULL || dup2(1, 2) < 0)
      _exit(126);
    char *argv[20] = {(char *)exe};
    for (int i = 0; args[i] != NULL && i < 18; i++)
      argv[i + 1] = (char *)args[i];
    execv(exe, argv);
    _exit(127);
  }
  return pid;
}

/* The same, waiting for it: its exit status, or -1. */
static int run_into(const char *exe, const char *const *args, const char *out) {
  return wait_exit(start_into(exe, args, out));
}

/* Whether file `path` holds `text`; the file is left in file_text. */
static char file_text[8192];
static int file_has(const char *path, const char *text) {
  char *buf = file_text;
  FILE *f = fopen(path, "r");
  if (f == NULL)
    die("cannot read a runner's output");
  size_t n = fread(buf, 1, sizeof(file_text) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

/*
 * A password in --pool never appears in what the runner writes, whatever
 * goes wrong: the server refuses it, the socket is not there, the URL is
 * refused (a password holding '/' too), an option is misspelt. The user
 * name and the path are still named, so that the message says which pool.
 */
static void test_the_runner_never_shows_a_password(const char *exe,
                                                   const char *jobs) {
  char ok[16];
  cqr_str(&srv, ok, sizeof(ok), "ACL", "SETUSER", "cronoq", "on", ">rightpw",
          "~*", "&*", "+@all", NULL);
  if (strcmp(ok, "OK") != 0)
    die("ACL SETUSER cronoq");
  char wrong[400], nobody[400], pool_eq[420], out[300];
  snprintf(wrong, sizeof(wrong), "unix://cronoq:WRONGPW@%s", srv.sock);
  snprintf(nobody, sizeof(nobody), "unix://cronoq:WRONGPW@%s/nobody.sock", dir);
  snprintf(pool_eq, sizeof(pool_eq), "--pol=%s", wrong);
  snprintf(out, sizeof(out), "%s/runner-pw.out", dir);
  const struct {
    const char *url, *names;
    int misspelt;
  } cases[] = {
      {wrong, srv.sock, 0},
      {nobody, "nobody.sock", 0},
      {"unix://cronoq:WRONGPW@relative.sock", "relative.sock", 0},
      {"redis://cronoq:WRO/NGPW@127.0.0.1:1", "127.0.0.1:1", 0},
      {pool_eq, NULL, 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *args[] = {"--pool",        cases[i].url, "--namespace",
                          "demo",          "--summary",  "none",
                          "--no-progress", jobs,         NULL};
    const char *misspelt[] = {cases[i].url, jobs, NULL};
    if (run_into(exe, cases[i].misspelt ? misspelt : args, out) != 2)
      die("a runner given a bad --pool did not stop with exit 2");
    if (file_has(out, "NGPW")) {
      printf("%s", file_text);
      die("the runner showed the password");
    }
    if (cases[i].names != NULL &&
        (!file_has(out, "cronoq:***@") || !file_has(out, cases[i].names))) {
      printf("%s", file_text);
      die("the runner's message does not name the user and the path");
    }
  }
  printf("ok: no password in the runner's messages\n");
}

/*
 * -j is each runner's own on a fleet pool: two runners of one namespace,
 * with -j 2 and -j 4, run 2 and 4 of their jobs at once, never more. Each
 * job marks its start and end in a log and waits, at a barrier, until as
 * many jobs of its runner have started as its -j allows (giving up after
 * 20 s), so that each peak must be reached, whatever the timing; A starts
 * first, and its jobs also wait for one of B's, so that the two run at
 * once. Before, -j declared a budget `jobs` in the namespace, which the
 * first runner sized: B's -j 4 was capped at A's 2, its jobs queued behind
 * A's, and A's gave up at the barrier. Each runner says at start, in one
 * line on stderr, that its -j is its own and what the namespace shares.
 */
static void test_j_is_each_runners_own_on_a_fleet_pool(const char *exe) {
  static const struct {
    const char *tag, *j, *also; /* also: a barrier on the other runner */
    int limit, jobs;
  } rs[] = {{"A", "2", " || [ $(grep -c '^S B' LOG) -lt 1 ]", 2, 4},
            {"B", "4", "", 4, 8}};
  char log[300], jobs[2][300], err[2][300];
  snprintf(log, sizeof(log), "%s/j.log", dir);
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    snprintf(jobs[i], sizeof(jobs[i]), "%s/j-jobs-%s", dir, rs[i].tag);
    snprintf(err[i], sizeof(err[i]), "%s/j-%s.err", dir, rs[i].tag);
    FILE *f = fopen(jobs[i], "w");
    if (f == NULL)
      die("cannot write a job file");
    for (int k = 0; k < rs[i].jobs; k++)
      fprintf(f,
              "LOG=%s; echo S %s >> $LOG; i=0; while [ $(grep -c '^S %s' "
              "$LOG) -lt %d ]%s; do i=$((i + 1)); [ $i -gt 400 ] && exit 99; "
              "sleep 0.05; done; echo E %s >> $LOG\n",
              log, rs[i].tag, rs[i].tag, rs[i].limit, rs[i].also, rs[i].tag);
    fclose(f);
  }
  for (int i = 0; i < 2; i++) {
    pids[i] = fork();
    if (pids[i] < 0)
      die("fork");
    if (pids[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (freopen(err[i], "w", stderr) == NULL)
        _exit(126);
      /* "demo" exists by now: no --new-namespace, and no quarantine. */
      execl(exe, exe, "--pool", srv.url, "--namespace", "demo", "-j", rs[i].j,
            "--summary", "none", "--no-progress", jobs[i], (char *)NULL);
      _exit(127);
    }
    /* B once A runs, so that A declared first what it declares. */
    for (int tries = 0; i == 0 && tries < 600; tries++) {
      FILE *l = fopen(log, "r");
      char first[8] = "";
      if (l != NULL) {
        if (fgets(first, sizeof(first), l) == NULL)
          first[0] = '\0';
        fclose(l);
      }
      if (first[0] == 'S')
        break;
      usleep(50000);
    }
  }
  int status[2];
  for (int i = 0; i < 2; i++)
    status[i] = wait_exit(pids[i]);
  for (int i = 0; i < 2; i++) {
    char want[200];
    snprintf(want, sizeof(want),
             "cronoq-run: limits: -j %s, this runner's own; shared in "
             "namespace \"demo\": licence=2",
             rs[i].j);
    if (!file_has(err[i], want)) {
      printf("runner %s said: %s", rs[i].tag, file_text);
      die("a runner does not say that its -j is its own");
    }
  }
  FILE *f = fopen(log, "r");
  if (f == NULL)
    die("no log of the -j jobs");
  int running[2] = {0, 0}, peak[2] = {0, 0}, started[2] = {0, 0};
  char line[64];
  while (fgets(line, sizeof(line), f) != NULL) {
    int i = line[2] == 'B';
    running[i] += line[0] == 'S' ? 1 : -1;
    started[i] += line[0] == 'S';
    if (running[i] > peak[i])
      peak[i] = running[i];
  }
  fclose(f);
  for (int i = 0; i < 2; i++) {
    printf("runner %s, -j %s: exit %d, %d of %d jobs started, at most %d at "
           "once\n",
           rs[i].tag, rs[i].j, status[i], started[i], rs[i].jobs, peak[i]);
    if (status[i] != 0 || started[i] != rs[i].jobs || peak[i] != rs[i].limit)
      die("a runner's -j is not its own");
  }
  printf("ok: -j is each runner's own on a fleet pool\n");
}

/* --new-namespace reaches the server: the namespace a runner creates with
 * it is not quarantined (the last field of its head is the quarantine's
 * end, 0 for none). */
static void
test_new_namespace_creates_it_without_a_quarantine(const char *exe) {
  char out[300], head[128];
  snprintf(out, sizeof(out), "%s/runner-new.out", dir);
  const char *args[] = {"--pool", srv.url,           "--namespace",
                        "fresh",  "--new-namespace", "--summary",
                        "none",   "/dev/null",       NULL};
  if (run_into(exe, args, out) != 0)
    die("a runner with --new-namespace failed");
  cqr_str(&srv, head, sizeof(head), "HGET", "cq:{fresh}:meta", "head", NULL);
  const char *last = strrchr(head, ' ');
  if (last == NULL || strcmp(last, " 0") != 0) {
    printf("head: %s\n", head);
    die("a namespace made with --new-namespace is quarantined");
  }
  printf("ok: --new-namespace: no quarantine\n");
}

/*
 * A resource another process declares while a runner runs does not hide
 * one of the runner's own from what it writes. The runner sized its
 * snapshot of the namespace at start (1 resource: the licence); a device
 * pool declared later comes first in the namespace's order, and a snapshot
 * with room for one then held the device pool alone: the second job's
 * joblog line named no licence, and the start message once said "nothing
 * shared" when another runner's device pool had come in meanwhile. The
 * first job waits (at most 20 s) until the test has declared the device
 * pool.
 */
static void
test_a_resource_declared_later_does_not_hide_the_runners_own(const char *exe) {
  char jobs[300], joblog[300], mark[300], out[300];
  snprintf(jobs, sizeof(jobs), "%s/late-jobs", dir);
  snprintf(joblog, sizeof(joblog), "%s/late.joblog", dir);
  snprintf(mark, sizeof(mark), "%s/late.mark", dir);
  snprintf(out, sizeof(out), "%s/late.out", dir);
  FILE *f = fopen(jobs, "w");
  if (f == NULL)
    die("cannot write a job file");
  fprintf(f,
          "licence=1 -- sh -c 'i=0; while [ ! -e %s ]; do i=$((i + 1)); "
          "[ $i -gt 400 ] && exit 99; sleep 0.05; done'\n"
          "licence=1 -- true\n",
          mark);
  fclose(f);
  const char *args[] = {"--pool",
                        srv.url,
                        "--namespace",
                        "late",
                        "--new-namespace",
                        "--resources",
                        "licence=1",
                        "-j",
                        "1",
                        "--joblog",
                        joblog,
                        "--summary",
                        "none",
                        "--no-progress",
                        jobs,
                        NULL};
  pid_t pid = start_into(exe, args, out);
  /* Once the runner holds the licence, another process declares a device
   * pool in its namespace. */
  cq_pool *p = NULL;
  for (int tries = 0; tries < 400; tries++) {
    char head[128] = "";
    cqr_str(&srv, head, sizeof(head), "HGET", "cq:{late}:meta", "head", NULL);
    if (head[0] == '\0') { /* the runner has not made the namespace yet */
      usleep(50000);
      continue;
    }
    cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
    o.host = "later";
    cq_resource_stats st;
    if (p == NULL && cq_fleet_open(&p, srv.url, "late", &o) != 0)
      p = NULL;
    if (p != NULL && cq_resource_stats_get(p, "licence", &st) == 0 &&
        st.in_use == 1)
      break;
    usleep(50000);
  }
  if (p == NULL || cq_devices_add(p, "gpu", 1, NULL) != 0)
    die("cannot declare a device pool beside the runner");
  cq_pool_destroy(p);
  FILE *m = fopen(mark, "w");
  if (m == NULL)
    die("cannot write the mark");
  fclose(m);
  if (wait_exit(pid) != 0) {
    file_has(out, "");
    printf("runner said: %s", file_text);
    die("the runner with a late device pool beside it failed");
  }
  /* Both joblog lines end with the grant: licence=1. */
  f = fopen(joblog, "r");
  if (f == NULL)
    die("no joblog");
  char line[512];
  int named = 0, lines = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "Seq", 3) == 0)
      continue;
    lines++;
    named += strstr(line, "\tlicence=1\n") != NULL;
    if (strstr(line, "\tlicence=1\n") == NULL)
      printf("joblog line without its licence: %s", line);
  }
  fclose(f);
  if (lines != 2 || named != 2)
    die("a resource declared later hid the runner's own from its joblog");
  printf("ok: a device pool declared later hides none of the runner's own\n");
}

struct ev {
  long long t;
  int start;
};

static int by_time(const void *a, const void *b) {
  const struct ev *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->start - y->start; /* an end before a start at the same time */
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CRONOQ-RUN\n", argv[0]);
    return 2;
  }
  cqr_start(&srv, NULL);
  snprintf(dir, sizeof(dir), "%s", srv.dir);
  snprintf(log_path, sizeof(log_path), "%s/jobs.log", dir);
  char jobs_a[300], jobs_b[300];
  snprintf(jobs_a, sizeof(jobs_a), "%s/jobs-a", dir);
  snprintf(jobs_b, sizeof(jobs_b), "%s/jobs-b", dir);
  write_jobs(jobs_a, "hostA");
  write_jobs(jobs_b, "hostB");

  /* Both runners start at once with the same resources: each declares the
   * shared licence (whichever comes second finds it and is accepted) and
   * its own host's gpu. */
  char err_a[300], err_b[300];
  snprintf(err_a, sizeof(err_a), "%s/runner-a.err", dir);
  snprintf(err_b, sizeof(err_b), "%s/runner-b.err", dir);
  pid_t a = runner(argv[1], "hostA", "licence=2,gpu=1", jobs_a, err_a);
  pid_t b = runner(argv[1], "hostB", "licence=2,gpu=1", jobs_b, err_b);
  int ok_a = wait_ok(a), ok_b = wait_ok(b);
  if (!ok_a || !ok_b)
    die("a runner failed");
  /* Each says what the namespace shares, and that the gpu is its host's. */
  if (!file_has(err_a, "shared in namespace \"demo\": licence=2") ||
      !file_has(err_a, "gpu@hostA=1")) {
    printf("runner A said: %s", file_text);
    die("a runner does not say which limits are shared");
  }

  /* A third runner that declares the licence as a class stops at start
   * (exit 2), saying what the namespace has; it runs nothing. */
  char err_c[300], msg[512] = "";
  snprintf(err_c, sizeof(err_c), "%s/runner-c.err", dir);
  if (wait_exit(runner(argv[1], "hostC", "licence:class=2,gpu=1", jobs_a,
                       err_c)) != 2)
    die("a runner with a conflicting licence did not stop with exit 2");
  FILE *e = fopen(err_c, "r");
  if (e == NULL || fgets(msg, sizeof(msg), e) == NULL)
    die("the conflicting runner said nothing");
  fclose(e);
  if (strstr(msg, "\"licence\" is a budget in namespace \"demo\", not a "
                  "class") == NULL) {
    printf("message: %s", msg);
    die("the conflicting runner's message does not name both kinds");
  }

  test_the_runner_never_shows_a_password(argv[1], jobs_a);
  test_j_is_each_runners_own_on_a_fleet_pool(argv[1]);
  test_new_namespace_creates_it_without_a_quarantine(argv[1]);
  test_a_resource_declared_later_does_not_hide_the_runners_own(argv[1]);

  FILE *f = fopen(log_path, "r");
  if (f == NULL)
    die("no job log");
  struct ev evs[4 * JOBS_PER_HOST];
  int n = 0, starts[2] = {0, 0};
  char line[256];
  while (fgets(line, sizeof(line), f) != NULL && n < 4 * JOBS_PER_HOST) {
    char kind, host[16], dev[64] = "";
    long long t;
    if (sscanf(line, "%c %15s %lld %63s", &kind, host, &t, dev) < 3)
      die("a job log line cannot be read");
    evs[n].t = t;
    evs[n].start = kind == 'S';
    n++;
    if (kind == 'S') {
      starts[strcmp(host, "hostB") == 0]++;
      if (strcmp(dev, "0") != 0) /* each host's one device */
        die("a job's CUDA_VISIBLE_DEVICES is not its host's device");
    }
  }
  fclose(f);
  if (n != 4 * JOBS_PER_HOST || starts[0] != JOBS_PER_HOST ||
      starts[1] != JOBS_PER_HOST)
    die("not every job ran once");
  qsort(evs, (size_t)n, sizeof(evs[0]), by_time);
  int running = 0, peak = 0;
  for (int i = 0; i < n; i++) {
    running += evs[i].start ? 1 : -1;
    if (running > peak)
      peak = running;
  }
  if (peak > LICENCES)
    die("more jobs ran at once than there are licences");

  /* The namespace: every licence back, and never more than 2 out. */
  cq_pool *p;
  cq_fleet_opts o = CQ_FLEET_OPTS_INIT;
  o.fleet_flags = CQ_FLEET_NEW_NAMESPACE; /* tests: a server of their own */
  o.host = "check";
  if (cq_fleet_open(&p, srv.url, "demo", &o) != 0)
    die(cq_fleet_error());
  cq_resource_stats st;
  if (cq_resource_stats_get(p, "licence", &st) != 0 || st.in_use != 0 ||
      st.peak > LICENCES || st.grants != 2 * JOBS_PER_HOST)
    die("the licence's figures are wrong");
  cq_pool_destroy(p);
  printf("ok: %d jobs on two hosts, at most %d at once (licence %d)\n",
         2 * JOBS_PER_HOST, peak, LICENCES);
  cqr_stop(&srv);
  return 0;
}

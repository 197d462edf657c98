/*
 * The run: every job's request is submitted through the libuv adapter at
 * once, in file order, and the pool's queue decides who starts when
 * (FIFO with reservation: a job waiting at the head holds back only what
 * it needs, so a GPU job waiting for a device does not hold back jobs that
 * need no device). The runner never decides an order itself.
 *
 * A job's life on the loop:
 * - granted (on_granted): its child starts with the grant in its
 *   environment; a child that cannot start gives its grant back at once;
 * - the child exits (on_child_exit), whatever the status or signal, and
 *   once its whole process group is gone (job_ended) its grant is
 *   released, which may grant waiting jobs and start them from within
 *   that call;
 * - a timeout or an interrupt stops the group with SIGTERM, then SIGKILL
 *   after a grace period (on_kill_timer); the release still waits for the
 *   group, so the units are never returned while any of it runs.
 *
 * Each child leads its own process group (UV_PROCESS_DETACHED) and is
 * signalled as a group: a shell command's own children stop with it, and
 * none lingers after a timeout or an interrupt (see "Children and their
 * process groups" below).
 *
 * An interrupt (SIGINT, SIGTERM, SIGHUP) closes the adapter: waiting acquires fail
 * with CQ_ECLOSED and those jobs are "not started". The run is over when
 * nothing waits or runs; then the runner closes every handle it owns, so
 * uv_run() returns and uv_loop_close() succeeds.
 */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

static void finish_if_done(struct runner *r);

static void close_adapter(struct runner *r) {
  if (r->adapter_closing)
    return;
  /* Set first: cq_uv_close() runs the waiters' callbacks from within. */
  r->adapter_closing = true;
  int rc = cq_uv_close(r->adapter, NULL);
  if (rc != 0)
    fprintf(stderr, "cronoq-run: closing the adapter: %s\n", cq_strerror(rc));
}

static void release_job(struct job *job) {
  /* Also after an interrupt closed the adapter: a grant outlives it. */
  int rc = cq_uv_release(&job->ureq);
  if (rc != 0)
    fprintf(stderr, "cronoq-run: line %zu: release: %s\n", job->line,
            cq_strerror(rc));
}

/* A job that ends without running: count it and keep why (NULL: the
 * summary says enough). */
static void job_not_run(struct job *job, enum job_state state,
                        const char *why) {
  struct runner *r = job->runner;
  job->state = state;
  job->ended_ns = uv_hrtime();
  if (why != NULL) {
    job->error = strdup(why); /* NULL on failure: the message is printed */
    fprintf(stderr, "cronoq-run: line %zu: %s: %s\n", job->line,
            state == JOB_NEVER_FITS     ? "never fits"
            : state == JOB_SPAWN_FAILED ? "cannot start"
                                        : "not started",
            why);
  }
  r->finished++;
  r->failed++;
}

/* ------------------------------------------------------------------------ */
/* The grant, as the child's environment                                     */
/* ------------------------------------------------------------------------ */

/* "CUDA_VISIBLE_DEVICES=<ids>": the devices the job holds on the GPU pool
 * alone (another device pool's ids are not GPUs), or the empty value, so
 * that a job without a GPU sees none rather than all of them. */
static char *visible_entry(const struct job *job) {
  const char *gpu_pool = job->runner->gpu_pool;
  const cq_grant *grant = &job->ureq.grant;
  struct strbuf sb = {0};
  sb_puts(&sb, "CUDA_VISIBLE_DEVICES=");
  size_t n = gpu_pool != NULL ? cq_grant_devices(grant, gpu_pool, NULL, 0) : 0;
  if (n > 0) {
    size_t len = n * (CQ_DEVICE_ID_MAX + 1) + 1; /* ids and commas */
    char *ids = malloc(len);
    if (ids == NULL) {
      free(sb_take(&sb));
      return NULL;
    }
    if (cq_grant_cuda_visible(grant, gpu_pool, ids, len) == 0)
      sb_puts(&sb, ids);
    free(ids);
  }
  return sb_take(&sb);
}

/* "@id+id": the ids of the devices held on pool `name`. */
static void put_device_ids(struct strbuf *sb, struct runner *r,
                           const cq_grant *grant, const char *name,
                           size_t count) {
  uint32_t *idx = malloc(count * sizeof(*idx));
  if (idx == NULL) {
    sb->failed = true;
    return;
  }
  count = cq_grant_devices(grant, name, idx, count);
  for (size_t i = 0; i < count; i++) {
    cq_device_stats ds;
    if (cq_device_stats_get(r->pool, name, idx[i], &ds) == 0)
      sb_printf(sb, "%c%s", i == 0 ? '@' : '+', ds.id);
  }
  free(idx);
}

/* The next item of an already validated spec: `name=value`, blanks
 * trimmed. Returns where the following item starts, or NULL at the end. */
static const char *next_item(const char *p, char *name, char *value) {
  while (*p == ' ' || *p == '\t' || *p == ',')
    p++;
  if (*p == '\0')
    return NULL;
  size_t n = strcspn(p, " \t=");
  snprintf(name, CQ_NAME_MAX + 1, "%.*s", (int)n, p);
  p += n;
  p += strspn(p, " \t=");
  n = strcspn(p, " \t,");
  snprintf(value, CQ_NAME_MAX + 1, "%.*s", (int)n, p);
  return p + n;
}

/* "CRONOQ_GRANT=gpu=0.5@1,memory_mib=8192,class=predict": what the job
 * holds, item by item in the order its spec names them. Amounts are read
 * back from the grant, so they say what was granted, not what was asked. */
static char *grant_entry(struct runner *r, const struct job *job) {
  const cq_grant *grant = &job->ureq.grant;
  struct strbuf sb = {0};
  sb_puts(&sb, "CRONOQ_GRANT=");
  char name[CQ_NAME_MAX + 1], value[CQ_NAME_MAX + 1];
  const char *p = job->spec;
  for (bool first = true; (p = next_item(p, name, value)) != NULL;
       first = false) {
    if (!first)
      sb_puts(&sb, ",");
    if (strcmp(name, "class") == 0) {
      sb_printf(&sb, "class=%s", value);
      continue;
    }
    int64_t held = cq_grant_held(grant, name);
    size_t devices = cq_grant_devices(grant, name, NULL, 0);
    sb_printf(&sb, "%s=", name);
    if (devices == 0) {
      sb_printf(&sb, "%lld", (long long)held);
      continue;
    }
    sb_put_milli(&sb, held);
    put_device_ids(&sb, r, grant, name, devices);
  }
  return sb_take(&sb);
}

/* ------------------------------------------------------------------------ */
/* Children and their process groups                                         */
/* ------------------------------------------------------------------------ */

/*
 * A job is its process group, not its shell. The shell may exit, or die of
 * the SIGTERM of a timeout, while a process it started (a data-loader
 * worker, a daemon, anything that ignores SIGTERM) still runs on the
 * devices the job holds. So the units come back only once the group is
 * gone, when kill(-pgid, 0) fails with ESRCH.
 *
 * Why a poll of the group: it is the one test that covers every member,
 * however deep, where the shell's exit says nothing about its children.
 * Zombies still count as members, so the runner makes itself a child
 * subreaper (Linux): the group's orphans come to it rather than to an init
 * that may never reap them (a container whose PID 1 does not), and it
 * reaps them with waitpid(-pgid), which can never take a shell that libuv
 * waits for, since each shell leads a group of its own. A pgid is not
 * reused while its group has a member, zombies included, so the poll never
 * takes a new group for the old one.
 *
 * Every wait is bounded. A group that outlives its shell is sent SIGTERM
 * (what a job leaves behind is stopped, as a batch scheduler does when the
 * job script ends), and SIGKILL after the grace. A group still there
 * RUNNER_GONE_WAIT_MS after SIGKILL holds a process that SIGKILL cannot
 * end (uninterruptible sleep in a driver): the runner stops waiting, but
 * first takes what the job holds out of the pool, so that releasing its
 * grant gives its devices to no one; they are lost to the run.
 *
 * Processes that leave the group (setsid(), job control) are out of reach
 * of group signals and are not waited for; those the runner inherits as
 * their subreaper are reaped when they exit, so they never pile up.
 */

/* Signal the job's process group: the child leads it (detached). */
static void signal_job(struct job *job, int signum) {
  int rc = uv_kill(-job->pgid, signum);
  if (rc != 0 && rc != UV_ESRCH)
    fprintf(stderr, "cronoq-run: line %zu: kill: %s\n", job->line,
            uv_strerror(rc));
}

static void on_kill_timer(uv_timer_t *timer);

/* SIGTERM now, SIGKILL when the grace period ends without an exit. */
static void terminate_job(struct job *job) {
  if (job->kill_stage != KILL_NONE)
    return;
  signal_job(job, SIGTERM);
  job->kill_stage = KILL_TERM_SENT;
  (void)uv_timer_start(&job->kill_timer, on_kill_timer, RUNNER_KILL_GRACE_MS,
                       0);
}

/* SIGKILL now, and wait a bounded time for the group to go. */
static void kill_job(struct job *job) {
  signal_job(job, SIGKILL);
  job->kill_stage = KILL_KILL_SENT;
  (void)uv_timer_start(&job->kill_timer, on_kill_timer, RUNNER_GONE_WAIT_MS,
                       0);
}

/* Whether the job's group still has a member, once the members that have
 * exited are reaped. EPERM counts as alive: the process is there. */
static bool group_alive(const struct job *job) {
  while (waitpid(-job->pgid, NULL, WNOHANG) > 0)
    ;
  return kill(-job->pgid, 0) == 0 || errno != ESRCH;
}

/* Reap the zombies the runner inherited as a subreaper from outside any
 * job's group. It peeks first (WNOWAIT) and stops at a shell that libuv has
 * still to reap, which it must be the one to reap. */
static void reap_strays(struct runner *r) {
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid == 0)
      return;
    for (size_t i = 0; i < r->n_jobs; i++) {
      const struct job *job = &r->jobs[i];
      if (job->state == JOB_RUNNING && !job->shell_exited &&
          job->pgid == info.si_pid)
        return;
    }
    (void)waitpid(info.si_pid, NULL, 0); /* a zombie: returns at once */
  }
}

/* Take what the job holds out of the pool for good: its devices go offline,
 * its budgets and classes shrink by what it holds. Releasing its grant then
 * gives nothing to another job; waiters that can no longer fit fail as
 * never fitting. */
static void retire_units(struct job *job) {
  struct runner *r = job->runner;
  const cq_grant *grant = &job->ureq.grant;
  size_t count = 0;
  if (cq_pool_snapshot(r->pool, r->snapshot, r->snapshot_cap, &count) != 0)
    return;
  for (size_t i = 0; i < count && i < r->snapshot_cap; i++) {
    const cq_resource_stats *st = &r->snapshot[i];
    int64_t held = cq_grant_held(grant, st->name);
    if (held <= 0)
      continue;
    if (st->kind == CQ_KIND_BUDGET) {
      (void)cq_budget_set_capacity(r->pool, st->name, st->capacity - held);
    } else if (st->kind == CQ_KIND_CLASS) {
      (void)cq_class_set_max(r->pool, st->name, st->capacity - 1);
    } else {
      size_t n = cq_grant_devices(grant, st->name, NULL, 0);
      uint32_t *idx = malloc(n * sizeof(*idx));
      if (idx != NULL) {
        n = cq_grant_devices(grant, st->name, idx, n);
        for (size_t d = 0; d < n; d++)
          (void)cq_device_set_online(r->pool, st->name, idx[d], 0);
      } else {
        /* Out of memory: the whole device pool, rather than none of it. */
        for (uint32_t d = 0; d < st->devices; d++)
          (void)cq_device_set_online(r->pool, st->name, d, 0);
      }
      free(idx);
    }
  }
}

/* The job's whole group is gone (or given up on): count it, give its units
 * back, and let the jobs they admit start, from within. */
static void job_ended(struct job *job, enum job_state state) {
  struct runner *r = job->runner;
  job->ended_ns = uv_hrtime();
  job->state = state;
  if (job->shell_exited)
    r->lingering--;
  else
    uv_close((uv_handle_t *)&job->process, NULL); /* given up on */
  uv_close((uv_handle_t *)&job->kill_timer, NULL);
  r->running--;
  r->finished++;
  if (job_failed(job))
    r->failed++;
  release_job(job);
  finish_if_done(r);
}

static void on_kill_timer(uv_timer_t *timer) {
  struct job *job = timer->data;
  if (job->kill_stage == KILL_NONE) {
    job->timed_out = true;
    fprintf(stderr, "cronoq-run: line %zu: timed out, stopping it\n",
            job->line);
    terminate_job(job);
  } else if (job->kill_stage == KILL_TERM_SENT) {
    kill_job(job);
  } else {
    fprintf(stderr,
            "cronoq-run: line %zu: process group %d is still there %d ms "
            "after SIGKILL; what the job holds is taken out of the pool\n",
            job->line, job->pgid, RUNNER_GONE_WAIT_MS);
    retire_units(job);
    job_ended(job, JOB_UNKILLABLE);
  }
}

/* The groups of jobs whose shell has exited: those now gone end. */
static void on_group_timer(uv_timer_t *timer) {
  struct runner *r = timer->data;
  for (size_t i = 0; i < r->n_jobs && r->lingering > 0; i++) {
    struct job *job = &r->jobs[i];
    if (job->state == JOB_RUNNING && job->shell_exited && !group_alive(job))
      job_ended(job, JOB_EXITED);
  }
  reap_strays(r);
  if (r->lingering == 0)
    (void)uv_timer_stop(timer);
}

static void on_child_exit(uv_process_t *process, int64_t exit_status,
                          int term_signal) {
  struct job *job = process->data;
  struct runner *r = job->runner;
  job->exit_code = exit_status;
  job->term_signal = term_signal;
  job->shell_exited = true;
  r->lingering++;
  uv_close((uv_handle_t *)process, NULL);
  reap_strays(r);
  if (!group_alive(job)) {
    job_ended(job, JOB_EXITED);
    return;
  }
  if (job->kill_stage == KILL_NONE) {
    job->left_behind = true;
    fprintf(stderr,
            "cronoq-run: line %zu: exited and left processes in its group; "
            "stopping them\n",
            job->line);
    terminate_job(job);
  }
  if (!uv_is_active((uv_handle_t *)&r->group_timer))
    (void)uv_timer_start(&r->group_timer, on_group_timer,
                         RUNNER_GROUP_POLL_MS, RUNNER_GROUP_POLL_MS);
}

/* Start the granted job's child; on failure, give the grant back. */
static void start_job(struct job *job) {
  struct runner *r = job->runner;
  job->visible_entry = visible_entry(job);
  job->grant_entry = grant_entry(r, job);
  if (job->visible_entry == NULL || job->grant_entry == NULL) {
    release_job(job);
    job_not_run(job, JOB_SPAWN_FAILED, "out of memory");
    return;
  }
  /* The environment's two slots are ours until uv_spawn() returns: the
   * child has its copy by then. */
  r->env[r->env_slot] = job->visible_entry;
  r->env[r->env_slot + 1] = job->grant_entry;

  char *args[] = {"/bin/sh", "-c", job->command, NULL};
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE; /* libuv opens /dev/null for it */
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = 1;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  uv_process_options_t opt;
  memset(&opt, 0, sizeof(opt));
  opt.file = args[0];
  opt.args = args;
  opt.env = r->env;
  opt.exit_cb = on_child_exit;
  opt.flags = UV_PROCESS_DETACHED; /* its own process group, see above */
  opt.stdio = stdio;
  opt.stdio_count = 3;

  int rc = uv_timer_init(&r->loop, &job->kill_timer);
  if (rc != 0) {
    release_job(job);
    job_not_run(job, JOB_SPAWN_FAILED, uv_strerror(rc));
    return;
  }
  job->kill_timer.data = job;
  job->process.data = job;
  rc = uv_spawn(&r->loop, &job->process, &opt);
  r->env[r->env_slot] = r->env[r->env_slot + 1] = NULL;
  if (rc != 0) {
    /* Both handles are on the loop now, started or not. */
    uv_close((uv_handle_t *)&job->process, NULL);
    uv_close((uv_handle_t *)&job->kill_timer, NULL);
    release_job(job);
    job_not_run(job, JOB_SPAWN_FAILED, uv_strerror(rc));
    return;
  }
  job->state = JOB_RUNNING;
  job->pgid = job->process.pid;
  r->running++;
  if (r->timeout_ms > 0)
    (void)uv_timer_start(&job->kill_timer, on_kill_timer,
                         (uint64_t)r->timeout_ms, 0);
}

/* ------------------------------------------------------------------------ */
/* The adapter's outcomes, signals, the end of the run                       */
/* ------------------------------------------------------------------------ */

static void on_granted(cq_uv_req *ureq, int status) {
  struct job *job = ureq->data;
  struct runner *r = job->runner;
  r->waiting--;
  job->granted_ns = uv_hrtime();
  if (status == 0)
    start_job(job);
  else if (status == CQ_ENEVER) /* a capacity shrank below it */
    job_not_run(job, JOB_NEVER_FITS, cq_grant_error(&ureq->grant));
  else /* CQ_ECLOSED: interrupted; reported by the summary */
    job_not_run(job, JOB_NOT_STARTED,
                status == CQ_ECLOSED ? NULL : cq_strerror(status));
  finish_if_done(r);
}

static void on_signal(uv_signal_t *handle, int signum) {
  struct runner *r = handle->data;
  if (r->interrupted != 0) {
    /* Asked again: do not wait for the grace period. */
    for (size_t i = 0; i < r->n_jobs; i++) {
      struct job *job = &r->jobs[i];
      if (job->state == JOB_RUNNING && job->kill_stage != KILL_KILL_SENT)
        kill_job(job);
    }
    return;
  }
  r->interrupted = signum;
  progress_clear(r);
  fprintf(stderr,
          "cronoq-run: interrupted: stopping %zu running job(s); %zu "
          "waiting job(s) will not start\n",
          r->running, r->waiting);
  close_adapter(r); /* fails the waiting acquires, from within */
  for (size_t i = 0; i < r->n_jobs; i++)
    if (r->jobs[i].state == JOB_RUNNING)
      terminate_job(&r->jobs[i]);
  finish_if_done(r);
}

static void on_progress(uv_timer_t *timer) { progress_draw(timer->data); }

/* Once nothing waits or runs, close every handle the runner owns. Callable
 * from any callback; acts once. */
static void finish_if_done(struct runner *r) {
  if (r->submitting || r->done || r->waiting > 0 || r->running > 0)
    return;
  r->done = true;
  close_adapter(r);
  for (size_t i = 0; i < RUNNER_STOP_SIGNALS; i++)
    uv_close((uv_handle_t *)&r->signals[i], NULL);
  uv_close((uv_handle_t *)&r->group_timer, NULL);
  if (r->progress) {
    uv_close((uv_handle_t *)&r->progress_timer, NULL);
    progress_clear(r);
  }
}

/* Close what setup made and run the loop until it is closed. */
static void setup_failed(struct runner *r, const char *what, int uv_err) {
  fprintf(stderr, "cronoq-run: %s: %s\n", what, uv_strerror(uv_err));
  r->done = true;
  close_adapter(r);
  (void)uv_run(&r->loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&r->loop);
}

int runner_run(struct runner *r) {
  int rc = uv_loop_init(&r->loop);
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: uv_loop_init: %s\n", uv_strerror(rc));
    return -1;
  }
  rc = cq_uv_init(&r->adapter, &r->loop, r->pool, NULL);
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: cq_uv_init: %s\n", cq_strerror(rc));
    (void)uv_loop_close(&r->loop);
    return -1;
  }
  /* The handlers are in place before the first child starts: a child
   * leads its own process group, so a signal that killed the runner would
   * leave it running. SIGHUP (the terminal or the ssh session is gone)
   * stops the run as SIGINT does. */
  static const int stop_signals[RUNNER_STOP_SIGNALS] = {SIGINT, SIGTERM,
                                                        SIGHUP};
  for (size_t i = 0; i < RUNNER_STOP_SIGNALS; i++) {
    if ((rc = uv_signal_init(&r->loop, &r->signals[i])) == 0) {
      r->signals[i].data = r;
      rc = uv_signal_start(&r->signals[i], on_signal, stop_signals[i]);
      if (rc != 0)
        i++; /* initialised: closed below */
    }
    if (rc != 0) {
      while (i-- > 0)
        uv_close((uv_handle_t *)&r->signals[i], NULL);
      setup_failed(r, "uv_signal_start", rc);
      return -1;
    }
  }
#if defined(PR_SET_CHILD_SUBREAPER)
  /* The jobs' orphans come to the runner, which reaps them: see "Children
   * and their process groups". */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
  (void)uv_timer_init(&r->loop, &r->group_timer); /* cannot fail */
  r->group_timer.data = r;
  if (r->progress) {
    (void)uv_timer_init(&r->loop, &r->progress_timer); /* cannot fail */
    r->progress_timer.data = r;
    (void)uv_timer_start(&r->progress_timer, on_progress, 0,
                         RUNNER_PROGRESS_MS);
  }

  /* Submit everything, in file order. A request that fits starts its job
   * from within cq_uv_acquire(); the run cannot finish before the last
   * submission. */
  r->submitting = true;
  for (size_t i = 0; i < r->n_jobs; i++) {
    struct job *job = &r->jobs[i];
    job->runner = r;
    if (job->state == JOB_PARSE_ERROR) { /* reported when read */
      r->finished++;
      r->failed++;
      continue;
    }
    cq_uv_req_init(&job->ureq);
    job->ureq.data = job;
    job->submitted_ns = uv_hrtime();
    r->waiting++;
    rc = cq_uv_acquire(r->adapter, &job->ureq, &job->req, CQ_NEVER, on_granted);
    if (rc != 0) {
      r->waiting--;
      job_not_run(job, rc == CQ_ENEVER ? JOB_NEVER_FITS : JOB_NOT_STARTED,
                  rc == CQ_ENEVER ? cq_grant_error(&job->ureq.grant)
                                  : cq_strerror(rc));
    }
  }
  r->submitting = false;
  finish_if_done(r);

  (void)uv_run(&r->loop, UV_RUN_DEFAULT);
  rc = uv_loop_close(&r->loop);
  if (rc != 0) {
    /* A handle left open: a bug of the runner, reported, not hidden. */
    fprintf(stderr, "cronoq-run: internal error: the loop did not close: %s\n",
            uv_strerror(rc));
    return 1;
  }
  return 0;
}

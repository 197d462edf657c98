/*
 * The run: every job's request is submitted through the libuv adapter as
 * soon as the job is read, in input order, and the pool's queue decides
 * who starts when (FIFO with reservation: a job waiting at the head holds
 * back only what it needs, so a GPU job waiting for a device does not hold
 * back jobs that need no device; with backfill, a job whose time limit
 * ends before the head could start anyway runs in what the head waits
 * for). The runner never decides an order itself.
 *
 * A job's attempt on the loop:
 * - granted (on_granted): its child starts with the grant in its
 *   environment; a child that cannot start gives its grant back at once;
 * - the child exits (on_child_exit), whatever the status or signal, and
 *   once its whole process group is gone (attempt_ended) its grant is
 *   released, which may grant waiting jobs and start them from within
 *   that call; then its output is printed;
 * - a timeout or an interrupt stops the group with SIGTERM, then SIGKILL
 *   after a grace period (on_kill_timer); the release still waits for the
 *   group, so the units are never returned while any of it runs;
 * - a failed attempt with retries left queues again, at the back, once
 *   its handles are closed (the same handles serve the next attempt).
 *
 * Each child leads its own process group (UV_PROCESS_DETACHED) and is
 * signalled as a group: a shell command's own children stop with it, and
 * none lingers after a timeout or an interrupt (see "Children and their
 * process groups" below).
 *
 * Two queues of the runner's own come before and after the pool's:
 * - on a fleet pool, -j is this runner's limit, not the namespace's (as
 *   each instance's is in GNU parallel): a job that asks the default
 *   request takes one of the runner's -j slots before it queues on the
 *   pool, or waits for one in input order, and gives it back with its
 *   grant;
 * - --delay: a granted job starts no sooner than the delay after the job
 *   started before it; meanwhile it holds its grant, in grant order. (Such
 *   a job could outlast a hold limit, so with --delay no job declares one,
 *   and none backfills.)
 *
 * Stopping (a signal: SIGINT, SIGTERM, SIGHUP; or --halt) closes the input
 * and the adapter: waiting acquires fail with CQ_ECLOSED and those jobs are
 * "not started"; running ones are stopped, except by --halt soon. The run
 * is over when nothing waits, runs or is about to queue again and no input
 * is open; then the runner closes every handle it owns, so uv_run()
 * returns and uv_loop_close() succeeds.
 */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

extern char **environ;

static void finish_if_done(struct runner *r);
static void acquire(struct job *job);
static void pool_acquire(struct job *job);

/* ------------------------------------------------------------------------ */
/* The runner's own queues: -j slots on a fleet pool, --delay                */
/* ------------------------------------------------------------------------ */

static void queue_push(struct job **head, struct job **tail, struct job *job) {
  job->queued = NULL;
  if (*tail != NULL)
    (*tail)->queued = job;
  else
    *head = job;
  *tail = job;
}

static struct job *queue_pop(struct job **head, struct job **tail) {
  struct job *job = *head;
  if (job != NULL) {
    *head = job->queued;
    if (*head == NULL)
      *tail = NULL;
    job->queued = NULL;
  }
  return job;
}

/* Whether the job takes one of this runner's own -j slots. */
static bool takes_local_slot(const struct job *job) {
  return job->runner->local_jobs > 0 && job->default_request;
}

/* The job gives its -j slot back (its acquire failed, or its grant is
 * released): the next job waiting for one queues on the pool. */
static void local_give(struct job *job) {
  struct runner *r = job->runner;
  if (!job->local_slot)
    return;
  job->local_slot = false;
  r->local_used--;
  struct job *next =
      r->stopping ? NULL : queue_pop(&r->local_head, &r->local_tail);
  if (next != NULL)
    pool_acquire(next); /* still counted as waiting */
}

static void close_adapter(struct runner *r) {
  if (r->adapter_closing)
    return;
  /* Set first: cq_uv_close() runs the waiters' callbacks from within. */
  r->adapter_closing = true;
  int rc = cq_uv_close(r->adapter, NULL);
  if (rc != 0)
    console_msg(r, "cronoq-run: closing the adapter: %s", cq_strerror(rc));
}

static void release_job(struct job *job) {
  /* Also after an interrupt closed the adapter: a grant outlives it. */
  int rc = cq_uv_release(&job->ureq);
  if (rc != 0)
    job_msg(job, "release: %s", cq_strerror(rc));
  local_give(job);
}

bool job_failed(const struct job *job) {
  if (job->state == JOB_SKIPPED)
    return false; /* it succeeded in an earlier run */
  if (job->state != JOB_EXITED)
    return true; /* it never ran, or did not finish */
  return job->timed_out || job->term_signal != 0 || job->exit_code != 0;
}

/* --halt: once enough jobs failed, stop. */
static void stop_run(struct runner *r, bool kill_running);

static void check_halt(struct runner *r) {
  const struct options *o = r->o;
  if (o->halt == HALT_NEVER || r->stopping)
    return;
  bool reached = o->halt_percent ? (int64_t)r->failed * 100 >=
                                       o->halt_fail * (int64_t)r->n_jobs
                                 : (int64_t)r->failed >= o->halt_fail;
  if (!reached)
    return;
  r->halted = true;
  console_msg(r,
              "cronoq-run: halting: %zu job(s) failed (--halt %s,fail=%lld%s); "
              "no more jobs start%s",
              r->failed, o->halt == HALT_NOW ? "now" : "soon",
              (long long)o->halt_fail, o->halt_percent ? "%" : "",
              o->halt == HALT_NOW ? ", the running ones are stopped"
                                  : ", the running ones finish");
  stop_run(r, o->halt == HALT_NOW);
}

/* The job's outcome is final: count it and log it. */
static void job_final(struct job *job) {
  struct runner *r = job->runner;
  r->finished++;
  job->final = true;
  output_in_order(r);
  if (job->state == JOB_SKIPPED) {
    r->skipped++;
    return;
  }
  if (job->state == JOB_NOT_STARTED)
    r->not_started++;
  if (job_failed(job))
    r->failed++;
  joblog_write(r, job);
  if (job_failed(job))
    check_halt(r);
}

/* A job that ends without running (again): keep why (NULL: the summary
 * says enough). A job whose earlier attempt ran keeps that outcome. */
static void job_not_run(struct job *job, enum job_state state,
                        const char *why) {
  job->ended_ns = uv_hrtime();
  if (job->attempts > 0 && state == JOB_NOT_STARTED) {
    job->state = JOB_EXITED; /* its last attempt's outcome stands */
  } else {
    job->state = state;
    if (why != NULL) {
      free(job->error);
      job->error = strdup(why); /* NULL on failure: the message is printed */
      job_msg(job, "%s: %s",
              state == JOB_NEVER_FITS     ? "never fits"
              : state == JOB_SPAWN_FAILED ? "cannot start"
                                          : "not started",
              why);
    }
  }
  job_final(job);
}

/* ------------------------------------------------------------------------ */
/* The grant, as the child's environment                                     */
/* ------------------------------------------------------------------------ */

/* The ids of the devices the job holds on device pool `pool`, comma
 * separated; "" if none. */
static char *device_ids(const struct job *job, const char *pool) {
  const cq_grant *grant = &job->ureq.grant;
  size_t n = pool != NULL ? cq_grant_devices(grant, pool, NULL, 0) : 0;
  size_t len = n * (CQ_DEVICE_ID_MAX + 1) + 1; /* ids and commas */
  char *ids = malloc(len);
  if (ids == NULL)
    return NULL;
  if (n == 0 || cq_grant_cuda_visible(grant, pool, ids, len) != 0)
    ids[0] = '\0';
  return ids;
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

/* "gpu=0.5@1,memory_mib=8192,class=predict": what the job holds, resource
 * by resource in the pool's order. Amounts are read back from the grant,
 * so they say what was granted, not what was asked. */
static char *grant_text(struct runner *r, const struct job *job) {
  const cq_grant *grant = &job->ureq.grant;
  struct strbuf sb = {0};
  size_t count = pool_snapshot(r);
  bool first = true;
  for (size_t i = 0; i < count; i++) {
    const cq_resource_stats *st = &r->snapshot[i];
    int64_t held = cq_grant_held(grant, st->name);
    if (held <= 0)
      continue;
    sb_puts(&sb, first ? "" : ",");
    first = false;
    if (st->kind == CQ_KIND_CLASS) {
      sb_printf(&sb, "class=%s", st->name);
    } else if (st->kind == CQ_KIND_BUDGET) {
      sb_printf(&sb, "%s=%lld", st->name, (long long)held);
    } else {
      sb_printf(&sb, "%s=", st->name);
      sb_put_milli(&sb, held);
      put_device_ids(&sb, r, grant, st->name,
                     cq_grant_devices(grant, st->name, NULL, 0));
    }
  }
  return sb_take(&sb);
}

/* CRONOQ_GPU_FRACTION: the share of each GPU the job holds ("0.5"; "1"
 * for whole devices); "" without a GPU. */
static void put_gpu_fraction(struct strbuf *sb, const struct job *job) {
  const char *pool = job->runner->gpu_pool;
  size_t n =
      pool != NULL ? cq_grant_devices(&job->ureq.grant, pool, NULL, 0) : 0;
  if (n > 0)
    sb_put_milli(sb, cq_grant_held(&job->ureq.grant, pool) / (int64_t)n);
}

/* The variables each child gets its own value of, in the order of the
 * environment's slots; the pools' variables of --device-env follow. */
static const char *const own_vars[] = {
    "CUDA_VISIBLE_DEVICES", "CRONOQ_GPU_FRACTION", "CRONOQ_GRANT",
    "CRONOQ_JOB_SEQ",       "CRONOQ_JOB_SLOT",     "CRONOQ_JOB_NAME"};
#define N_OWN_VARS (sizeof(own_vars) / sizeof(own_vars[0]))

static bool is_own_var(const struct runner *r, const char *entry) {
  size_t n = strcspn(entry, "=");
  for (size_t i = 0; i < N_OWN_VARS; i++)
    if (strlen(own_vars[i]) == n && strncmp(entry, own_vars[i], n) == 0)
      return true;
  for (size_t i = 0; i < r->o->n_device_env; i++) {
    const char *var = r->o->device_env[i].var;
    if (strlen(var) == n && strncmp(entry, var, n) == 0)
      return true;
  }
  return false;
}

/* Our environment without the variables each child gets its own value of,
 * and slots for them before the terminating NULL. */
static int child_environment(struct runner *r) {
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  r->n_env_own = N_OWN_VARS + r->o->n_device_env;
  r->env = calloc(n + r->n_env_own + 1, sizeof(*r->env));
  if (r->env == NULL)
    return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!is_own_var(r, environ[i]))
      r->env[k++] = environ[i];
  r->env_slot = k;
  return 0;
}

/* Fill the environment's slots for the job; the entries are the caller's
 * to free (entries[]). Returns 0 or -1 (out of memory). */
static int job_environment(struct job *job, char **entries) {
  struct runner *r = job->runner;
  char label[32];
  for (size_t i = 0; i < r->n_env_own; i++) {
    struct strbuf sb = {0};
    if (i < N_OWN_VARS) {
      sb_printf(&sb, "%s=", own_vars[i]);
      switch (i) {
      case 0:
        sb_puts(&sb, job->devices);
        break;
      case 1:
        put_gpu_fraction(&sb, job);
        break;
      case 2:
        sb_puts(&sb, job->grant_text);
        break;
      case 3:
        sb_printf(&sb, "%zu", job->seq);
        break;
      case 4:
        sb_printf(&sb, "%zu", job->slot);
        break;
      default:
        sb_puts(&sb, job_label(job, label, sizeof(label)));
        break;
      }
    } else {
      const struct device_env *de = &r->o->device_env[i - N_OWN_VARS];
      char *ids = device_ids(job, de->pool);
      sb_printf(&sb, "%s=%s", de->var, ids != NULL ? ids : "");
      if (ids == NULL)
        sb.failed = true;
      free(ids);
    }
    entries[i] = sb_take(&sb);
    r->env[r->env_slot + i] = entries[i];
    if (entries[i] == NULL)
      return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Slots: {%} and CRONOQ_JOB_SLOT                                            */
/* ------------------------------------------------------------------------ */

/* The lowest slot no running job has, as GNU parallel numbers them. */
static size_t take_slot(struct runner *r) {
  for (size_t i = 0; i < r->n_slots; i++)
    if (!r->slots[i]) {
      r->slots[i] = true;
      return i + 1;
    }
  bool *more = realloc(r->slots, (r->n_slots + 64) * sizeof(*more));
  if (more == NULL)
    return 0;
  memset(more + r->n_slots, 0, 64 * sizeof(*more));
  r->slots = more;
  r->slots[r->n_slots] = true;
  r->n_slots += 64;
  return r->n_slots - 63;
}

static void give_slot(struct runner *r, size_t slot) {
  if (slot > 0 && slot <= r->n_slots)
    r->slots[slot - 1] = false;
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
    job_msg(job, "kill: %s", uv_strerror(rc));
}

static void on_kill_timer(uv_timer_t *timer);

/* SIGTERM now, SIGKILL when the grace period ends without an exit. */
static void terminate_job(struct job *job) {
  if (job->kill_stage != KILL_NONE)
    return;
  signal_job(job, SIGTERM);
  job->kill_stage = KILL_TERM_SENT;
  (void)uv_timer_start(&job->kill_timer, on_kill_timer,
                       (uint64_t)job->runner->o->kill_grace_ms, 0);
}

/* SIGKILL now, and wait a bounded time for the group to go. */
static void kill_job(struct job *job) {
  signal_job(job, SIGKILL);
  job->kill_stage = KILL_KILL_SENT;
  (void)uv_timer_start(&job->kill_timer, on_kill_timer, RUNNER_GONE_WAIT_MS, 0);
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
    for (const struct job *job = r->running_list; job != NULL; job = job->next)
      if (!job->shell_exited && job->pgid == info.si_pid)
        return;
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
  size_t count = pool_snapshot(r);
  for (size_t i = 0; i < count; i++) {
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

static void list_remove(struct runner *r, struct job *job) {
  if (job->prev != NULL)
    job->prev->next = job->next;
  else
    r->running_list = job->next;
  if (job->next != NULL)
    job->next->prev = job->prev;
  job->next = job->prev = NULL;
}

/* A handle of the attempt is closed; once all are, a retry queues. */
static void handle_closed(struct job *job) {
  struct runner *r = job->runner;
  if (--job->open_handles > 0 || !job->requeue)
    return;
  job->requeue = false;
  r->requeuing--;
  if (r->stopping) {
    job->state = JOB_EXITED; /* no retry after all: its outcome stands */
    job_final(job);
  } else {
    acquire(job);
  }
  finish_if_done(r);
}

static void on_job_handle_closed(uv_handle_t *handle) {
  handle_closed(handle->data);
}

static void on_capture_closed(uv_handle_t *handle) {
  handle_closed(((struct capture *)handle->data)->job);
}

/* The job's whole group is gone (or given up on): count its outcome (or
 * plan its retry), give its units back, which lets the jobs they admit
 * start, from within, and print its output. */
static void attempt_ended(struct job *job, enum job_state state) {
  struct runner *r = job->runner;
  const struct options *o = r->o;
  job->ended_ns = uv_hrtime();
  job->state = state;
  list_remove(r, job);
  give_slot(r, job->slot);
  r->running--;
  if (job->shell_exited)
    r->lingering--;
  else
    uv_close((uv_handle_t *)&job->process, on_job_handle_closed); /* given up */
  uv_close((uv_handle_t *)&job->kill_timer, on_job_handle_closed);
  bool retry = job_failed(job) && state == JOB_EXITED &&
               job->attempts <= o->retries && !r->stopping;
  /* A final failure may halt the run: decided before the release, which
   * would start the next job from within. */
  if (!retry)
    job_final(job);
  release_job(job);
  output_finish(job, on_capture_closed);
  if (retry) {
    char why[48];
    if (job->timed_out)
      snprintf(why, sizeof(why), "timed out");
    else if (job->term_signal != 0)
      snprintf(why, sizeof(why), "signal %d", job->term_signal);
    else
      snprintf(why, sizeof(why), "exit %lld", (long long)job->exit_code);
    job_msg(job, "attempt %u failed (%s); retrying (%u of %u)", job->attempts,
            why, job->attempts, o->retries);
    job->state = JOB_WAITING;
    job->requeue = true; /* once the handles are closed */
    r->requeuing++;
  }
  finish_if_done(r);
}

static void on_kill_timer(uv_timer_t *timer) {
  struct job *job = timer->data;
  if (job->kill_stage == KILL_NONE) {
    job->timed_out = true;
    job_msg(job, "timed out, stopping it");
    terminate_job(job);
  } else if (job->kill_stage == KILL_TERM_SENT) {
    kill_job(job);
  } else {
    job_msg(job,
            "process group %d is still there %d ms after SIGKILL; what the "
            "job holds is taken out of the pool",
            job->pgid, RUNNER_GONE_WAIT_MS);
    retire_units(job);
    attempt_ended(job, JOB_UNKILLABLE);
  }
}

/* The groups of jobs whose shell has exited: those now gone end. */
static void on_group_timer(uv_timer_t *timer) {
  struct runner *r = timer->data;
  for (struct job *job = r->running_list, *next; job != NULL; job = next) {
    next = job->next; /* attempt_ended() unlinks it */
    if (job->shell_exited && !group_alive(job))
      attempt_ended(job, JOB_EXITED);
  }
  reap_strays(r);
  if (r->lingering == 0)
    (void)uv_timer_stop(timer);
}

/*
 * libuv learns that a child exited from SIGCHLD alone. When the signal
 * never comes, the run would wait for ever on a zombie: the runner was
 * started with SIGCHLD blocked (a blocked mask passes from a parent to what
 * it starts, and a parent that waits for its children with signalfd blocks
 * it), or the signal was dropped on its way (ThreadSanitizer's runtime,
 * which defers signals, was seen to drop one in about 200 runs). So once a
 * second, a shell that has exited while its exit callback has not run is
 * looked for, with waitid(WNOWAIT), which leaves it for libuv to reap; on
 * one, SIGCHLD is unblocked and raised again, and libuv's handler takes it
 * from there.
 */
static void on_exit_watch(uv_timer_t *timer) {
  struct runner *r = timer->data;
  for (const struct job *job = r->running_list; job != NULL; job = job->next) {
    if (job->shell_exited)
      continue;
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)job->pgid, &info, WEXITED | WNOHANG | WNOWAIT) !=
            0 ||
        info.si_pid == 0)
      continue;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    (void)pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
    (void)kill(getpid(), SIGCHLD);
    return;
  }
}

static void on_child_exit(uv_process_t *process, int64_t exit_status,
                          int term_signal) {
  struct job *job = process->data;
  struct runner *r = job->runner;
  job->exit_code = exit_status;
  job->term_signal = term_signal;
  job->shell_exited = true;
  r->lingering++;
  uv_close((uv_handle_t *)process, on_job_handle_closed);
  reap_strays(r);
  if (!group_alive(job)) {
    attempt_ended(job, JOB_EXITED);
    return;
  }
  if (job->kill_stage == KILL_NONE) {
    job_msg(job, "exited and left processes in its group; stopping them");
    terminate_job(job);
  }
  if (!uv_is_active((uv_handle_t *)&r->group_timer))
    (void)uv_timer_start(&r->group_timer, on_group_timer, RUNNER_GROUP_POLL_MS,
                         RUNNER_GROUP_POLL_MS);
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A granted attempt that cannot start: its handles close, its grant goes
 * back, and the job is over (a spawn failure is not retried). */
static void spawn_failed(struct job *job, uv_stdio_container_t *stdio,
                         const char *why) {
  struct runner *r = job->runner;
  output_close_files(stdio);
  struct capture *caps[2] = {&job->out, &job->err};
  for (int i = 0; i < 2; i++)
    if (caps[i]->open) {
      uv_close((uv_handle_t *)&caps[i]->pipe, on_capture_closed);
      caps[i]->open = false;
      sb_free(&caps[i]->buf);
    }
  give_slot(r, job->slot);
  release_job(job);
  job_not_run(job, JOB_SPAWN_FAILED, why);
}

/* Start the granted job's child; on failure, give the grant back. */
static void start_job(struct job *job) {
  struct runner *r = job->runner;
  job->slot = take_slot(r);
  job->attempts++;
  job->kill_stage = KILL_NONE;
  job->shell_exited = job->timed_out = false;
  job->exit_code = job->term_signal = 0;
  free(job->command);
  free(job->devices);
  free(job->grant_text);
  job->command = job_command(job);
  job->devices = device_ids(job, r->gpu_pool);
  job->grant_text = grant_text(r, job);
  char *entries[N_OWN_VARS + RUNNER_DEVICE_ENV_MAX] = {0};
  uv_stdio_container_t stdio[3];
  memset(stdio, 0, sizeof(stdio));
  stdio[0].flags = UV_IGNORE; /* libuv opens /dev/null for it */
  if (job->command == NULL || job->devices == NULL || job->grant_text == NULL ||
      job_environment(job, entries) != 0) {
    for (size_t i = 0; i < r->n_env_own; i++)
      free(entries[i]);
    spawn_failed(job, stdio, "out of memory");
    return;
  }
  int rc = output_prepare(job, stdio);
  if (rc != 0) {
    for (size_t i = 0; i < r->n_env_own; i++)
      free(entries[i]);
    spawn_failed(job, stdio, uv_strerror(rc));
    return;
  }

  char *args[] = {"/bin/sh", "-c", job->command, NULL};
  uv_process_options_t opt;
  memset(&opt, 0, sizeof(opt));
  opt.file = args[0];
  opt.args = args;
  opt.env = r->env;
  opt.exit_cb = on_child_exit;
  opt.flags = UV_PROCESS_DETACHED; /* its own process group, see above */
  opt.stdio = stdio;
  opt.stdio_count = 3;

  (void)uv_timer_init(&r->loop, &job->kill_timer); /* cannot fail */
  job->kill_timer.data = job;
  job->open_handles++;
  job->process.data = job;
  job->start_wall_s = wall_now();
  rc = uv_spawn(&r->loop, &job->process, &opt);
  /* The environment's slots are ours until uv_spawn() returns: the child
   * has its copy by then. */
  for (size_t i = 0; i < r->n_env_own; i++) {
    r->env[r->env_slot + i] = NULL;
    free(entries[i]);
  }
  if (rc != 0) {
    /* The process handle is on the loop now, started or not. */
    job->open_handles++;
    uv_close((uv_handle_t *)&job->process, on_job_handle_closed);
    uv_close((uv_handle_t *)&job->kill_timer, on_job_handle_closed);
    spawn_failed(job, stdio, uv_strerror(rc));
    return;
  }
  output_close_files(stdio); /* the child has its copies */
  job->open_handles++;       /* the process */
  job->state = JOB_RUNNING;
  job->pgid = job->process.pid;
  job->next = r->running_list;
  job->prev = NULL;
  if (r->running_list != NULL)
    r->running_list->prev = job;
  r->running_list = job;
  r->running++;
  if ((rc = output_start(job)) != 0)
    job_msg(job, "reading its output: %s", uv_strerror(rc));
  if (job->timeout_ms > 0)
    (void)uv_timer_start(&job->kill_timer, on_kill_timer,
                         (uint64_t)job->timeout_ms, 0);
}

/* ------------------------------------------------------------------------ */
/* The adapter's outcomes, signals, the end of the run                       */
/* ------------------------------------------------------------------------ */

static void on_delay(uv_timer_t *timer);

/* --delay: start the first granted job if its turn has come, else wake up
 * when it does. */
static void start_delayed(struct runner *r) {
  uint64_t now = uv_hrtime();
  if (r->delay_head != NULL && now >= r->next_start_ns) {
    struct job *job = queue_pop(&r->delay_head, &r->delay_tail);
    r->waiting--;
    job->granted_ns = now;
    start_job(job);
    /* From its spawn, which may come well after `now` on a slow host. */
    now = uv_hrtime();
    r->next_start_ns = now + (uint64_t)r->o->delay_ms * 1000000u;
  }
  if (r->delay_head != NULL && !uv_is_active((uv_handle_t *)&r->delay_timer)) {
    uint64_t due = r->next_start_ns > now ? r->next_start_ns - now : 0;
    (void)uv_timer_start(&r->delay_timer, on_delay, (due + 999999) / 1000000,
                         0);
  }
  finish_if_done(r);
}

static void on_delay(uv_timer_t *timer) { start_delayed(timer->data); }

static void on_granted(cq_uv_req *ureq, int status) {
  struct job *job = ureq->data;
  struct runner *r = job->runner;
  if (status == 0 && r->o->delay_ms > 0) {
    queue_push(&r->delay_head, &r->delay_tail, job); /* still waiting */
    start_delayed(r);
    return;
  }
  r->waiting--;
  job->granted_ns = uv_hrtime();
  if (status == 0) {
    start_job(job);
  } else {
    local_give(job);
    if (status == CQ_ENEVER) /* a capacity shrank below it */
      job_not_run(job, JOB_NEVER_FITS, cq_grant_error(&ureq->grant));
    else /* CQ_ECLOSED: interrupted or halted; reported by the summary */
      job_not_run(job, JOB_NOT_STARTED,
                  status == CQ_ECLOSED ? NULL : cq_strerror(status));
  }
  finish_if_done(r);
}

/* Queue the job on the pool (with its -j slot, where it takes one). */
static void pool_acquire(struct job *job) {
  struct runner *r = job->runner;
  cq_uv_req_init(&job->ureq);
  job->ureq.data = job;
  if (takes_local_slot(job)) {
    job->local_slot = true;
    r->local_used++;
  }
  int rc =
      cq_uv_acquire(r->adapter, &job->ureq, &job->req, CQ_NEVER, on_granted);
  if (rc != 0) {
    r->waiting--;
    local_give(job);
    job_not_run(job, rc == CQ_ENEVER ? JOB_NEVER_FITS : JOB_NOT_STARTED,
                rc == CQ_ENEVER    ? cq_grant_error(&job->ureq.grant)
                : rc == CQ_ECLOSED ? NULL
                                   : cq_strerror(rc));
  }
}

static void acquire(struct job *job) {
  struct runner *r = job->runner;
  job->state = JOB_WAITING;
  job->submitted_ns = uv_hrtime();
  r->waiting++;
  if (takes_local_slot(job) && r->local_used >= r->local_jobs)
    queue_push(&r->local_head, &r->local_tail, job); /* for a -j slot */
  else
    pool_acquire(job);
}

void job_submit(struct job *job) {
  struct runner *r = job->runner;
  if (job->state == JOB_WAITING && !r->stopping)
    acquire(job);
  else if (job->state == JOB_WAITING)
    job_not_run(job, JOB_NOT_STARTED, NULL);
  else
    job_final(job); /* a parse error (reported when read), or skipped */
  finish_if_done(r);
}

static void stop_run(struct runner *r, bool kill_running) {
  r->stopping = true;
  input_close(r);
  /* The jobs of the runner's own queues start no more either. */
  struct job *job;
  while ((job = queue_pop(&r->local_head, &r->local_tail)) != NULL) {
    r->waiting--;
    job_not_run(job, JOB_NOT_STARTED, NULL);
  }
  while ((job = queue_pop(&r->delay_head, &r->delay_tail)) != NULL) {
    r->waiting--;
    release_job(job);
    job_not_run(job, JOB_NOT_STARTED, NULL);
  }
  close_adapter(r); /* fails the waiting acquires, from within */
  if (kill_running)
    for (struct job *job = r->running_list; job != NULL; job = job->next)
      terminate_job(job);
  finish_if_done(r);
}

static void on_signal(uv_signal_t *handle, int signum) {
  struct runner *r = handle->data;
  if (r->interrupted != 0) {
    /* Asked again: do not wait for the grace period. */
    for (struct job *job = r->running_list; job != NULL; job = job->next)
      if (job->kill_stage != KILL_KILL_SENT)
        kill_job(job);
    return;
  }
  r->interrupted = signum;
  console_msg(r,
              "cronoq-run: interrupted: stopping %zu running job(s); %zu "
              "waiting job(s) will not start",
              r->running, r->waiting + r->requeuing);
  stop_run(r, true);
}

static void on_progress(uv_timer_t *timer) { progress_draw(timer->data); }

/* Once nothing waits, runs or queues again and no input is open, close
 * every handle the runner owns. Callable from any callback; acts once. */
static void finish_if_done(struct runner *r) {
  if (!r->started || r->done || r->input_open || r->waiting > 0 ||
      r->running > 0 || r->requeuing > 0)
    return;
  r->done = true;
  close_adapter(r);
  for (size_t i = 0; i < RUNNER_STOP_SIGNALS; i++)
    uv_close((uv_handle_t *)&r->signals[i], NULL);
  uv_close((uv_handle_t *)&r->group_timer, NULL);
  uv_close((uv_handle_t *)&r->exit_watch, NULL);
  if (r->o->delay_ms > 0)
    uv_close((uv_handle_t *)&r->delay_timer, NULL);
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

int runner_start(struct runner *r) {
  if (child_environment(r) != 0) {
    fprintf(stderr, "cronoq-run: out of memory\n");
    return -1;
  }
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
  (void)uv_timer_init(&r->loop, &r->exit_watch);
  r->exit_watch.data = r;
  (void)uv_timer_start(&r->exit_watch, on_exit_watch, RUNNER_EXIT_WATCH_MS,
                       RUNNER_EXIT_WATCH_MS);
  if (r->o->delay_ms > 0) {
    (void)uv_timer_init(&r->loop, &r->delay_timer); /* cannot fail */
    r->delay_timer.data = r;
  }
  if (r->progress) {
    (void)uv_timer_init(&r->loop, &r->progress_timer); /* cannot fail */
    r->progress_timer.data = r;
    (void)uv_timer_start(&r->progress_timer, on_progress, 0,
                         RUNNER_PROGRESS_MS);
  }
  r->start_ns = uv_hrtime();
  r->started = true;
  /* Submit what was read, in order. A request that fits starts its job
   * from within cq_uv_acquire(); the run cannot finish before the input
   * is done (runner_input_done()). */
  r->input_open = true;
  for (size_t i = 0; i < r->n_jobs; i++)
    job_submit(r->jobs[i]);
  return 0;
}

void runner_input_done(struct runner *r) {
  r->input_open = false;
  finish_if_done(r);
}

int runner_wait(struct runner *r) {
  (void)uv_run(&r->loop, UV_RUN_DEFAULT);
  cq_pool_stats st;
  memset(&st, 0, sizeof(st));
  if (cq_pool_stats_get(r->pool, &st) == 0) {
    r->backfilled = st.backfilled;
    r->late_heads = st.late_heads;
  }
  int rc = uv_loop_close(&r->loop);
  if (rc != 0) {
    /* A handle left open: a bug of the runner, reported, not hidden. */
    fprintf(stderr, "cronoq-run: internal error: the loop did not close: %s\n",
            uv_strerror(rc));
    return 1;
  }
  return 0;
}

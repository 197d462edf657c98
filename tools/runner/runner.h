/*
 * cronoq-run: a resource-aware job runner on libcronoq's libuv adapter.
 *
 * The pieces share these types: a job is one line of the job file, from
 * parsing to its final status; the runner holds the loop, the pool, the
 * adapter and the counters that the progress line and the exit status read.
 *
 * A job's state only moves forward:
 *
 *   (parsed) -> WAITING -> RUNNING -> EXITED
 *                  |          |-> SPAWN_FAILED   (granted, child did not start)
 *                  |          \-> UNKILLABLE     (its group outlived SIGKILL)
 *                  |-> NEVER_FITS                 (refused: exceeds a capacity)
 *                  \-> NOT_STARTED                (interrupted while waiting)
 *   PARSE_ERROR                                   (never submitted)
 *
 * The counters `waiting` and `running` count the jobs in those two states;
 * the runner finishes when both are zero after every job was submitted.
 */
#ifndef CRONOQ_RUNNER_H
#define CRONOQ_RUNNER_H

#include <cronoq/cronoq_uv.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Grace between SIGTERM and SIGKILL, for a timeout or an interrupt. */
#define RUNNER_KILL_GRACE_MS 2000

/* How long a process group may outlive SIGKILL before the runner stops
 * waiting for it (see run.c, "Process groups"). */
#define RUNNER_GONE_WAIT_MS 5000

/* How often the groups of jobs whose shell has exited are looked at. */
#define RUNNER_GROUP_POLL_MS 20

/* The signals that stop the run. */
#define RUNNER_STOP_SIGNALS 3

/* How often the progress line is redrawn. */
#define RUNNER_PROGRESS_MS 250

enum job_state {
  JOB_PARSE_ERROR,
  JOB_WAITING,
  JOB_RUNNING,
  JOB_EXITED,
  JOB_SPAWN_FAILED,
  JOB_NEVER_FITS,
  JOB_NOT_STARTED,
  JOB_UNKILLABLE
};

/* How far the runner has gone in stopping a running child. */
enum kill_stage { KILL_NONE, KILL_TERM_SENT, KILL_KILL_SENT };

struct runner;

struct job {
  struct runner *runner;
  size_t line;   /* 1-based line number in the job file */
  char *text;    /* the line, owned; `spec` and `command` point into it */
  char *spec;    /* the request spec ("" for none) */
  char *command; /* run as /bin/sh -c COMMAND */
  char *error;   /* why it failed before running, owned; NULL if not */
  enum job_state state;
  cq_req req;     /* built once from `spec` */
  cq_uv_req ureq; /* the acquire, then the grant (ureq.grant) */
  uv_process_t process;
  uv_timer_t kill_timer; /* the timeout, the SIGKILL grace, the last wait */
  enum kill_stage kill_stage;
  int pgid;           /* the child's process group: its pid (it leads it) */
  bool shell_exited;  /* the child has exited; its group may live on */
  bool left_behind;   /* it exited leaving processes in its group */
  bool timed_out;
  int64_t exit_code; /* valid when EXITED and term_signal == 0 */
  int term_signal;
  uint64_t submitted_ns, granted_ns, ended_ns; /* uv_hrtime() */
  char *visible_entry; /* "CUDA_VISIBLE_DEVICES=...", owned */
  char *grant_entry;   /* "CRONOQ_GRANT=...", owned */
};

struct runner {
  uv_loop_t loop;
  cq_pool *pool;
  cq_uv *adapter;
  bool adapter_closing; /* cq_uv_close() called: see release_job() */
  uv_signal_t signals[RUNNER_STOP_SIGNALS]; /* SIGINT, SIGTERM, SIGHUP */
  uv_timer_t progress_timer;
  uv_timer_t group_timer; /* polls the groups of jobs whose shell exited */
  size_t lingering;       /* running jobs whose shell has exited */
  bool progress;       /* a live progress line on stderr */
  bool progress_shown; /* a progress line is on screen */
  int64_t timeout_ms;  /* per job; 0: none */
  const char *gpu_pool; /* the device pool behind CUDA_VISIBLE_DEVICES, or
                           NULL when there is none */
  struct job *jobs;
  size_t n_jobs;
  char **env;      /* children's environment: ours, then two slots */
  size_t env_slot; /* index of the first of the two slots */
  size_t waiting, running, finished, failed;
  bool submitting;             /* still submitting: do not finish yet */
  bool done;                   /* every job accounted for; handles closing */
  int interrupted;             /* the signal that interrupted the run, or 0 */
  cq_resource_stats *snapshot; /* room for the progress line's snapshot */
  size_t snapshot_cap;
};

/* A growable string. On allocation failure it stops growing and `failed`
 * is set; sb_take() then returns NULL. */
struct strbuf {
  char *s;
  size_t len, cap;
  bool failed;
};

void sb_putn(struct strbuf *sb, const char *s, size_t n);
void sb_puts(struct strbuf *sb, const char *s);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void sb_printf(struct strbuf *sb, const char *fmt, ...);
/* Thousandths of a device as the shortest decimal, the way a request spec
 * writes it: 500 -> "0.5", 2000 -> "2". */
void sb_put_milli(struct strbuf *sb, int64_t milli);
/* The string, owned by the caller (NULL after a failure); sb is reset. */
char *sb_take(struct strbuf *sb);

/* jobfile.c: read every line of `in`, then parse each into a job on `pool`.
 * Lines that cannot be parsed become PARSE_ERROR jobs, reported on stderr.
 * Returns 0, or -1 after printing why (read error, out of memory). */
int jobs_read(FILE *in, const char *name, cq_pool *pool, struct job **jobs,
              size_t *n_jobs);
void jobs_free(struct job *jobs, size_t n_jobs);

/* main.c: a duration as the options write it ("90", "1.5", "15m"), in
 * milliseconds rounded up. Returns 0, or -1 when it is not one. */
int parse_duration(const char *text, int64_t *ms);

/* run.c: submit every job and run the loop until all are accounted for.
 * Returns 0; -1 when the run could not start (nothing ran, the reason is
 * printed); 1 when the loop did not close cleanly (a bug, printed). */
int runner_run(struct runner *r);

/* report.c */
bool job_failed(const struct job *job);
void progress_draw(struct runner *r);
void progress_clear(struct runner *r);
void report_table(const struct runner *r, FILE *out);
void report_json(const struct runner *r, FILE *out);

#endif /* CRONOQ_RUNNER_H */

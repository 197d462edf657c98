/*
 * cronoq-run: a resource-aware job runner on libcronoq's libuv adapter.
 *
 * The pieces share these types: the options as the command line gave them;
 * a job, from the line or argument it came from to its final outcome; the
 * runner, which holds the loop, the pool, the adapter, the output and the
 * counters that the progress line, the summary and the exit status read.
 *
 * A job's state only moves forward, except that a failed attempt with
 * retries left goes back to WAITING (a retry is a new attempt, and queues
 * again behind the jobs that came before it):
 *
 *   (read) -> WAITING -> RUNNING -> EXITED
 *               |   ^       |-> SPAWN_FAILED   (granted, child did not start)
 *               |   \-------|   (retry)
 *               |           \-> UNKILLABLE     (its group outlived SIGKILL)
 *               |-> NEVER_FITS                 (refused: exceeds a capacity)
 *               \-> NOT_STARTED                (interrupted or halted first)
 *   PARSE_ERROR                                (never submitted)
 *   SKIPPED                                    (done in an earlier run)
 *
 * `waiting` and `running` count the jobs in those two states, `requeuing`
 * the failed attempts whose handles are still closing before they queue
 * again; the run is over when all three are zero and no input is open.
 */
#ifndef CRONOQ_RUNNER_H
#define CRONOQ_RUNNER_H

#include <cronoq/cronoq_uv.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Grace between SIGTERM and SIGKILL, for a timeout or an interrupt, unless
 * --kill-grace says otherwise. */
#define RUNNER_KILL_GRACE_MS 2000

/* How long a process group may outlive SIGKILL before the runner stops
 * waiting for it (see run.c, "Process groups"). */
#define RUNNER_GONE_WAIT_MS 5000

/* How often the groups of jobs whose shell has exited are looked at. */
#define RUNNER_GROUP_POLL_MS 20

/* How often the runner looks for a job's shell that has exited without
 * its SIGCHLD reaching libuv (see run.c, on_exit_watch()). */
#define RUNNER_EXIT_WATCH_MS 1000

/* How often the progress line is redrawn. */
#define RUNNER_PROGRESS_MS 250

/* The signals that stop the run. */
#define RUNNER_STOP_SIGNALS 3

/* Grouped output a job may hold before its whole lines are printed early. */
#define RUNNER_GROUP_MAX (1u << 20)

/* The budget that -j sets, and that jobs naming nothing ask one unit of. */
#define RUNNER_JOBS_BUDGET "jobs"

/* Input sources of a template (":::", "::::", -a) at most. */
#define RUNNER_SOURCES_MAX 32

/* The longest command that -X packs, in bytes: well inside Linux's limit
 * on one argument (128 KiB), which `sh -c COMMAND` passes it as. */
#define RUNNER_COMMAND_MAX 65536

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

enum output_mode {
  OUTPUT_GROUP,     /* each job's output whole, when it ends */
  OUTPUT_LINE,      /* whole lines as they come */
  OUTPUT_UNGROUPED, /* the jobs write to the runner's stdout and stderr */
  OUTPUT_RESULTS    /* files in a directory, nothing printed */
};

enum halt_when { HALT_NEVER, HALT_SOON, HALT_NOW };

/* What the summary table lists: the failed jobs (the default, so that a
 * run of thousands of jobs still ends on one screen), every job, none. */
enum summary_kind { SUMMARY_FAILED, SUMMARY_FULL, SUMMARY_NONE };

enum resume_kind { RESUME_NONE, RESUME_DONE, RESUME_FAILED };

/* A variable that lists the devices a job holds on one device pool. */
struct device_env {
  const char *pool;
  const char *var;
};

#define RUNNER_DEVICE_ENV_MAX 8

/* An input source of a template: the words after ":::", or the lines of a
 * file ("::::", -a; "-": standard input). A linked one (":::+", "::::+")
 * is zipped with the source before it instead of combined with it. */
struct arg_source {
  const char *path; /* NULL: the words */
  char **words;
  int n_words;
  bool linked;
};

struct options {
  const char *resources; /* NULL: none but the jobs budget */
  const char *pool_url;  /* --pool: a fleet pool; NULL: in-process */
  const char *pool_ns;   /* its namespace; NULL: "cronoq-run" */
  bool jobs_given;       /* -j was given */
  bool new_namespace;    /* --new-namespace: CQ_FLEET_NEW_NAMESPACE */
  const char *request;   /* for jobs naming nothing; NULL: jobs=1 */
  int64_t jobs;          /* -j: the jobs budget's capacity (a fleet pool:
                            this runner's own slots); 0: no limit */
  const char *gpu_pool;  /* NULL: "gpu", where there is one */
  struct device_env device_env[RUNNER_DEVICE_ENV_MAX];
  size_t n_device_env;
  int64_t timeout_ms; /* for every job; 0: none */
  int64_t kill_grace_ms;
  unsigned retries;
  enum halt_when halt;
  bool halt_percent;
  int64_t halt_fail; /* failures (or percent of the jobs) that halt */
  const char *joblog;
  enum resume_kind resume;
  enum output_mode output;
  bool tag;
  const char *results;
  int progress; /* -1: on a terminal, 0: never, 1: always */
  enum summary_kind summary;
  const char *json; /* "-": standard output */
  bool follow;
  bool keep_order;  /* -k: the jobs' output in input order */
  bool dry_run;     /* --dry-run: print the commands, run none */
  int64_t delay_ms; /* --delay: between two job starts; 0: none */
  /* The input: a job file (NULL or "-": standard input), or a command
   * template with its input sources (none: standard input). */
  const char *jobfile;
  char **template_words;
  int n_template_words;
  struct arg_source sources[RUNNER_SOURCES_MAX];
  size_t n_sources;
  int64_t max_args;     /* -n, -N: records per job (0: one, inserted as
                           none); -1: not given (one; -X: no limit) */
  bool context_replace; /* -X: a word with {} once per record, and the
                           records spread over the -j slots */
  const char *colsep;   /* --colsep: a regex that splits each value */
};

/* options.c: a duration ("90", "1.5", "15m"), in milliseconds rounded up.
 * Returns 0, or -1 when it is not one (or is 0). */
int parse_duration(const char *text, int64_t *ms);

/* options.c: fill *o from the command line. Returns -1 to go on, or the
 * exit status (0 after --help or --version, 2 after a usage error, which
 * it printed). */
int options_parse(int argc, char **argv, struct options *o);
/* options.c: the number of online CPUs (at least 1), which -j counts in. */
int64_t options_cpus(void);

/* ------------------------------------------------------------------------ */
/* Strings                                                                   */
/* ------------------------------------------------------------------------ */

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
/* `s` quoted for /bin/sh, as one word; as it is when nothing needs it. */
void sb_put_shell_word(struct strbuf *sb, const char *s);
/* Drop the first n bytes. */
void sb_consume(struct strbuf *sb, size_t n);
/* The string, owned by the caller (NULL after a failure); sb is reset. */
char *sb_take(struct strbuf *sb);
/* Free the string and reset sb. */
void sb_free(struct strbuf *sb);

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

enum job_state {
  JOB_PARSE_ERROR,
  JOB_WAITING,
  JOB_RUNNING,
  JOB_EXITED,
  JOB_SPAWN_FAILED,
  JOB_NEVER_FITS,
  JOB_NOT_STARTED,
  JOB_UNKILLABLE,
  JOB_SKIPPED
};

/* How far the runner has gone in stopping a running child. */
enum kill_stage { KILL_NONE, KILL_TERM_SENT, KILL_KILL_SENT };

struct runner;

/* One of a running job's output streams, read from a pipe. */
struct capture {
  struct job *job;
  uv_pipe_t pipe;
  struct strbuf buf; /* grouped output, or the line not yet complete */
  int fd;            /* where it is printed: 1 or 2 */
  bool open;         /* the pipe handle is open */
};

struct job {
  struct runner *runner;
  size_t seq;      /* 1-based: {#}, the joblog's Seq */
  size_t line;     /* line in the job file; 0 for an argument */
  char *text;      /* the line or the argument as read, owned */
  char *spec;      /* the request spec as given ("" for none), owned */
  char *name;      /* name= of the line, owned; NULL if none */
  const char *arg; /* a template job's arguments, joined by blanks: its
                      label (it is `text`) */
  char **fields;   /* a template job's values, record after record (a
                      value split by --colsep is several), owned */
  size_t n_fields;
  size_t *rec_at; /* record i is fields[rec_at[i]..rec_at[i + 1]) */
  size_t n_records;
  bool default_request; /* it asks what --request says */
  const char *templ;    /* the command, or the template to expand */
  char *command;        /* the command of the last attempt, owned */
  char *error;          /* why it failed before running, owned */
  int64_t timeout_ms;   /* its limit; 0: none */
  enum job_state state;
  unsigned attempts;
  cq_req req;     /* built once; the same for every attempt */
  cq_uv_req ureq; /* the acquire, then the grant (ureq.grant) */
  /* The attempt that runs. */
  uv_process_t process;
  uv_timer_t kill_timer; /* the timeout, the SIGKILL grace, the last wait */
  struct capture out, err;
  int open_handles; /* handles of the attempt still closing */
  bool requeue;     /* queue again once they are closed */
  enum kill_stage kill_stage;
  int pgid;          /* the child's process group: its pid (it leads it) */
  bool shell_exited; /* the child has exited; its group may live on */
  bool timed_out;
  int64_t exit_code; /* valid when EXITED and term_signal == 0 */
  int term_signal;
  size_t slot;             /* {%}: 1.., while it runs */
  struct job *next, *prev; /* the running jobs' list */
  struct job *queued;      /* the next job in a queue of the runner's own: for
                              a -j slot of its own (fleet pools), for --delay */
  bool local_slot;         /* it holds one of this runner's own -j slots */
  bool final;              /* its outcome is final (job_final()) */
  struct strbuf held_out, held_err; /* -k: output held for its turn */
  uint64_t submitted_ns, granted_ns, ended_ns; /* uv_hrtime() */
  double start_wall_s; /* when the last attempt started, epoch */
  char *devices;       /* the GPU ids it got, owned */
  char *grant_text;    /* what it held, as CRONOQ_GRANT says */
};

/* jobs.c */
/* Add a job read from job-file line `line` (`text` is owned by the job
 * from now on). Returns the job or NULL when out of memory (printed).
 * Blank and comment lines are not jobs: it frees them and returns NULL
 * with *skipped set. */
struct job *job_add(struct runner *r, char *text, size_t line, bool *skipped);

/* A template job's arguments, as args.c gathers them (see struct job). */
struct job_args {
  char **fields;
  size_t n_fields, fields_cap;
  size_t *rec_at;
  size_t n_records, records_cap;
  size_t bytes; /* of the fields, for -X's limit on a command's length */
  bool failed;  /* out of memory on the way */
};
/* Add a template job with these arguments, which it takes (*a is reset).
 * Returns the job, or NULL when out of memory (printed). */
struct job *job_add_args(struct runner *r, struct job_args *a);
void job_args_free(struct job_args *a);

/* A placeholder of a template: {} and its forms {.} {/} {//} {/.}, the
 * same for one value ({1}, {2.}, ...), {#} and {%}. */
enum mark_kind { MARK_ARG, MARK_SEQ, MARK_SLOT };
enum mark_part { PART_ALL, PART_NOEXT, PART_BASE, PART_DIR, PART_BASE_NOEXT };
struct mark {
  enum mark_kind kind;
  enum mark_part part;
  size_t column; /* {N}: N; 0 for {} */
};
/* The placeholder that starts at p: its length, 0 if none does. */
size_t template_mark(const char *p, struct mark *m);
/* How many words of the template hold a value's placeholder ({}, {1},
 * ...), or with `any` any placeholder. */
int template_mark_words(char *const *words, int n, bool any);
/* The command of the job's next attempt, expanded (templates). */
char *job_command(const struct job *job);
void jobs_free(struct runner *r);
/* A label for messages and --tag: the name, the argument, or "line N". */
const char *job_label(const struct job *job, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* The runner                                                                */
/* ------------------------------------------------------------------------ */

struct runner {
  const struct options *o;
  uv_loop_t loop;
  cq_pool *pool;
  cq_uv *adapter;
  bool adapter_closing; /* cq_uv_close() called: see release_job() */
  uv_signal_t signals[RUNNER_STOP_SIGNALS]; /* SIGINT, SIGTERM, SIGHUP */
  uv_timer_t progress_timer;
  uv_timer_t group_timer; /* polls the groups of jobs whose shell exited */
  uv_timer_t exit_watch;  /* finds shell exits that SIGCHLD did not bring */
  const char *gpu_pool;   /* the device pool behind CUDA_VISIBLE_DEVICES and
                             CRONOQ_GPU_FRACTION, or NULL when there is none */
  char *default_request;  /* for jobs naming nothing, owned */
  bool progress;          /* a live progress line on stderr */
  bool progress_shown;    /* a progress line is on screen */
  struct job **jobs;
  size_t n_jobs, jobs_cap;
  struct job *running_list; /* jobs RUNNING, for the group poll */
  /* Fleet pools: -j is this runner's own limit, not the namespace's (the
   * jobs that ask the default request take a slot before they queue on
   * the pool); 0: none. */
  int64_t local_jobs, local_used;
  struct job *local_head, *local_tail; /* waiting for a slot of them */
  /* --delay: granted jobs wait their turn to start, in grant order. */
  uv_timer_t delay_timer;
  struct job *delay_head, *delay_tail;
  uint64_t next_start_ns; /* no job starts before (uv_hrtime()) */
  /* -k: the first job whose output is not all printed (an index). */
  size_t order_next;
  /* Template arguments: the job being gathered (-n, -X), how many
   * records a job takes, the --colsep regex (a regex_t, args.c's). */
  struct job_args pending;
  size_t group_records;
  int arg_words;    /* words of the template with a value's placeholder */
  int marked_words; /* with any placeholder; none: the values appended */
  void *colsep;
  bool *slots; /* slots[i]: slot i + 1 is taken */
  size_t n_slots;
  char **env;      /* children's environment: ours, then n_env_own slots */
  size_t env_slot; /* index of the first slot */
  size_t n_env_own;
  size_t waiting, running, requeuing, lingering;
  size_t finished, failed, skipped, not_started;
  bool started;      /* the loop runs: new jobs are submitted as read */
  bool input_open;   /* --follow: more jobs may come */
  bool done;         /* every job accounted for; handles closing */
  bool stopping;     /* no more jobs start: interrupted or halted */
  int interrupted;   /* the signal that interrupted the run, or 0 */
  bool halted;       /* --halt stopped the run */
  uint64_t start_ns; /* uv_hrtime() when the run began */
  uint64_t backfilled, late_heads; /* from the pool's stats, at the end */
  cq_resource_stats *snapshot;     /* pool_snapshot()'s room */
  size_t snapshot_cap;
  /* --resume: the sequence numbers to skip (sorted), from the joblog. */
  size_t *resume_skip;
  size_t n_resume_skip;
  FILE *joblog;
  FILE *json;
  /* --follow: the input stream. */
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
  } input;
  int input_fd;
  bool input_handle;
  struct strbuf input_buf; /* a line not yet complete */
  size_t input_line;
};

/* pool.c: the pool from the options: every resource, the jobs budget, and
 * backfill on. The one place a pool is opened; see its comment. Returns 0,
 * or 2 after printing why. */
int pool_open(struct runner *r, const struct options *o);
/* pool.c: a snapshot of every resource, in r->snapshot; returns how many
 * it holds (0 when it failed). The room grows when the pool has gained
 * resources: on a fleet pool another process may declare some at any
 * time, and one in the namespace's order before the runner's own would
 * otherwise push them out. */
size_t pool_snapshot(struct runner *r);
/* pool.c: on a fleet pool, one line on stderr: which limits are this
 * runner's own and which the namespace's. */
void pool_say_limits(struct runner *r, const struct options *o);

/* run.c */
/* Set up the loop; then job_submit() starts jobs as they are added.
 * Returns 0, or -1 (printed). */
int runner_start(struct runner *r);
/* Submit a job that was added (WAITING) or count one that will not run. */
void job_submit(struct job *job);
/* No more input: the run may end once the jobs are done. */
void runner_input_done(struct runner *r);
/* Run the loop until every job is accounted for. Returns 0, or 1 when the
 * loop did not close cleanly (a bug, printed). */
int runner_wait(struct runner *r);
bool job_failed(const struct job *job);

/* input.c: read the jobs: all of the input now, or with --follow as it
 * comes, on the loop: input_follow_open() before runner_start() (-1: the
 * input is a regular file, to read whole), input_follow_start() after.
 * They return 0, or 2 after printing why. */
int input_read_all(struct runner *r);
/* Each line of the file at `path` (NULL or "-": standard input) to
 * `each`, which owns it. Returns 0, or 2 after printing why. */
int input_lines(const char *path, void (*each)(void *ctx, char *line),
                void *ctx);
int input_follow_open(struct runner *r);
int input_follow_start(struct runner *r);
/* Stop reading (the run is stopped, or the input ended). */
void input_close(struct runner *r);

/* args.c: a template's arguments, from its input sources to jobs: every
 * combination of the sources (the linked ones zipped), each value split by
 * --colsep, and -n or -X records per job. args_init() first (0, or 2 after
 * printing why); then args_read_all() reads every source whole and makes
 * the jobs, or, for one source read as it comes, args_value() takes each
 * value and args_end() makes a job of what is left. */
int args_init(struct runner *r);
int args_read_all(struct runner *r);
bool args_whole(const struct options *o); /* sources must be read whole */
void args_value(struct runner *r, char *value);
void args_end(struct runner *r);
void args_free(struct runner *r);

/* output.c: the console. Every byte the runner writes to its stdout and
 * stderr goes through here, so that none glues onto the progress line. */
void console_write(struct runner *r, int fd, const char *s, size_t n);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void console_msg(struct runner *r, const char *fmt, ...);
/* A job's message, prefixed with "cronoq-run: <label>: ". */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void job_msg(const struct job *job, const char *fmt, ...);
/* The attempt's output: set up its stdio for uv_spawn (stdio[1], [2]);
 * start reading after the spawn; print and close it at the end. Return 0
 * or a uv error. */
int output_prepare(struct job *job, uv_stdio_container_t *stdio);
int output_start(struct job *job);
void output_finish(struct job *job, uv_close_cb closed);
/* Files of --results opened for the attempt, closed by the caller. */
void output_close_files(uv_stdio_container_t *stdio);
/* -k: print the output of the jobs whose turn has come, in input order.
 * Called when a job's outcome is final and when its output is all read. */
void output_in_order(struct runner *r);

/* report.c */
void progress_draw(struct runner *r);
void progress_clear(struct runner *r);
void report_table(struct runner *r);
void report_json(const struct runner *r, FILE *out);

/* joblog.c */
/* Open the joblog (appending with --resume) and read what to skip.
 * Returns 0, or 2 after printing why. */
int joblog_open(struct runner *r);
/* Append the job's final attempt. */
void joblog_write(struct runner *r, const struct job *job);
bool joblog_skips(const struct runner *r, size_t seq);

#endif /* CRONOQ_RUNNER_H */

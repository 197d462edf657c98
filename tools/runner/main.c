/*
 * cronoq-run: run jobs, each once the resources it names are granted, as
 * many at once as the resources allow.
 *
 *   cronoq-run --resources gpu=auto,warehouse-db=10 jobs.txt
 *   cronoq-run -j 4 gzip {} ::: *.log
 *
 * This file puts the pieces together: the options (options.c), the pool
 * (pool.c), the joblog (joblog.c), the input (input.c) and a template's
 * arguments (args.c), the run (run.c), the report (report.c); or, for
 * --dry-run, prints the commands instead of the run. It turns the outcome
 * into the exit status:
 * 0 every job succeeded, 1 a job failed or could not run, 2 a usage, spec
 * or input error (nothing ran), 3 --halt stopped the run, 128+N after
 * signal N (SIGINT: 130).
 */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Set up everything that can fail before a job runs. Returns -1 to go on,
 * or the exit status of a failure (the reason printed). */
static int prepare(struct runner *r, const struct options *o, bool *follow) {
  int status = pool_open(r, o);
  if (status != 0)
    return status;
  if ((status = args_init(r)) != 0)
    return status;
  /* A dry run writes nothing but the commands (it reads the joblog). */
  if ((status = joblog_open(r)) != 0)
    return status;
  if (!o->dry_run && o->json != NULL && strcmp(o->json, "-") != 0 &&
      (r->json = fopen(o->json, "w")) == NULL) {
    fprintf(stderr, "cronoq-run: --json %s: %s\n", o->json, strerror(errno));
    return 2;
  }
  if (!o->dry_run && o->results != NULL && mkdir(o->results, 0777) != 0 &&
      errno != EEXIST) {
    fprintf(stderr, "cronoq-run: --results %s: %s\n", o->results,
            strerror(errno));
    return 2;
  }
  if (!o->dry_run)
    pool_say_limits(r, o);
  /* A progress line only where nothing else writes to the terminal behind
   * the runner's back (ungrouped output does). */
  r->progress =
      o->progress == 1 ||
      (o->progress == -1 && o->output != OUTPUT_UNGROUPED && isatty(2));
  *follow = false;
  bool words = o->template_words != NULL && o->n_sources == 1 &&
               o->sources[0].path == NULL; /* nothing to wait for */
  if (o->follow && !o->dry_run && !words) {
    status = input_follow_open(r);
    if (status == 0)
      *follow = true;
    else if (status != -1)
      return status;
  }
  if (!*follow && (status = input_read_all(r)) != 0)
    return status;
  return -1;
}

/* --dry-run: each job's command, as it would start with -j 1 ({%} is 1);
 * none runs. Status 1 when a line could not be parsed. */
static int dry_run(struct runner *r) {
  int status = 0;
  for (size_t i = 0; i < r->n_jobs; i++) {
    struct job *job = r->jobs[i];
    if (job->state == JOB_PARSE_ERROR) {
      status = 1; /* reported as it was read */
      continue;
    }
    if (job->state == JOB_SKIPPED)
      continue;
    job->slot = 1;
    char *command = job_command(job);
    if (command == NULL) {
      fprintf(stderr, "cronoq-run: out of memory\n");
      return 1;
    }
    printf("%s\n", command);
    free(command);
  }
  return status;
}

int main(int argc, char **argv) {
  /* A reader of our output that went away (`| head`, a closed ssh session)
   * must not kill the runner while its jobs run in groups of their own:
   * writes then fail with EPIPE, which the runner ignores. The children
   * get the default back (libuv resets every disposition in the child), so
   * a job in a pipeline still stops on SIGPIPE as it would in a shell. */
  struct sigaction ignore;
  memset(&ignore, 0, sizeof(ignore));
  ignore.sa_handler = SIG_IGN;
  (void)sigaction(SIGPIPE, &ignore, NULL);

  struct options o;
  int status = options_parse(argc, argv, &o);
  if (status >= 0)
    return status;

  struct runner r;
  memset(&r, 0, sizeof(r));
  r.o = &o;
  bool follow;
  status = prepare(&r, &o, &follow);
  if (status < 0 && o.dry_run) {
    status = dry_run(&r);
  } else if (status < 0) {
    if (runner_start(&r) != 0) {
      status = 2;
    } else {
      if (follow && input_follow_start(&r) != 0)
        input_close(&r);
      if (!follow || !r.input_handle)
        runner_input_done(&r);
      int rc = runner_wait(&r);
      if (o.summary != SUMMARY_NONE)
        report_table(&r);
      if (o.json != NULL)
        report_json(&r, r.json != NULL ? r.json : stdout);
      if (r.interrupted != 0)
        status = 128 + r.interrupted;
      else if (r.halted)
        status = 3;
      else
        status = (r.failed > 0 || rc != 0) ? 1 : 0;
    }
  }
  fflush(stdout);
  if (r.json != NULL && fclose(r.json) != 0) {
    fprintf(stderr, "cronoq-run: --json %s: %s\n", o.json, strerror(errno));
    if (status == 0)
      status = 1;
  }
  if (r.joblog != NULL)
    fclose(r.joblog);
  /* Every grant was released as its job ended: the pool must be idle. */
  int rc = cq_pool_destroy(r.pool);
  if (rc != 0) {
    fprintf(stderr, "cronoq-run: internal error: pool still in use: %s\n",
            cq_strerror(rc));
    if (status == 0)
      status = 1;
  }
  jobs_free(&r);
  args_free(&r);
  free(r.env);
  free(r.snapshot);
  free(r.slots);
  free(r.default_request);
  free(r.resume_skip);
  return status;
}

/*
 * The joblog: one line per job that ran, written when its last attempt
 * ends, in the tab-separated format GNU parallel writes and reads:
 *
 *   Seq Host Starttime JobRuntime Send Receive Exitval Signal Command Grant
 *
 * Seq is the job's number ({#}); Host is ":" (this host); Starttime is
 * seconds since the epoch and JobRuntime seconds, both with three
 * decimals; Send and Receive are 0 (nothing is transferred); Exitval is
 * the exit status, or -1 when a signal ended the job; Signal is that
 * signal (15 or 9 for a timeout), else 0. The first nine columns are GNU
 * parallel's own, so tools that read its joblog read this one; Grant, what
 * the job held (as CRONOQ_GRANT says), comes after. Tabs and newlines of a
 * command are written as blanks, so that every job is one line of ten
 * fields.
 *
 * Each line is flushed as it is written: a runner that is killed leaves
 * every finished job in the log, which is what --resume goes by. Without
 * --resume the joblog is started afresh; with it the runner appends, and
 * skips the jobs whose Seq the log has (--resume), or has with Exitval 0
 * and Signal 0 (--resume-failed: the failed ones run again).
 */
#include "runner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char header[] = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\t"
                             "Exitval\tSignal\tCommand\tGrant\n";

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Read the sequence numbers to skip from an existing joblog. */
static int read_skips(struct runner *r, FILE *in) {
  char *line = NULL;
  size_t cap = 0, n = 0, room = 0;
  size_t *skip = NULL;
  while (getline(&line, &cap, in) >= 0) {
    char *end;
    errno = 0;
    unsigned long long seq = strtoull(line, &end, 10);
    if (end == line || *end != '\t' || errno != 0)
      continue; /* the header, or not a job's line */
    /* Exitval and Signal are the 7th and 8th fields: after the 6th and
     * the 7th tab (`end` is at the first). */
    char *tab = end;
    long long exitval = -1, signum = -1;
    for (int i = 2; i <= 7 && tab != NULL; i++) {
      tab = strchr(tab + 1, '\t');
      if (tab != NULL && i == 6)
        exitval = strtoll(tab + 1, NULL, 10);
      if (tab != NULL && i == 7)
        signum = strtoll(tab + 1, NULL, 10);
    }
    if (r->o->resume == RESUME_FAILED && (exitval != 0 || signum != 0))
      continue;
    if (n == room) {
      room = room > 0 ? 2 * room : 64;
      size_t *more = realloc(skip, room * sizeof(*more));
      if (more == NULL) {
        free(skip);
        free(line);
        return -1;
      }
      skip = more;
    }
    skip[n++] = (size_t)seq;
  }
  free(line);
  if (n > 0)
    qsort(skip, n, sizeof(*skip), cmp_size);
  r->resume_skip = skip;
  r->n_resume_skip = n;
  return 0;
}

int joblog_open(struct runner *r) {
  const char *path = r->o->joblog;
  if (path == NULL)
    return 0;
  if (r->o->resume != RESUME_NONE) {
    FILE *in = fopen(path, "r");
    if (in == NULL && errno != ENOENT) {
      fprintf(stderr, "cronoq-run: --joblog %s: %s\n", path, strerror(errno));
      return 2;
    }
    if (in != NULL) {
      int rc = read_skips(r, in);
      fclose(in);
      if (rc != 0) {
        fprintf(stderr, "cronoq-run: --joblog %s: out of memory\n", path);
        return 2;
      }
    }
  }
  if (r->o->dry_run)
    return 0; /* it only skips what the joblog has */
  r->joblog = fopen(path, r->o->resume != RESUME_NONE ? "a" : "w");
  if (r->joblog == NULL) {
    fprintf(stderr, "cronoq-run: --joblog %s: %s\n", path, strerror(errno));
    return 2;
  }
  if (fseek(r->joblog, 0, SEEK_END) == 0 && ftell(r->joblog) == 0)
    fputs(header, r->joblog);
  fflush(r->joblog);
  return 0;
}

bool joblog_skips(const struct runner *r, size_t seq) {
  return r->n_resume_skip > 0 && bsearch(&seq, r->resume_skip, r->n_resume_skip,
                                         sizeof(size_t), cmp_size) != NULL;
}

/* A field written as one: tabs and newlines as blanks. */
static void put_field(FILE *out, const char *s) {
  for (; *s != '\0'; s++)
    fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, out);
}

void joblog_write(struct runner *r, const struct job *job) {
  if (r->joblog == NULL ||
      (job->state != JOB_EXITED && job->state != JOB_UNKILLABLE))
    return;
  bool signalled = job->term_signal != 0 || job->state == JOB_UNKILLABLE;
  double run_s = (double)(job->ended_ns - job->granted_ns) / 1e9;
  fprintf(r->joblog, "%zu\t:\t%.3f\t%.3f\t0\t0\t%lld\t%d\t", job->seq,
          job->start_wall_s, run_s,
          signalled ? -1LL : (long long)job->exit_code,
          job->state == JOB_UNKILLABLE ? 9 : job->term_signal);
  put_field(r->joblog, job->command != NULL ? job->command : "");
  fputc('\t', r->joblog);
  put_field(r->joblog, job->grant_text != NULL ? job->grant_text : "");
  fputc('\n', r->joblog);
  fflush(r->joblog);
}

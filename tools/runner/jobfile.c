/*
 * The job file: one job per line,
 *
 *   REQUEST-SPEC -- COMMAND
 *
 * The separator is the first "--" that starts the line or follows a blank,
 * and is followed by a blank or the end of the line. A request spec cannot
 * contain such a "--" (names and amounts have no blanks), so the first one
 * ends the spec and the command may contain its own ("python x.py -- -v").
 * An empty spec ("-- make test") asks for nothing. Blank lines and lines
 * whose first non-blank character is '#' are skipped.
 *
 * All lines are read before any is parsed: a parsed request (cq_req) is
 * caller-owned storage that must not move once it is submitted, and the
 * job array stops growing once reading is done.
 */
#include "runner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static char *find_separator(char *line) {
  for (char *p = line; (p = strstr(p, "--")) != NULL; p++)
    if ((p == line || is_blank(p[-1])) && (p[2] == '\0' || is_blank(p[2])))
      return p;
  return NULL;
}

static void parse_failed(struct job *job, const char *why) {
  job->state = JOB_PARSE_ERROR;
  job->error = strdup(why); /* NULL on failure: the message is printed */
  fprintf(stderr, "cronoq-run: line %zu: %s\n", job->line, why);
}

/* The library's messages point at a column of the spec, which starts at
 * column 1 of the line, so they point at the line as written. */
static void parse_job(struct job *job, cq_pool *pool) {
  char *sep = find_separator(job->text);
  if (sep == NULL) {
    parse_failed(job, "expected \" -- \" between the request spec and the "
                      "command");
    return;
  }
  char *command = sep + 2;
  while (is_blank(*command))
    command++;
  if (*command == '\0') {
    parse_failed(job, "no command after \"--\"");
    return;
  }
  *sep = '\0';
  job->spec = job->text;
  job->command = command;
  if (cq_req_init(&job->req, pool) != 0 ||
      cq_req_parse(&job->req, job->spec) != 0) {
    parse_failed(job, cq_req_error(&job->req));
    return;
  }
  job->state = JOB_WAITING;
}

/* A line to skip: blank, or a comment. */
static bool skipped(const char *line) {
  while (is_blank(*line))
    line++;
  return *line == '\0' || *line == '#';
}

int jobs_read(FILE *in, const char *name, cq_pool *pool, struct job **jobs,
              size_t *n_jobs) {
  struct job *list = NULL;
  size_t n = 0, cap = 0, line = 0;
  char *buf = NULL;
  size_t buf_cap = 0;
  ssize_t got;
  while ((got = getline(&buf, &buf_cap, in)) >= 0) {
    line++;
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
      buf[--got] = '\0';
    if (skipped(buf))
      continue;
    if (n == cap) {
      size_t grown = cap > 0 ? 2 * cap : 16;
      struct job *more = realloc(list, grown * sizeof(*more));
      if (more == NULL)
        goto nomem;
      list = more;
      cap = grown;
    }
    memset(&list[n], 0, sizeof(list[n]));
    list[n].line = line;
    list[n].text = buf; /* the job keeps getline()'s buffer */
    n++;
    buf = NULL;
    buf_cap = 0;
  }
  if (ferror(in)) {
    fprintf(stderr, "cronoq-run: reading %s: %s\n", name, strerror(errno));
    free(buf);
    jobs_free(list, n);
    return -1;
  }
  free(buf);
  for (size_t i = 0; i < n; i++)
    parse_job(&list[i], pool);
  *jobs = list;
  *n_jobs = n;
  return 0;

nomem:
  fprintf(stderr, "cronoq-run: reading %s: out of memory\n", name);
  free(buf);
  jobs_free(list, n);
  return -1;
}

void jobs_free(struct job *jobs, size_t n_jobs) {
  for (size_t i = 0; i < n_jobs; i++) {
    free(jobs[i].text);
    free(jobs[i].error);
    free(jobs[i].visible_entry);
    free(jobs[i].grant_entry);
  }
  free(jobs);
}

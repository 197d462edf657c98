/*
 * The console and the jobs' output.
 *
 * Every byte the runner writes to its stdout and stderr goes through
 * console_write(), which first clears the progress line if one is shown:
 * job output and messages then start at the beginning of a clean line and
 * never glue onto it; the next tick draws it again below them. Write
 * errors are ignored (a reader that went away must not stop the run: the
 * runner ignores SIGPIPE, see main.c).
 *
 * A job's stdout and stderr are read from pipes (group and line modes),
 * so that what the runner prints is whole:
 * - group (the default): each stream is kept until the job ends, then
 *   printed at once, stdout first; a job that writes more than
 *   RUNNER_GROUP_MAX has its whole lines printed early, so memory stays
 *   bounded;
 * - line: whole lines are printed as they come; a last line without a
 *   newline gets one at the end;
 * - with --tag every line printed starts with the job's label and a tab;
 * - with -k (--keep-order) only the first job whose output is not all
 *   printed prints; the others hold what they would print, in memory, for
 *   their turn, so that the output comes in input order however the jobs
 *   end (in line mode the first job's lines still come as they come).
 * Ungrouped, the jobs write to the runner's stdout and stderr themselves;
 * with --results each stream goes to a file of its own.
 *
 * A pipe is drained when the attempt ends, that is when its whole process
 * group is gone, and closed then: a process that left the group and still
 * holds the pipe cannot hold the job open.
 */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return; /* the reader is gone: nothing to do about it */
    s += w;
    n -= (size_t)w;
  }
}

void console_write(struct runner *r, int fd, const char *s, size_t n) {
  progress_clear(r);
  write_all(fd, s, n);
}

static void console_vmsg(struct runner *r, const char *prefix, const char *fmt,
                         va_list ap) {
  struct strbuf sb = {0};
  sb_puts(&sb, prefix);
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n > 0) {
    char *text = malloc((size_t)n + 1);
    if (text != NULL) {
      vsnprintf(text, (size_t)n + 1, fmt, ap);
      sb_puts(&sb, text);
    }
    free(text);
  }
  if (sb.len == 0 || sb.s[sb.len - 1] != '\n')
    sb_puts(&sb, "\n");
  char *line = sb_take(&sb);
  if (line != NULL)
    console_write(r, 2, line, strlen(line));
  free(line);
}

void console_msg(struct runner *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  console_vmsg(r, "", fmt, ap);
  va_end(ap);
}

void job_msg(const struct job *job, const char *fmt, ...) {
  char prefix[160];
  if (job->line > 0 && job->name != NULL)
    snprintf(prefix, sizeof(prefix), "cronoq-run: line %zu (%s): ", job->line,
             job->name);
  else if (job->line > 0)
    snprintf(prefix, sizeof(prefix), "cronoq-run: line %zu: ", job->line);
  else
    snprintf(prefix, sizeof(prefix), "cronoq-run: job %zu (%.80s): ", job->seq,
             job->arg);
  va_list ap;
  va_start(ap, fmt);
  console_vmsg(job->runner, prefix, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Capturing                                                                 */
/* ------------------------------------------------------------------------ */

static struct job *job_of(const struct capture *c) { return c->job; }

/* Print s[0..n) of the stream, or with -k hold it until the job's turn. */
static void put(struct capture *c, const char *s, size_t n) {
  struct job *job = job_of(c);
  struct runner *r = job->runner;
  if (!r->o->keep_order || job->seq - 1 == r->order_next)
    console_write(r, c->fd, s, n);
  else
    sb_putn(c == &job->out ? &job->held_out : &job->held_err, s, n);
}

void output_in_order(struct runner *r) {
  if (!r->o->keep_order)
    return;
  for (; r->order_next < r->n_jobs; r->order_next++) {
    struct job *job = r->jobs[r->order_next];
    /* Its turn has come: what it held, now; the rest as it comes. */
    if (job->held_out.len > 0)
      console_write(r, job->out.fd, job->held_out.s, job->held_out.len);
    if (job->held_err.len > 0)
      console_write(r, job->err.fd, job->held_err.s, job->held_err.len);
    sb_free(&job->held_out);
    sb_free(&job->held_err);
    if (!job->final || job->out.open || job->err.open)
      return;
  }
}

/* Print s[0..n), lines with their label when --tag asks; `final` adds a
 * newline to a last line without one (line mode, tags). */
static void emit(struct capture *c, const char *s, size_t n, bool final) {
  struct job *job = job_of(c);
  struct runner *r = job->runner;
  if (n == 0)
    return;
  bool newline =
      s[n - 1] == '\n' || (final && !r->o->tag && r->o->output == OUTPUT_GROUP);
  if (!r->o->tag) {
    put(c, s, n);
    if (!newline)
      put(c, "\n", 1);
    return;
  }
  char buf[128];
  const char *label = job_label(job, buf, sizeof(buf));
  struct strbuf sb = {0};
  for (size_t at = 0; at < n;) {
    const char *end = memchr(s + at, '\n', n - at);
    size_t len = end != NULL ? (size_t)(end - (s + at)) : n - at;
    sb_printf(&sb, "%s\t", label);
    sb_putn(&sb, s + at, len);
    sb_puts(&sb, "\n");
    at += len + 1;
  }
  char *text = sb_take(&sb);
  if (text != NULL)
    put(c, text, strlen(text));
  free(text);
}

/* Print the whole lines held, keep the rest. */
static void emit_lines(struct capture *c) {
  const char *last = NULL;
  for (size_t i = c->buf.len; i > 0; i--)
    if (c->buf.s[i - 1] == '\n') {
      last = c->buf.s + i;
      break;
    }
  if (last == NULL)
    return;
  size_t n = (size_t)(last - c->buf.s);
  emit(c, c->buf.s, n, false);
  sb_consume(&c->buf, n);
}

static void take(struct capture *c, const char *s, size_t n) {
  struct runner *r = job_of(c)->runner;
  sb_putn(&c->buf, s, n);
  if (c->buf.failed) { /* out of memory: print what there is */
    c->buf.failed = false;
    emit(c, s, n, false);
    return;
  }
  if (r->o->output == OUTPUT_LINE || c->buf.len > RUNNER_GROUP_MAX)
    emit_lines(c);
}

/* One buffer for every read: each is consumed before the next. */
static char read_buf[65536];

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(read_buf, sizeof(read_buf));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct capture *c = stream->data;
  if (nread > 0)
    take(c, buf->base, (size_t)nread);
  else if (nread < 0)
    (void)uv_read_stop(stream); /* end of file, or an error: done */
}

static int open_result(const struct job *job, const char *name, int *fd) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%zu", job->runner->o->results, job->seq);
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return -errno;
  snprintf(path, sizeof(path), "%s/%zu/%s", job->runner->o->results, job->seq,
           name);
  *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  return *fd < 0 ? -errno : 0;
}

int output_prepare(struct job *job, uv_stdio_container_t *stdio) {
  struct runner *r = job->runner;
  const struct options *o = r->o;
  /* With --json -, the document is stdout's alone. */
  int out_fd = o->json != NULL && strcmp(o->json, "-") == 0 ? 2 : 1;
  stdio[1].flags = stdio[2].flags = UV_IGNORE;
  switch (o->output) {
  case OUTPUT_UNGROUPED:
    stdio[1].flags = stdio[2].flags = UV_INHERIT_FD;
    stdio[1].data.fd = out_fd;
    stdio[2].data.fd = 2;
    return 0;
  case OUTPUT_RESULTS: {
    int rc = open_result(job, "stdout", &stdio[1].data.fd);
    if (rc == 0) {
      stdio[1].flags = UV_INHERIT_FD;
      rc = open_result(job, "stderr", &stdio[2].data.fd);
      if (rc == 0)
        stdio[2].flags = UV_INHERIT_FD;
    }
    if (rc != 0)
      output_close_files(stdio);
    return rc;
  }
  case OUTPUT_GROUP:
  case OUTPUT_LINE:
    break;
  }
  struct capture *caps[2] = {&job->out, &job->err};
  for (int i = 0; i < 2; i++) {
    struct capture *c = caps[i];
    int rc = uv_pipe_init(&r->loop, &c->pipe, 0);
    if (rc != 0)
      return rc; /* uv_pipe_init cannot fail on unix: nothing to undo */
    c->pipe.data = c;
    c->job = job;
    c->fd = i == 0 ? out_fd : 2;
    c->open = true;
    job->open_handles++;
    stdio[i + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[i + 1].data.stream = (uv_stream_t *)&c->pipe;
  }
  return 0;
}

void output_close_files(uv_stdio_container_t *stdio) {
  for (int i = 1; i <= 2; i++)
    if (stdio[i].flags == UV_INHERIT_FD && stdio[i].data.fd > 2) {
      close(stdio[i].data.fd);
      stdio[i].flags = UV_IGNORE;
    }
}

int output_start(struct job *job) {
  struct capture *caps[2] = {&job->out, &job->err};
  for (int i = 0; i < 2; i++)
    if (caps[i]->open) {
      int rc = uv_read_start((uv_stream_t *)&caps[i]->pipe, on_alloc, on_read);
      if (rc != 0)
        return rc;
    }
  return 0;
}

void output_finish(struct job *job, uv_close_cb closed) {
  struct capture *caps[2] = {&job->out, &job->err};
  for (int i = 0; i < 2; i++) {
    struct capture *c = caps[i];
    if (!c->open)
      continue;
    /* What the group wrote before it was gone is in the pipe: read it
     * without waiting (libuv made the descriptor non-blocking). */
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0) {
      ssize_t n;
      while ((n = read(fd, read_buf, sizeof(read_buf))) > 0 ||
             (n < 0 && errno == EINTR))
        if (n > 0)
          take(c, read_buf, (size_t)n);
    }
    (void)uv_read_stop((uv_stream_t *)&c->pipe);
    uv_close((uv_handle_t *)&c->pipe, closed);
    c->open = false;
    emit(c, c->buf.s, c->buf.len, true);
    sb_free(&c->buf);
  }
  output_in_order(job->runner);
}

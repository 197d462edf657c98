/*
 * The input: job-file lines, or a template's values (args.c makes jobs of
 * them): one per line, or the words after ":::" on the command line.
 *
 * Without --follow the whole input is read before the run starts, so that
 * the number of jobs is known (for the progress line's ETA and --halt
 * fail=P%). With --follow, a pipe, FIFO or terminal is read on the loop and
 * each line becomes a job the moment it is complete, so another process
 * can add jobs while the runner runs; the input ends at end of file (every
 * writer of a FIFO has closed it), or when the run is stopped. A regular
 * file has nothing to wait for and is read whole either way.
 */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where the lines come from, for a job file or a template's one source
 * read as it comes: NULL for standard input. */
static const char *source_path(const struct options *o) {
  const char *path = o->template_words == NULL ? o->jobfile
                     : o->n_sources > 0        ? o->sources[0].path
                                               : NULL;
  return path != NULL && strcmp(path, "-") != 0 ? path : NULL;
}

/* One line read (owned from now on): a job, submitted at once when the
 * run has started, or a template's value. */
static void add_line(struct runner *r, char *text) {
  r->input_line++;
  if (r->o->template_words != NULL) {
    args_value(r, text);
    return;
  }
  bool skipped;
  struct job *job = job_add(r, text, r->input_line, &skipped);
  if (job != NULL && r->started)
    job_submit(job);
}

static void add_line_cb(void *ctx, char *line) { add_line(ctx, line); }

int input_lines(const char *path, void (*each)(void *ctx, char *line),
                void *ctx) {
  if (path != NULL && strcmp(path, "-") == 0)
    path = NULL;
  FILE *in = path != NULL ? fopen(path, "r") : stdin;
  if (in == NULL) {
    fprintf(stderr, "cronoq-run: %s: %s\n", path, strerror(errno));
    return 2;
  }
  char *buf = NULL;
  size_t cap = 0;
  ssize_t got;
  int status = 0;
  while ((got = getline(&buf, &cap, in)) >= 0) {
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
      buf[--got] = '\0';
    each(ctx, buf); /* it keeps getline()'s buffer */
    buf = NULL;
    cap = 0;
  }
  if (ferror(in)) {
    fprintf(stderr, "cronoq-run: reading %s: %s\n",
            path != NULL ? path : "standard input", strerror(errno));
    status = 2;
  }
  free(buf);
  if (path != NULL)
    fclose(in);
  return status;
}

int input_read_all(struct runner *r) {
  const struct options *o = r->o;
  if (o->template_words != NULL && args_whole(o))
    return args_read_all(r);
  if (o->template_words != NULL && o->n_sources == 1 &&
      o->sources[0].path == NULL) {
    const struct arg_source *src = &o->sources[0];
    for (int i = 0; i < src->n_words; i++) {
      char *arg = strdup(src->words[i]);
      if (arg == NULL) {
        fprintf(stderr, "cronoq-run: out of memory\n");
        return 2;
      }
      args_value(r, arg);
    }
    args_end(r);
    return 0;
  }
  const char *path = source_path(o);
  if (path != NULL && o->template_words == NULL && access(path, R_OK) != 0 &&
      errno == ENOENT) {
    /* One word is a job file; a command needs an argument or a marker. */
    fprintf(stderr,
            "cronoq-run: %s: %s (a job file; to run a command once per "
            "argument, write '%s {}' or add ::: ARG...)\n",
            path, strerror(errno), path);
    return 2;
  }
  int status = input_lines(path, add_line_cb, r);
  if (o->template_words != NULL)
    args_end(r);
  return status;
}

/* ------------------------------------------------------------------------ */
/* --follow                                                                  */
/* ------------------------------------------------------------------------ */

/* Each complete line of what was read, as a job. */
static void take_lines(struct runner *r, bool at_end) {
  struct strbuf *b = &r->input_buf;
  size_t at = 0;
  while (b->s != NULL && at < b->len) {
    char *nl = memchr(b->s + at, '\n', b->len - at);
    if (nl == NULL && !at_end)
      break;
    size_t n = nl != NULL ? (size_t)(nl - (b->s + at)) : b->len - at;
    size_t next = at + n + (nl != NULL);
    while (n > 0 && b->s[at + n - 1] == '\r')
      n--;
    char *text = strndup(b->s + at, n);
    at = next;
    if (text == NULL) {
      console_msg(r, "cronoq-run: out of memory");
      continue;
    }
    add_line(r, text);
    if (r->stopping) /* --halt, from within */
      break;
  }
  sb_consume(b, at);
}

static void on_input_alloc(uv_handle_t *handle, size_t suggested,
                           uv_buf_t *buf) {
  static char space[65536];
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(space, sizeof(space));
}

static void on_input(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct runner *r = stream->data;
  if (nread > 0) {
    sb_putn(&r->input_buf, buf->base, (size_t)nread);
    if (r->input_buf.failed) {
      console_msg(r, "cronoq-run: reading the input: out of memory");
      r->input_buf.failed = false;
    }
    take_lines(r, false);
  } else if (nread < 0) {
    if (nread != UV_EOF)
      console_msg(r, "cronoq-run: reading the input: %s",
                  uv_strerror((int)nread));
    take_lines(r, true);
    if (r->o->template_words != NULL)
      args_end(r);
    input_close(r);
    runner_input_done(r);
  }
}

int input_follow_open(struct runner *r) {
  const char *path = source_path(r->o);
  /* Before the run starts: the open of a FIFO waits for a writer, and a
   * signal meanwhile ends the runner, with nothing to stop yet. */
  int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : 0;
  if (fd < 0) {
    fprintf(stderr, "cronoq-run: %s: %s\n", path, strerror(errno));
    return 2;
  }
  uv_handle_type type = uv_guess_handle(fd);
  if (type != UV_TTY && type != UV_NAMED_PIPE) {
    /* A regular file: nothing arrives later; it is read whole. */
    if (path != NULL)
      close(fd);
    return -1;
  }
  r->input_fd = fd;
  return 0;
}

int input_follow_start(struct runner *r) {
  int fd = r->input_fd;
  int rc;
  if (uv_guess_handle(fd) == UV_TTY) {
    rc = uv_tty_init(&r->loop, &r->input.tty, fd, 1);
  } else {
    rc = uv_pipe_init(&r->loop, &r->input.pipe, 0);
    if (rc == 0 && (rc = uv_pipe_open(&r->input.pipe, fd)) != 0)
      uv_close((uv_handle_t *)&r->input.pipe, NULL);
  }
  if (rc != 0) {
    console_msg(r, "cronoq-run: reading the input: %s", uv_strerror(rc));
    return 2;
  }
  r->input.pipe.data = r; /* a handle's data is at the same place in both */
  r->input_handle = true;
  rc = uv_read_start((uv_stream_t *)&r->input.pipe, on_input_alloc, on_input);
  if (rc != 0) {
    console_msg(r, "cronoq-run: reading the input: %s", uv_strerror(rc));
    input_close(r);
    return 2;
  }
  return 0;
}

void input_close(struct runner *r) {
  if (!r->input_handle)
    return;
  r->input_handle = false;
  (void)uv_read_stop((uv_stream_t *)&r->input.pipe);
  uv_close((uv_handle_t *)&r->input.pipe, NULL);
  sb_free(&r->input_buf);
  r->input_open = false;
}

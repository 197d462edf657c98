/*
 * What the runner shows: the live progress line (stderr), the summary
 * table (stderr) and the JSON document (its own file).
 *
 * The progress line is drawn with a carriage return and erased before
 * anything else is written (see output.c), so job output and messages
 * never glue onto it. It says how long the run has taken, when it should
 * end (the mean time between job ends so far, times the jobs left), the
 * jobs by state and the use of each resource.
 *
 * The summary table lists the failed jobs by default and every job with
 * --summary full; the totals always; the JSON document always every job.
 *
 * Job commands are arbitrary bytes. The table cuts long ones at a UTF-8
 * character boundary, but never the devices column: GPU UUIDs differ only
 * near their end, and a cut list hides how many devices a job had. The
 * JSON document escapes control characters and replaces bytes that are
 * not valid UTF-8 with U+FFFD, so it always parses.
 */
#include "runner.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/ioctl.h>
#endif

/* Widest command shown in the table, in bytes. */
#define TABLE_COMMAND_MAX 60

/* ------------------------------------------------------------------------ */
/* Progress line                                                             */
/* ------------------------------------------------------------------------ */

static size_t terminal_width(void) {
#if defined(TIOCGWINSZ)
  struct winsize ws;
  if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
#endif
  return 80;
}

/* Use of each resource, from one snapshot: "gpu 1.5/4", "db 2/10".
 * Returns how many it wrote. */
static size_t put_resources(struct strbuf *sb, struct runner *r) {
  size_t count = pool_snapshot(r);
  for (size_t i = 0; i < count; i++) {
    const cq_resource_stats *st = &r->snapshot[i];
    sb_printf(sb, "%s %s ", i == 0 ? " |" : ",", st->name);
    if (st->kind == CQ_KIND_DEVICES) {
      sb_put_milli(sb, st->in_use);
      sb_puts(sb, "/");
      sb_put_milli(sb, st->capacity);
    } else {
      sb_printf(sb, "%lld/%lld", (long long)st->in_use,
                (long long)st->capacity);
    }
  }
  return count;
}

/* "1:05" or "2:03:07". */
static void put_clock(struct strbuf *sb, uint64_t seconds) {
  if (seconds >= 3600)
    sb_printf(sb, "%llu:%02llu:%02llu", (unsigned long long)(seconds / 3600),
              (unsigned long long)(seconds / 60 % 60),
              (unsigned long long)(seconds % 60));
  else
    sb_printf(sb, "%llu:%02llu", (unsigned long long)(seconds / 60),
              (unsigned long long)(seconds % 60));
}

void progress_draw(struct runner *r) {
  struct strbuf sb = {0};
  uint64_t elapsed_ns = uv_hrtime() - r->start_ns;
  sb_puts(&sb, "cronoq-run: ");
  put_clock(&sb, elapsed_ns / 1000000000u);
  sb_puts(&sb, " elapsed, ETA ");
  size_t left = r->n_jobs - r->finished;
  if (r->finished > 0 && left > 0)
    put_clock(&sb, (uint64_t)((double)elapsed_ns / 1e9 / (double)r->finished *
                              (double)left) +
                       1);
  else
    sb_puts(&sb, left == 0 && !r->input_open ? "0:00" : "-");
  sb_printf(&sb, " | %zu/%zu%s done, %zu running, %zu waiting", r->finished,
            r->n_jobs, r->input_open ? "+" : "", r->running,
            r->waiting + r->requeuing);
  if (r->failed > 0)
    sb_printf(&sb, ", %zu failed", r->failed);
  size_t shown = put_resources(&sb, r);
  if (r->local_jobs > 0) /* a fleet pool's -j, this runner's own */
    sb_printf(&sb, "%s -j %lld/%lld", shown > 0 ? "," : " |",
              (long long)r->local_used, (long long)r->local_jobs);
  char *line = sb_take(&sb);
  if (line == NULL)
    return;
  /* One column short of the width: a line that wraps cannot be redrawn
   * with a carriage return. The text is ASCII (names are). */
  size_t width = terminal_width();
  if (strlen(line) >= width)
    line[width - 1] = '\0';
  struct strbuf out = {0};
  sb_printf(&out, "\r%s\033[K", line);
  char *text = sb_take(&out);
  if (text != NULL && write(2, text, strlen(text)) > 0)
    r->progress_shown = true;
  free(text);
  free(line);
}

void progress_clear(struct runner *r) {
  if (!r->progress_shown)
    return;
  static const char erase[] = "\r\033[K";
  r->progress_shown = false;
  if (write(2, erase, sizeof(erase) - 1) < 0)
    return; /* the terminal is gone */
}

/* ------------------------------------------------------------------------ */
/* Outcomes                                                                  */
/* ------------------------------------------------------------------------ */

/* One word per outcome, for JSON. */
static const char *status_word(const struct job *job) {
  switch (job->state) {
  case JOB_EXITED:
    if (job->timed_out)
      return "timed_out";
    if (job->term_signal != 0)
      return "signal";
    return job->exit_code == 0 ? "ok" : "failed";
  case JOB_PARSE_ERROR:
    return "parse_error";
  case JOB_NEVER_FITS:
    return "never_fits";
  case JOB_NOT_STARTED:
    return "not_started";
  case JOB_SPAWN_FAILED:
    return "spawn_failed";
  case JOB_UNKILLABLE:
    return "unkillable";
  case JOB_SKIPPED:
    return "skipped";
  case JOB_WAITING:
    return "waiting";
  case JOB_RUNNING:
    return "running";
  }
  return "unknown";
}

/* What the job's line shows, for the table: "exit 0", "signal 9", and for
 * other outcomes their word, with blanks ("timed out", "never fits"). */
static const char *status_text(const struct job *job, char *buf, size_t len) {
  if (job->state == JOB_EXITED && !job->timed_out) {
    if (job->term_signal != 0)
      snprintf(buf, len, "signal %d", job->term_signal);
    else
      snprintf(buf, len, "exit %lld", (long long)job->exit_code);
    return buf;
  }
  snprintf(buf, len, "%s", status_word(job));
  for (char *p = buf; *p != '\0'; p++)
    if (*p == '_')
      *p = ' ';
  return buf;
}

/* Seconds the job waited for its last grant, and ran; < 0 where it has
 * none. */
static double wait_seconds(const struct job *job) {
  uint64_t until;
  switch (job->state) {
  case JOB_EXITED:
  case JOB_RUNNING:
  case JOB_SPAWN_FAILED:
  case JOB_UNKILLABLE:
    until = job->granted_ns;
    break;
  case JOB_NOT_STARTED:
    until = job->ended_ns; /* when the wait was given up */
    break;
  default:
    return -1; /* never submitted, refused, or skipped */
  }
  return (double)(until - job->submitted_ns) / 1e9;
}

static double run_seconds(const struct job *job) {
  if (job->state != JOB_EXITED && job->state != JOB_UNKILLABLE)
    return -1;
  return (double)(job->ended_ns - job->granted_ns) / 1e9;
}

/* The GPUs the job got, as its CUDA_VISIBLE_DEVICES said; "" if none. */
static const char *devices_of(const struct job *job) {
  return job->devices != NULL ? job->devices : "";
}

/* ------------------------------------------------------------------------ */
/* Summary table                                                             */
/* ------------------------------------------------------------------------ */

/* Bytes of `s` that fit `max`, not cutting a UTF-8 sequence. */
static size_t cut_at(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max)
    return n;
  while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
    max--;
  return max;
}

static void put_seconds(struct strbuf *sb, double s) {
  if (s < 0)
    sb_printf(sb, "  %8s", "-");
  else
    sb_printf(sb, "  %8.2f", s);
}

/* By default the table lists the failed jobs alone, so that it ends on
 * one screen whatever the number of jobs; --summary full lists all. */
static bool listed(const struct runner *r, const struct job *job) {
  return r->o->summary == SUMMARY_FULL ||
         (r->o->summary == SUMMARY_FAILED && job_failed(job));
}

/* The first column: the line of a job file, or the job's number. */
static size_t row_key(const struct job *job) {
  return job->line > 0 ? job->line : job->seq;
}

void report_table(struct runner *r) {
  const struct options *o = r->o;
  struct strbuf sb = {0};
  char buf[64];
  int key_w = 4, status_w = 6, devices_w = 7, name_w = 0;
  size_t rows = 0;
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = r->jobs[i];
    if (!listed(r, job))
      continue;
    rows++;
    int n = snprintf(buf, sizeof(buf), "%zu", row_key(job));
    key_w = n > key_w ? n : key_w;
    n = (int)strlen(status_text(job, buf, sizeof(buf)));
    status_w = n > status_w ? n : status_w;
    n = (int)strlen(devices_of(job));
    devices_w = n > devices_w ? n : devices_w;
    if (job->name != NULL) {
      n = (int)strlen(job->name);
      n = n > 4 ? n : 4; /* as wide as the header */
      name_w = n > name_w ? n : name_w;
    }
  }
  if (rows > 0) {
    sb_printf(&sb, "%*s  %-*s", key_w,
              o->template_words != NULL ? "job" : "line", status_w, "status");
    if (o->retries > 0)
      sb_puts(&sb, "  tries");
    sb_printf(&sb, "  %8s  %8s  %-*s", "wait_s", "run_s", devices_w, "devices");
    if (name_w > 0)
      sb_printf(&sb, "  %-*s", name_w, "name");
    sb_puts(&sb, "  command\n");
  }
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = r->jobs[i];
    if (!listed(r, job))
      continue;
    sb_printf(&sb, "%*zu  %-*s", key_w, row_key(job), status_w,
              status_text(job, buf, sizeof(buf)));
    if (o->retries > 0)
      sb_printf(&sb, "  %5u", job->attempts);
    put_seconds(&sb, wait_seconds(job));
    put_seconds(&sb, run_seconds(job));
    const char *devices = devices_of(job);
    sb_printf(&sb, "  %-*s", devices_w, *devices != '\0' ? devices : "-");
    if (name_w > 0)
      sb_printf(&sb, "  %-*s", name_w, job->name != NULL ? job->name : "-");
    const char *command = job->command != NULL ? job->command : job->text;
    size_t cn = cut_at(command, TABLE_COMMAND_MAX);
    sb_printf(&sb, "  %.*s%s\n", (int)cn, command,
              command[cn] != '\0' ? "..." : "");
  }
  sb_printf(&sb, "%zu job(s): %zu ok, %zu failed", r->n_jobs,
            r->n_jobs - r->failed - r->skipped, r->failed);
  if (r->not_started > 0)
    sb_printf(&sb, " (%zu not started)", r->not_started);
  if (r->skipped > 0)
    sb_printf(&sb, ", %zu skipped (in the joblog)", r->skipped);
  if (r->backfilled > 0)
    sb_printf(&sb, "; %llu backfilled", (unsigned long long)r->backfilled);
  if (r->halted)
    sb_puts(&sb, "; halted by --halt");
  if (r->interrupted != 0)
    sb_printf(&sb, "; interrupted by signal %d", r->interrupted);
  sb_puts(&sb, "\n");
  char *text = sb_take(&sb);
  if (text != NULL)
    console_write(r, 2, text, strlen(text));
  free(text);
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */
/* ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at `s` (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or 0 if it is not one. Stops at
 * the terminating NUL, which is never a continuation byte. */
static size_t utf8_sequence(const unsigned char *s) {
  unsigned c = s[0];
  size_t n;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4;
  else
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) ||
      (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
    return 0;
  return n;
}

static void json_string(FILE *out, const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  fputc('"', out);
  while (*s != '\0') {
    size_t n = utf8_sequence(s);
    if (n == 0) {
      fputs("\\ufffd", out);
      s++;
    } else if (*s == '"' || *s == '\\') {
      fprintf(out, "\\%c", *s++);
    } else if (*s == '\n' || *s == '\t') {
      fputs(*s == '\n' ? "\\n" : "\\t", out);
      s++;
    } else if (*s < 0x20 || *s == 0x7F) {
      fprintf(out, "\\u%04x", *s++);
    } else {
      fwrite(s, 1, n, out);
      s += n;
    }
  }
  fputc('"', out);
}

static void json_seconds(FILE *out, const char *key, double s) {
  if (s < 0)
    fprintf(out, ",\"%s\":null", key);
  else
    fprintf(out, ",\"%s\":%.3f", key, s);
}

/* ,"key":"text", or null for NULL. */
static void json_field(FILE *out, const char *key, const char *text) {
  fprintf(out, ",\"%s\":", key);
  if (text != NULL)
    json_string(out, text);
  else
    fputs("null", out);
}

void report_json(const struct runner *r, FILE *out) {
  fputs("{\"jobs\":[", out);
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = r->jobs[i];
    bool exited = job->state == JOB_EXITED;
    fprintf(out, "%s\n {\"seq\":%zu", i == 0 ? "" : ",", job->seq);
    if (job->line > 0)
      fprintf(out, ",\"line\":%zu", job->line);
    else
      fputs(",\"line\":null", out);
    fprintf(out, ",\"status\":\"%s\"", status_word(job));
    if (exited && job->term_signal == 0)
      fprintf(out, ",\"exit_code\":%lld", (long long)job->exit_code);
    else
      fputs(",\"exit_code\":null", out);
    if (exited && job->term_signal != 0)
      fprintf(out, ",\"signal\":%d", job->term_signal);
    else
      fputs(",\"signal\":null", out);
    fprintf(out, ",\"attempts\":%u", job->attempts);
    json_seconds(out, "wait_s", wait_seconds(job));
    json_seconds(out, "run_s", run_seconds(job));
    json_field(out, "devices", devices_of(job));
    json_field(out, "grant", job->grant_text != NULL ? job->grant_text : "");
    json_field(out, "name", job->name);
    json_field(out, "arg", job->arg);
    json_field(out, "command", job->command != NULL ? job->command : job->text);
    json_field(out, "error", job->error);
    fputc('}', out);
  }
  fprintf(out,
          "\n],\"total\":%zu,\"ok\":%zu,\"failed\":%zu,\"not_started\":%zu,"
          "\"skipped\":%zu,\"backfilled\":%llu,\"late_heads\":%llu,"
          "\"halted\":%s,\"interrupted\":%s,\"signal\":",
          r->n_jobs, r->n_jobs - r->failed - r->skipped, r->failed,
          r->not_started, r->skipped, (unsigned long long)r->backfilled,
          (unsigned long long)r->late_heads, r->halted ? "true" : "false",
          r->interrupted != 0 ? "true" : "false");
  if (r->interrupted != 0)
    fprintf(out, "%d}\n", r->interrupted);
  else
    fputs("null}\n", out);
}

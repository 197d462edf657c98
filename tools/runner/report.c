/*
 * What the runner shows: the live progress line (stderr, terminals only),
 * and at the end either the summary table or one JSON document (stdout).
 *
 * Job commands are arbitrary bytes. The table cuts long ones at a UTF-8
 * character boundary, but never the devices column: GPU UUIDs differ only
 * near their end, and a cut list hides how many devices a job had; the JSON output escapes control characters and
 * replaces bytes that are not valid UTF-8 with U+FFFD, so the document
 * always parses.
 */
#include "runner.h"

#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/ioctl.h>
#endif

/* Widest command shown in the table, in bytes. */
#define TABLE_COMMAND_MAX 60

bool job_failed(const struct job *job) {
  if (job->state != JOB_EXITED)
    return true; /* it never ran, or did not finish */
  return job->timed_out || job->term_signal != 0 || job->exit_code != 0;
}

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

/* Use of each resource, from one snapshot: "gpu 1.5/4", "db 2/10". */
static void put_resources(struct strbuf *sb, struct runner *r) {
  size_t count = 0;
  if (cq_pool_snapshot(r->pool, r->snapshot, r->snapshot_cap, &count) != 0)
    return;
  if (count > r->snapshot_cap)
    count = r->snapshot_cap; /* resources are only added at startup */
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
}

void progress_draw(struct runner *r) {
  struct strbuf sb = {0};
  sb_printf(&sb, "cronoq-run: %zu/%zu done, %zu running, %zu waiting",
            r->finished, r->n_jobs, r->running, r->waiting);
  if (r->failed > 0)
    sb_printf(&sb, ", %zu failed", r->failed);
  put_resources(&sb, r);
  char *line = sb_take(&sb);
  if (line == NULL)
    return;
  /* One column short of the width: a line that wraps cannot be redrawn
   * with a carriage return. The text is ASCII (names are). */
  size_t width = terminal_width();
  if (strlen(line) >= width)
    line[width - 1] = '\0';
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
  r->progress_shown = true;
  free(line);
}

void progress_clear(struct runner *r) {
  if (!r->progress_shown)
    return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  r->progress_shown = false;
}

/* ------------------------------------------------------------------------ */
/* Summary table                                                             */
/* ------------------------------------------------------------------------ */

/* For JSON: one word per outcome. */
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

/* Seconds the job waited for its grant, and ran; < 0 where it has none. */
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
    return -1; /* never submitted, or refused */
  }
  return (double)(until - job->submitted_ns) / 1e9;
}

static double run_seconds(const struct job *job) {
  if (job->state != JOB_EXITED && job->state != JOB_UNKILLABLE)
    return -1;
  return (double)(job->ended_ns - job->granted_ns) / 1e9;
}

/* The devices the job got, as its CUDA_VISIBLE_DEVICES said; "" if none. */
static const char *devices_of(const struct job *job) {
  static const char prefix[] = "CUDA_VISIBLE_DEVICES=";
  return job->visible_entry != NULL ? job->visible_entry + sizeof(prefix) - 1
                                    : "";
}

/* The command, or the whole line where it could not be split off. */
static const char *command_of(const struct job *job) {
  return job->command != NULL ? job->command : job->text;
}

/* Bytes of `s` that fit `max`, not cutting a UTF-8 sequence. */
static size_t cut_at(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max)
    return n;
  while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
    max--;
  return max;
}

static void put_seconds(FILE *out, double s) {
  if (s < 0)
    fprintf(out, "  %8s", "-");
  else
    fprintf(out, "  %8.2f", s);
}

void report_table(const struct runner *r, FILE *out) {
  char buf[32];
  int line_w = 4, status_w = 6, devices_w = 7;
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = &r->jobs[i];
    int n = snprintf(buf, sizeof(buf), "%zu", job->line);
    line_w = n > line_w ? n : line_w;
    n = (int)strlen(status_text(job, buf, sizeof(buf)));
    status_w = n > status_w ? n : status_w;
    n = (int)strlen(devices_of(job)); /* never cut: UUIDs differ late */
    devices_w = n > devices_w ? n : devices_w;
  }
  fprintf(out, "%*s  %-*s  %8s  %8s  %-*s  %s\n", line_w, "line", status_w,
          "status", "wait_s", "run_s", devices_w, "devices", "command");
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = &r->jobs[i];
    fprintf(out, "%*zu  %-*s", line_w, job->line, status_w,
            status_text(job, buf, sizeof(buf)));
    put_seconds(out, wait_seconds(job));
    put_seconds(out, run_seconds(job));
    const char *devices = devices_of(job);
    if (*devices == '\0')
      devices = "-";
    const char *command = command_of(job);
    size_t cn = cut_at(command, TABLE_COMMAND_MAX);
    fprintf(out, "  %-*s  %.*s%s\n", devices_w, devices, (int)cn, command,
            command[cn] != '\0' ? "..." : "");
  }
  fprintf(out, "%zu job(s): %zu ok, %zu failed", r->n_jobs,
          r->n_jobs - r->failed, r->failed);
  if (r->interrupted != 0)
    fprintf(out, " (interrupted by signal %d)", r->interrupted);
  fputc('\n', out);
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
    fprintf(out, ",\"%s\":%.2f", key, s);
}

void report_json(const struct runner *r, FILE *out) {
  fputs("{\"jobs\":[", out);
  for (size_t i = 0; i < r->n_jobs; i++) {
    const struct job *job = &r->jobs[i];
    bool exited = job->state == JOB_EXITED;
    fprintf(out, "%s\n {\"line\":%zu,\"status\":\"%s\"", i == 0 ? "" : ",",
            job->line, status_word(job));
    if (exited && job->term_signal == 0)
      fprintf(out, ",\"exit_code\":%lld", (long long)job->exit_code);
    else
      fputs(",\"exit_code\":null", out);
    if (exited && job->term_signal != 0)
      fprintf(out, ",\"signal\":%d", job->term_signal);
    else
      fputs(",\"signal\":null", out);
    json_seconds(out, "wait_s", wait_seconds(job));
    json_seconds(out, "run_s", run_seconds(job));
    fputs(",\"devices\":", out);
    json_string(out, devices_of(job));
    fputs(",\"command\":", out);
    json_string(out, command_of(job));
    fputs(",\"error\":", out);
    if (job->error != NULL)
      json_string(out, job->error);
    else
      fputs("null", out);
    fputc('}', out);
  }
  fprintf(out, "\n],\"failed\":%zu,\"total\":%zu,\"interrupted\":%s}\n",
          r->failed, r->n_jobs, r->interrupted != 0 ? "true" : "false");
}

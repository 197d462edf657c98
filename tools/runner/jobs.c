/*
 * Jobs: made from the lines of a job file or from a template's arguments.
 *
 * A job-file line is
 *
 *   REQUEST-SPEC -- COMMAND
 *
 * The separator is the first "--" that starts the line or follows a blank,
 * and is followed by a blank or the end of the line. What comes before it
 * is a spec when it reads as one: empty, or items with no blank inside
 * them (blanks are allowed around ',' and '='). A line without a separator,
 * or whose part before it is words and not a spec ("git log -- a.c"), is a
 * plain command. A spec cannot contain such a "--", so the command may
 * (`gpu=1 -- python run.py -- --verbose`). Blank lines and lines whose
 * first non-blank character is '#' are skipped.
 *
 * The spec's items `timeout=DURATION` and `name=LABEL` are the runner's;
 * they are blanked out (with one comma) before the rest goes to
 * cq_req_parse(), so that the library's messages still point at the right
 * column of the line. A spec with no item left, and a plain command, ask
 * what the default request says (--request; one unit of the -j budget).
 *
 * A job is allocated on its own and never moves: its cq_req and cq_uv_req
 * are caller-owned storage that must stay put while they wait or hold.
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

/* Whether text[0..n) reads as a spec: no blank between two non-blanks
 * unless one of them is ',' or '='. */
static bool looks_like_spec(const char *text, size_t n) {
  char prev = 0; /* the last non-blank */
  bool gap = false;
  for (size_t i = 0; i < n; i++) {
    char c = text[i];
    if (is_blank(c)) {
      gap = prev != 0;
      continue;
    }
    if (gap && prev != ',' && prev != '=' && c != ',' && c != '=')
      return false;
    gap = false;
    prev = c;
  }
  return true;
}

static void parse_failed(struct job *job, const char *why) {
  job->state = JOB_PARSE_ERROR;
  job->error = strdup(why); /* NULL on failure: the message is printed */
  job_msg(job, "%s", why);
}

/* Blank s[from..to) and one comma next to it: the one after, else the one
 * before. */
static void blank_item(char *s, size_t from, size_t to) {
  size_t n = strlen(s);
  size_t after = to;
  while (after < n && is_blank(s[after]))
    after++;
  if (after < n && s[after] == ',') {
    to = after + 1;
  } else {
    size_t before = from;
    while (before > 0 && is_blank(s[before - 1]))
      before--;
    if (before > 0 && s[before - 1] == ',')
      from = before - 1;
  }
  memset(s + from, ' ', to - from);
}

/* Take the runner's items (timeout=, name=) out of `spec`, in place.
 * Returns 0, or -1 after parse_failed(). */
static int take_runner_items(struct job *job, char *spec) {
  char *p = spec;
  while (*p != '\0') {
    p += strspn(p, " \t,");
    if (*p == '\0')
      break;
    size_t from = (size_t)(p - spec);
    size_t key_len = strcspn(p, " \t=,");
    char *q = p + key_len;
    q += strspn(q, " \t");
    if (*q != '=') { /* not an item: the library says why */
      p += key_len;
      continue;
    }
    q++;
    q += strspn(q, " \t");
    size_t value_len = strcspn(q, " \t,");
    size_t to = (size_t)(q + value_len - spec);
    char value[256];
    snprintf(value, sizeof(value), "%.*s", (int)value_len, q);
    bool is_timeout = key_len == 7 && strncmp(p, "timeout", 7) == 0;
    bool is_name = key_len == 4 && strncmp(p, "name", 4) == 0;
    if (is_timeout) {
      if (parse_duration(value, &job->timeout_ms) != 0) {
        char why[400];
        snprintf(why, sizeof(why),
                 "timeout= wants a duration above 0 (90, 1.5, 15m, 2h), not "
                 "\"%s\" (column %zu)",
                 value, from + 1);
        parse_failed(job, why);
        return -1;
      }
    } else if (is_name) {
      free(job->name);
      job->name = value_len > 0 ? strdup(value) : NULL;
      if (job->name == NULL) {
        parse_failed(job,
                     value_len > 0 ? "out of memory" : "name= wants a label");
        return -1;
      }
    }
    if (is_timeout || is_name)
      blank_item(spec, from, to);
    p = spec + to;
  }
  return 0;
}

/* The library's messages point at a column of the spec, which starts at
 * column 1 of the line, so they point at the line as written. */
static void parse_line(struct job *job, cq_pool *pool, const char *fallback) {
  char *text = job->text;
  char *sep = find_separator(text);
  if (sep != NULL && !looks_like_spec(text, (size_t)(sep - text)))
    sep = NULL; /* words before " -- ": a plain command */
  char *command = sep != NULL ? sep + 2 : text;
  while (is_blank(*command))
    command++;
  if (*command == '\0') {
    parse_failed(job, "no command after \"--\"");
    return;
  }
  job->templ = command;
  job->spec = strndup(text, sep != NULL ? (size_t)(sep - text) : 0);
  char *spec = job->spec != NULL ? strdup(job->spec) : NULL;
  if (spec == NULL) {
    free(spec);
    parse_failed(job, "out of memory");
    return;
  }
  if (take_runner_items(job, spec) == 0) {
    bool empty = spec[strspn(spec, " \t")] == '\0';
    const char *request = empty ? fallback : spec;
    if (cq_req_init(&job->req, pool) != 0 ||
        cq_req_parse(&job->req, request) != 0) {
      /* A single word without '=' may be a command with " -- " in it. */
      const char *why = cq_req_error(&job->req);
      char hint[512];
      if (strchr(job->spec, '=') == NULL && !empty) {
        snprintf(hint, sizeof(hint),
                 "%s (a command with \" -- \" in it? write \"-- %s\")", why,
                 text);
        why = hint;
      }
      parse_failed(job, why);
    } else {
      job->state = JOB_WAITING;
    }
  }
  free(spec);
}

struct job *job_add(struct runner *r, char *text, size_t line, bool *skipped) {
  const struct options *o = r->o;
  *skipped = false;
  if (line > 0) {
    const char *p = text + strspn(text, " \t");
    if (*p == '\0' || *p == '#') {
      free(text);
      *skipped = true;
      return NULL;
    }
  }
  if (r->n_jobs == r->jobs_cap) {
    size_t cap = r->jobs_cap > 0 ? 2 * r->jobs_cap : 64;
    struct job **more = realloc(r->jobs, cap * sizeof(*more));
    if (more == NULL) {
      free(text);
      console_msg(r, "cronoq-run: out of memory\n");
      return NULL;
    }
    r->jobs = more;
    r->jobs_cap = cap;
  }
  struct job *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    free(text);
    console_msg(r, "cronoq-run: out of memory\n");
    return NULL;
  }
  r->jobs[r->n_jobs++] = job;
  job->runner = r;
  job->seq = r->n_jobs;
  job->line = line;
  job->text = text;
  job->timeout_ms = o->timeout_ms;
  if (line > 0) {
    parse_line(job, r->pool, r->default_request);
  } else {
    job->arg = text;
    job->templ = NULL; /* the template of the options */
    job->spec = strdup("");
    if (job->spec == NULL || cq_req_init(&job->req, r->pool) != 0 ||
        cq_req_parse(&job->req, r->default_request) != 0)
      parse_failed(job, job->spec == NULL ? "out of memory"
                                          : cq_req_error(&job->req));
    else
      job->state = JOB_WAITING;
  }
  /* The promise backfill goes by: released by the time SIGKILL is sent. */
  if (job->state == JOB_WAITING && job->timeout_ms > 0)
    (void)cq_req_set_hold_limit(&job->req, job->timeout_ms + o->kill_grace_ms);
  if (job->state == JOB_WAITING && joblog_skips(r, job->seq))
    job->state = JOB_SKIPPED;
  job->command =
      job->state == JOB_PARSE_ERROR ? strdup(text) : job_command(job);
  return job;
}

/* ------------------------------------------------------------------------ */
/* Templates                                                                 */
/* ------------------------------------------------------------------------ */

/* The parts of a path argument: {.} {/} {//} {/.}. */
static void put_part(struct strbuf *sb, const char *arg, const char *mark) {
  const char *slash = strrchr(arg, '/');
  const char *base = slash != NULL ? slash + 1 : arg;
  const char *from = strcmp(mark, "{.}") == 0 ? arg : base;
  if (strcmp(mark, "{//}") == 0) {
    if (slash == NULL) {
      sb_put_shell_word(sb, ".");
    } else {
      char *dir = strndup(arg, slash == arg ? 1 : (size_t)(slash - arg));
      if (dir == NULL)
        sb->failed = true;
      else
        sb_put_shell_word(sb, dir);
      free(dir);
    }
    return;
  }
  size_t n = strlen(from);
  if (strcmp(mark, "{/}") != 0) { /* without the extension */
    const char *dot = strrchr(from, '.');
    const char *last_slash = strrchr(from, '/');
    if (dot != NULL && dot != from && (last_slash == NULL || dot > last_slash))
      n = (size_t)(dot - from);
  }
  char *part = strndup(from, n);
  if (part == NULL)
    sb->failed = true;
  else
    sb_put_shell_word(sb, part);
  free(part);
}

char *job_command(const struct job *job) {
  const struct runner *r = job->runner;
  const struct options *o = r->o;
  if (job->templ != NULL)
    return strdup(job->templ);
  if (job->arg == NULL)
    return strdup(job->text); /* a line that could not be parsed */
  static const char *const marks[] = {"{//}", "{/.}", "{}", "{.}",
                                      "{/}",  "{#}",  "{%}"};
  struct strbuf sb = {0};
  bool used_arg = false;
  for (int w = 0; w < o->n_template_words; w++) {
    if (w > 0)
      sb_puts(&sb, " ");
    const char *p = o->template_words[w];
    while (*p != '\0') {
      const char *mark = NULL;
      for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]) && !mark; i++)
        if (strncmp(p, marks[i], strlen(marks[i])) == 0)
          mark = marks[i];
      if (mark == NULL) {
        sb_putn(&sb, p, 1);
        p++;
        continue;
      }
      if (strcmp(mark, "{#}") == 0) {
        sb_printf(&sb, "%zu", job->seq);
      } else if (strcmp(mark, "{%}") == 0) {
        sb_printf(&sb, "%zu", job->slot);
      } else {
        used_arg = true;
        if (strcmp(mark, "{}") == 0)
          sb_put_shell_word(&sb, job->arg);
        else
          put_part(&sb, job->arg, mark);
      }
      p += strlen(mark);
    }
  }
  if (!used_arg) {
    sb_puts(&sb, " ");
    sb_put_shell_word(&sb, job->arg);
  }
  return sb_take(&sb);
}

const char *job_label(const struct job *job, char *buf, size_t len) {
  if (job->name != NULL)
    return job->name;
  if (job->arg != NULL)
    return job->arg;
  snprintf(buf, len, "line %zu", job->line);
  return buf;
}

void jobs_free(struct runner *r) {
  for (size_t i = 0; i < r->n_jobs; i++) {
    struct job *job = r->jobs[i];
    free(job->text);
    free(job->spec);
    free(job->name);
    free(job->command);
    free(job->error);
    free(job->devices);
    free(job->grant_text);
    sb_free(&job->out.buf);
    sb_free(&job->err.buf);
    free(job);
  }
  free(r->jobs);
  r->jobs = NULL;
  r->n_jobs = 0;
}

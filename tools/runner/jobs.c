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
 * A template job has the values args.c gathered for it: its records (one,
 * or more with -n and -X), each the fields of one combination of the input
 * sources. Its command is the template with GNU parallel's placeholders
 * filled in: {} and its forms take every field, {N} and its forms the
 * N-th; under -X a word with a value's placeholder is repeated once per
 * record; a template without any placeholder has the fields appended.
 * Each field is quoted for the shell, never the template's own text.
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
    job->default_request = empty;
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

/* A new job at the end of the list, holding `text` (taken, also on
 * failure); NULL when out of memory (printed). */
static struct job *job_new(struct runner *r, char *text) {
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
  job->text = text;
  job->timeout_ms = r->o->timeout_ms;
  return job;
}

/* What every job gets once its request is read. */
static void job_ready(struct job *job) {
  const struct runner *r = job->runner;
  const struct options *o = r->o;
  /* The promise backfill goes by: released by the time SIGKILL is sent.
   * Not with --delay: a granted job may wait its turn to start. */
  if (job->state == JOB_WAITING && job->timeout_ms > 0 && o->delay_ms == 0)
    (void)cq_req_set_hold_limit(&job->req, job->timeout_ms + o->kill_grace_ms);
  if (job->state == JOB_WAITING && joblog_skips(r, job->seq))
    job->state = JOB_SKIPPED;
  job->command =
      job->state == JOB_PARSE_ERROR ? strdup(job->text) : job_command(job);
}

struct job *job_add(struct runner *r, char *text, size_t line, bool *skipped) {
  *skipped = false;
  const char *p = text + strspn(text, " \t");
  if (*p == '\0' || *p == '#') {
    free(text);
    *skipped = true;
    return NULL;
  }
  struct job *job = job_new(r, text);
  if (job == NULL)
    return NULL;
  job->line = line;
  parse_line(job, r->pool, r->default_request);
  job_ready(job);
  return job;
}

void job_args_free(struct job_args *a) {
  for (size_t i = 0; i < a->n_fields; i++)
    free(a->fields[i]);
  free(a->fields);
  free(a->rec_at);
  memset(a, 0, sizeof(*a));
}

struct job *job_add_args(struct runner *r, struct job_args *a) {
  struct job_args args = *a;
  memset(a, 0, sizeof(*a));
  /* Its label: the values, joined by blanks. */
  struct strbuf sb = {0};
  for (size_t i = 0; i < args.n_fields; i++) {
    sb_puts(&sb, i > 0 ? " " : "");
    sb_puts(&sb, args.fields[i]);
  }
  char *label = sb_take(&sb);
  if (label == NULL || args.failed) {
    free(label);
    job_args_free(&args);
    console_msg(r, "cronoq-run: out of memory\n");
    return NULL;
  }
  struct job *job = job_new(r, label);
  if (job == NULL) {
    job_args_free(&args);
    return NULL;
  }
  job->arg = label;
  job->fields = args.fields;
  job->n_fields = args.n_fields;
  job->rec_at = args.rec_at;
  job->n_records = args.n_records;
  job->templ = NULL; /* the template of the options */
  job->default_request = true;
  job->spec = strdup("");
  if (job->spec == NULL || cq_req_init(&job->req, r->pool) != 0 ||
      cq_req_parse(&job->req, r->default_request) != 0)
    parse_failed(job,
                 job->spec == NULL ? "out of memory" : cq_req_error(&job->req));
  else
    job->state = JOB_WAITING;
  job_ready(job);
  return job;
}

/* ------------------------------------------------------------------------ */
/* Templates                                                                 */
/* ------------------------------------------------------------------------ */

size_t template_mark(const char *p, struct mark *m) {
  static const struct {
    const char *text;
    enum mark_part part;
  } parts[] = {{"}", PART_ALL},
               {".}", PART_NOEXT},
               {"/}", PART_BASE},
               {"//}", PART_DIR},
               {"/.}", PART_BASE_NOEXT}};
  if (p[0] != '{')
    return 0;
  m->part = PART_ALL;
  m->column = 0;
  if ((p[1] == '#' || p[1] == '%') && p[2] == '}') {
    m->kind = p[1] == '#' ? MARK_SEQ : MARK_SLOT;
    return 3;
  }
  const char *q = p + 1;
  if (*q >= '1' && *q <= '9')
    for (; *q >= '0' && *q <= '9'; q++)
      if ((m->column = m->column * 10 + (size_t)(*q - '0')) > 1000000)
        return 0;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    size_t n = strlen(parts[i].text);
    if (strncmp(q, parts[i].text, n) == 0) {
      m->kind = MARK_ARG;
      m->part = parts[i].part;
      return (size_t)(q - p) + n;
    }
  }
  return 0;
}

/* Whether word w has a placeholder: of a value, or with `any`, of any
 * kind ({#} and {%} too). */
static bool word_has_mark(const char *w, bool any) {
  struct mark m;
  for (; *w != '\0'; w++)
    if (template_mark(w, &m) > 0 && (any || m.kind == MARK_ARG))
      return true;
  return false;
}

int template_mark_words(char *const *words, int n, bool any) {
  int count = 0;
  for (int i = 0; i < n; i++)
    count += word_has_mark(words[i], any);
  return count;
}

/* A part of a path value, quoted for the shell: {.} {/} {//} {/.}. */
static void put_part(struct strbuf *sb, const char *arg, enum mark_part part) {
  const char *slash = strrchr(arg, '/');
  const char *base = slash != NULL ? slash + 1 : arg;
  const char *from = part == PART_ALL || part == PART_NOEXT ? arg : base;
  size_t n = strlen(from);
  if (part == PART_DIR) {
    from = slash != NULL ? arg : ".";
    n = slash == NULL ? 1 : slash == arg ? 1 : (size_t)(slash - arg);
  } else if (part == PART_NOEXT || part == PART_BASE_NOEXT) {
    const char *dot = strrchr(from, '.');
    const char *last_slash = strrchr(from, '/');
    if (dot != NULL && dot != from && (last_slash == NULL || dot > last_slash))
      n = (size_t)(dot - from);
  }
  char *text = strndup(from, n);
  if (text == NULL)
    sb->failed = true;
  else
    sb_put_shell_word(sb, text);
  free(text);
}

/* A template word with its placeholders filled in from the values
 * f[0..n): {} all of them (blank separated), {N} the N-th ('' when there
 * is none). */
static void put_word(struct strbuf *sb, const struct job *job, const char *w,
                     char *const *f, size_t n) {
  while (*w != '\0') {
    struct mark m;
    size_t len = template_mark(w, &m);
    if (len == 0) {
      sb_putn(sb, w, 1);
      w++;
      continue;
    }
    if (m.kind == MARK_SEQ) {
      sb_printf(sb, "%zu", job->seq);
    } else if (m.kind == MARK_SLOT) {
      sb_printf(sb, "%zu", job->slot);
    } else if (m.column > n) {
      sb_put_shell_word(sb, "");
    } else if (m.column > 0) {
      put_part(sb, f[m.column - 1], m.part);
    } else {
      for (size_t i = 0; i < n; i++) {
        sb_puts(sb, i > 0 ? " " : "");
        put_part(sb, f[i], m.part);
      }
    }
    w += len;
  }
}

/* The command of a template job: each word with its placeholders filled
 * in from all the job's values, or under -X, a word with a value's
 * placeholder repeated once per record; without any placeholder ({#}
 * counts), the values appended. */
char *job_command(const struct job *job) {
  const struct runner *r = job->runner;
  const struct options *o = r->o;
  if (job->templ != NULL)
    return strdup(job->templ);
  if (job->arg == NULL)
    return strdup(job->text); /* a line that could not be parsed */
  size_t n = o->max_args == 0 ? 0 : job->n_fields; /* -n 0: none */
  struct strbuf sb = {0};
  for (int w = 0; w < o->n_template_words; w++) {
    const char *word = o->template_words[w];
    sb_puts(&sb, w > 0 ? " " : "");
    if (!o->context_replace || n == 0 || !word_has_mark(word, false)) {
      put_word(&sb, job, word, job->fields, n);
      continue;
    }
    for (size_t rec = 0; rec < job->n_records; rec++) {
      sb_puts(&sb, rec > 0 ? " " : "");
      put_word(&sb, job, word, job->fields + job->rec_at[rec],
               job->rec_at[rec + 1] - job->rec_at[rec]);
    }
  }
  if (r->marked_words == 0)
    for (size_t i = 0; i < n; i++) {
      sb_puts(&sb, " ");
      sb_put_shell_word(&sb, job->fields[i]);
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
    for (size_t f = 0; f < job->n_fields; f++)
      free(job->fields[f]);
    free(job->fields);
    free(job->rec_at);
    sb_free(&job->held_out);
    sb_free(&job->held_err);
    sb_free(&job->out.buf);
    sb_free(&job->err.buf);
    free(job);
  }
  free(r->jobs);
  r->jobs = NULL;
  r->n_jobs = 0;
}

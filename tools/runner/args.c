/*
 * A template's arguments: from its input sources to jobs, as GNU parallel
 * makes them.
 *
 * The sources, in order: the words after ":::", the lines of a file
 * ("::::", -a; "-", and no source at all: standard input). Their values
 * combine into records: every combination, the last source varying
 * fastest (`::: a b ::: x y` is a x, a y, b x, b y); a linked source
 * (":::+", "::::+") is zipped with the one before it instead, and the
 * shortest source of a linked run sets its length. With --colsep each
 * value of a record is split into columns, blanks trimmed, so that a
 * record's fields are the columns of its values in order: {1}, {2}, ...
 *
 * A job takes one record; -n N takes N (the last job what is left), and
 * -n 0 takes one and inserts none; -X spreads the records evenly over the
 * -j slots (one each with -j 0), at most -n of them, and no more than fit
 * RUNNER_COMMAND_MAX. A job's fields are its records' in order.
 *
 * One source without -X is taken value by value as it is read
 * (args_value()), so that --follow starts a job as its line arrives; -n
 * holds a job back until its records are there. Several sources, and -X,
 * need every value first (args_read_all()).
 */
#include "runner.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

bool args_whole(const struct options *o) {
  return o->n_sources > 1 || o->context_replace;
}

/* --colsep as an extended regex. GNU parallel's are Perl's, where "\t" is
 * a tab; an ERE has no escape for it, so it becomes one here. */
static int compile_colsep(struct runner *r, const char *text) {
  struct strbuf sb = {0};
  for (const char *p = text; *p != '\0'; p++) {
    if (p[0] == '\\' && p[1] == 't') {
      sb_puts(&sb, "\t");
      p++;
    } else if (p[0] == '\\' && p[1] != '\0') {
      sb_putn(&sb, p, 2); /* "\\t" is a backslash and a t */
      p++;
    } else {
      sb_putn(&sb, p, 1);
    }
  }
  char *pattern = sb_take(&sb);
  regex_t *re = malloc(sizeof(*re));
  if (pattern == NULL || re == NULL) {
    free(pattern);
    free(re);
    fprintf(stderr, "cronoq-run: out of memory\n");
    return 2;
  }
  int rc = regcomp(re, pattern, REG_EXTENDED);
  free(pattern);
  if (rc != 0) {
    char why[160];
    regerror(rc, re, why, sizeof(why));
    free(re);
    fprintf(stderr, "cronoq-run: --colsep '%s': %s\n", text, why);
    return 2;
  }
  r->colsep = re;
  return 0;
}

int args_init(struct runner *r) {
  const struct options *o = r->o;
  r->group_records = o->max_args > 1 ? (size_t)o->max_args : 1;
  r->arg_words =
      template_mark_words(o->template_words, o->n_template_words, false);
  r->marked_words =
      template_mark_words(o->template_words, o->n_template_words, true);
  return o->colsep != NULL ? compile_colsep(r, o->colsep) : 0;
}

void args_free(struct runner *r) {
  if (r->colsep != NULL) {
    regfree(r->colsep);
    free(r->colsep);
    r->colsep = NULL;
  }
  job_args_free(&r->pending);
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap)
    return true;
  size_t n = *cap > 0 ? 2 * *cap : 16;
  while (n < need)
    n *= 2;
  void *more = realloc(*p, n * size);
  if (more == NULL)
    return false;
  *p = more;
  *cap = n;
  return true;
}

/* s[0..n), blanks trimmed when --colsep split it, as the next field. */
static void push_field(struct job_args *a, const char *s, size_t n, bool trim) {
  if (trim) {
    while (n > 0 && isspace((unsigned char)*s)) {
      s++;
      n--;
    }
    while (n > 0 && isspace((unsigned char)s[n - 1]))
      n--;
  }
  char *field = strndup(s, n);
  if (field == NULL || !grow((void **)&a->fields, &a->fields_cap,
                             a->n_fields + 1, sizeof(*a->fields))) {
    free(field);
    a->failed = true;
    return;
  }
  a->fields[a->n_fields++] = field;
  a->bytes += n + 3; /* quoted, and a blank */
}

/* A value of the record: its columns with --colsep, else itself. An
 * empty match of the regex ends the split (it separates nothing). */
static void push_value(struct runner *r, const char *value) {
  struct job_args *a = &r->pending;
  if (r->colsep == NULL) {
    push_field(a, value, strlen(value), false);
    return;
  }
  const char *p = value;
  regmatch_t m;
  while (regexec(r->colsep, p, 1, &m, p == value ? 0 : REG_NOTBOL) == 0 &&
         m.rm_eo > m.rm_so) {
    push_field(a, p, (size_t)m.rm_so, true);
    p += m.rm_eo;
  }
  push_field(a, p, strlen(p), true);
}

static void record_begin(struct job_args *a) {
  if (!grow((void **)&a->rec_at, &a->records_cap, a->n_records + 2,
            sizeof(*a->rec_at)))
    a->failed = true;
  else
    a->rec_at[a->n_records] = a->n_fields;
}

static void record_end(struct job_args *a) {
  if (a->failed)
    return;
  a->n_records++;
  a->rec_at[a->n_records] = a->n_fields;
}

/* The records gathered so far, as a job. */
static void emit_job(struct runner *r) {
  if (r->pending.n_records == 0 && !r->pending.failed)
    return;
  struct job *job = job_add_args(r, &r->pending);
  if (job != NULL && r->started)
    job_submit(job);
}

void args_value(struct runner *r, char *value) {
  record_begin(&r->pending);
  push_value(r, value);
  record_end(&r->pending);
  free(value);
  if (r->pending.n_records >= r->group_records)
    emit_job(r);
}

void args_end(struct runner *r) { emit_job(r); }

/* ------------------------------------------------------------------------ */
/* Every source, whole                                                       */
/* ------------------------------------------------------------------------ */

struct values {
  char **v;
  size_t n, cap;
  bool failed;
};

static void take_line(void *ctx, char *line) {
  struct values *vals = ctx;
  if (!grow((void **)&vals->v, &vals->cap, vals->n + 1, sizeof(*vals->v))) {
    free(line);
    vals->failed = true;
    return;
  }
  vals->v[vals->n++] = line;
}

/* Read every source; the words of ":::" are copied, so that every value
 * is freed alike. Returns 0, or 2 after printing why. */
static int read_sources(const struct options *o, struct values *vals,
                        size_t n) {
  for (size_t i = 0; i < n; i++) {
    const struct arg_source *src = o->n_sources > 0 ? &o->sources[i] : NULL;
    if (src == NULL || src->path != NULL) {
      int status =
          input_lines(src != NULL ? src->path : NULL, take_line, &vals[i]);
      if (status != 0)
        return status;
    } else {
      for (int w = 0; w < src->n_words; w++) {
        char *copy = strdup(src->words[w]);
        if (copy == NULL)
          vals[i].failed = true;
        else
          take_line(&vals[i], copy);
      }
    }
    if (vals[i].failed) {
      fprintf(stderr, "cronoq-run: out of memory\n");
      return 2;
    }
  }
  return 0;
}

/* Records per job under -X: an even share of the -j slots, at most -n. */
static size_t spread(const struct runner *r, size_t records) {
  const struct options *o = r->o;
  size_t slots = o->jobs > 0 ? (size_t)o->jobs : records;
  size_t per = slots > 0 ? (records + slots - 1) / slots : 1;
  if (o->max_args >= 1 && per > (size_t)o->max_args)
    per = (size_t)o->max_args;
  return per > 0 ? per : 1;
}

/* Every combination of the sources' values as records, in GNU parallel's
 * order: `run[k]` is the first source of the k-th linked run, `len[k]`
 * its length; the last run varies fastest. */
static void combine(struct runner *r, const struct values *vals, size_t n) {
  const struct options *o = r->o;
  size_t *run = calloc(n, sizeof(*run)), *len = calloc(n, sizeof(*len));
  size_t *at = calloc(n, sizeof(*at));
  size_t runs = 0, records = 1;
  if (run == NULL || len == NULL || at == NULL) {
    r->pending.failed = true;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || o->n_sources == 0 || !o->sources[i].linked) {
      run[runs] = i;
      len[runs++] = vals[i].n;
    } else if (vals[i].n < len[runs - 1]) {
      len[runs - 1] = vals[i].n;
    }
  }
  for (size_t k = 0; k < runs; k++) {
    if (len[k] == 0) {
      records = 0;
    } else if (records > SIZE_MAX / len[k]) {
      console_msg(r, "cronoq-run: too many combinations of the input "
                     "sources");
      r->pending.failed = true;
      goto out;
    }
    records *= len[k];
  }
  if (o->context_replace)
    r->group_records = spread(r, records);
  size_t words = r->arg_words > 0 ? (size_t)r->arg_words : 1;
  for (size_t rec = 0; rec < records; rec++) {
    size_t bytes = 0;
    for (size_t k = 0; k < runs; k++)
      for (size_t i = run[k]; i < (k + 1 < runs ? run[k + 1] : n); i++)
        bytes += strlen(vals[i].v[at[k]]) + 3;
    if (o->context_replace && r->pending.n_records > 0 &&
        (r->pending.bytes + bytes) * words > RUNNER_COMMAND_MAX)
      emit_job(r);
    record_begin(&r->pending);
    for (size_t k = 0; k < runs; k++)
      for (size_t i = run[k]; i < (k + 1 < runs ? run[k + 1] : n); i++)
        push_value(r, vals[i].v[at[k]]);
    record_end(&r->pending);
    if (r->pending.n_records >= r->group_records || r->pending.failed)
      emit_job(r);
    for (size_t k = runs; k-- > 0;) { /* the next combination */
      if (++at[k] < len[k])
        break;
      at[k] = 0;
    }
  }
out:
  emit_job(r);
  free(run);
  free(len);
  free(at);
}

int args_read_all(struct runner *r) {
  const struct options *o = r->o;
  size_t n = o->n_sources > 0 ? o->n_sources : 1;
  struct values *vals = calloc(n, sizeof(*vals));
  if (vals == NULL) {
    fprintf(stderr, "cronoq-run: out of memory\n");
    return 2;
  }
  int status = read_sources(o, vals, n);
  if (status == 0)
    combine(r, vals, n);
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < vals[i].n; k++)
      free(vals[i].v[k]);
    free(vals[i].v);
  }
  free(vals);
  return status;
}

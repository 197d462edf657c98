/*
 * Specs: resources and requests written as one line of text, for command
 * lines and environment variables (cq_pool_add_spec(), cq_req_parse()).
 *
 * Both are lists of items separated by ',':
 *
 *   item = name *( ':' option ) '=' value
 *
 * with blanks (space, tab) allowed around items, options and '='. A name is
 * what cq_budget_add() accepts; a value is a run of the same characters
 * ("24576", "auto", "0.5", a class name). Request items take no options.
 * One lexer reads both, so the two agree on every lexical rule and report
 * errors alike: "<which> spec: <problem> at column N", N being the 1-based
 * byte offset of the byte to fix. A byte with no place anywhere in a spec
 * (a control byte, a byte >= 0x80, a character such as ';') is reported as
 * itself, ahead of whatever was expected there: it is what the user has to
 * fix.
 *
 * A request may name a device pool of another host, as a fleet pool names
 * them: `gpu@hostB=0.5`. So a request spec's name may hold one '@' with a
 * word on both sides of it; whether such a resource exists is the pool's
 * to say, as for any name. Resource specs declare this host's resources
 * only, and a value never holds one, so an '@' anywhere else is a stray
 * byte.
 *
 * Both calls are all or nothing. A request is plain caller-owned data, so
 * it is parsed into a copy that replaces it only once every item was added.
 * A pool is shared and changes under other threads: the whole spec is
 * checked first (syntax, values, names repeated in the spec or already in
 * the pool), then the resources are added in order, and if one still fails
 * (a racing add, out of memory, GPU detection) the ones added by this call
 * are removed again.
 *
 * A pool whose state other processes share (a backend with
 * CQ_BACKEND_SHARED: a fleet pool's namespace) is the exception. There
 * every process declares what it uses, the backend accepting a declaration
 * that matches and refusing one that conflicts, so a name the pool has is
 * passed on like any other; and nothing is undone after a failed item,
 * since what this call declared may be in use by another process already
 * (or have been declared by it first, which the pool cannot tell apart).
 *
 * The parsers allocate nothing: comparing a name with the earlier items,
 * adding the checked items and undoing them all read the text again, which
 * is cheap for the few items a spec has.
 */
#include "text/text.h"

#include "cronoq/cronoq_backend.h"
#include "util/msg.h"
#include "util/name.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
#define SPEC_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SPEC_PRINTF(fmt, args)
#endif

/* Most options one grammar knows; each may be given once per item. */
#define SPEC_OPTIONS_MAX 3

/* How much of an item's text a message quotes. */
#define SPEC_QUOTE_MAX 96

/* ------------------------------------------------------------------------ */
/* Lexer                                                                     */
/* ------------------------------------------------------------------------ */

struct lexer {
  const char *s;
  size_t len;
  size_t pos;
  bool want_item;             /* a comma was read: an item must follow */
  const char *which;          /* "resource spec" or "request spec" */
  const char *const *options; /* the option words of this grammar */
  unsigned n_options;
  bool host_ok; /* a name may be "<name>@<host>" (request specs) */
  char *msg;    /* where errors go; NULL for none */
  size_t msg_len;
};

/* One item as written. Offsets are into the spec. */
struct item {
  size_t at; /* where the name starts */
  char name[CQ_NAME_MAX + 1];
  unsigned n_opts;
  struct {
    unsigned id; /* index into the lexer's options */
    size_t at;
  } opts[SPEC_OPTIONS_MAX]; /* in the order given */
  size_t head_end;          /* end of the name and options, for messages */
  size_t value_at;          /* where the value starts, or would */
  size_t value_len;         /* 0 when missing: for the parsers to report */
};

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* The bytes of names and values: those of a resource name. */
static bool is_word(char c) { return cq__name_char(c); }

/* Whether a byte has no place anywhere in a spec. */
static bool is_stray(char c) {
  return !is_word(c) && !is_blank(c) && c != ',' && c != ':' && c != '=';
}

static void skip_blanks(struct lexer *lx) {
  while (lx->pos < lx->len && is_blank(lx->s[lx->pos]))
    lx->pos++;
}

static size_t word_end(const struct lexer *lx, size_t from) {
  while (from < lx->len && is_word(lx->s[from]))
    from++;
  return from;
}

/* The same spec, to be read again from its start, silently: whatever is
 * read again was read once without error. */
static struct lexer lex_again(const struct lexer *lx) {
  struct lexer again = *lx;
  again.pos = 0;
  again.want_item = false;
  again.msg = NULL;
  return again;
}

/* Put "<which>: <message>" into the error buffer; returns rc. */
SPEC_PRINTF(3, 4)
static int lex_fail(struct lexer *lx, int rc, const char *fmt, ...) {
  if (lx->msg == NULL || lx->msg_len == 0)
    return rc;
  int n = snprintf(lx->msg, lx->msg_len, "%s: ", lx->which);
  if (n >= 0 && (size_t)n < lx->msg_len) {
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(lx->msg + n, lx->msg_len - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* Report the byte at `at` (before the end) as out of place. */
static int lex_unexpected(struct lexer *lx, size_t at) {
  unsigned char c = (unsigned char)lx->s[at];
  if (c < 0x20 || c > 0x7e)
    return lex_fail(lx, CQ_EPARSE, "unexpected byte 0x%02x at column %zu", c,
                    at + 1);
  return lex_fail(lx, CQ_EPARSE, "unexpected character '%c' at column %zu", c,
                  at + 1);
}

/* Report that what `fmt` describes was due at `at`, unless a stray byte
 * sits there. */
SPEC_PRINTF(3, 4)
static int lex_expected(struct lexer *lx, size_t at, const char *fmt, ...) {
  if (at < lx->len && is_stray(lx->s[at]))
    return lex_unexpected(lx, at);
  char what[SPEC_QUOTE_MAX + 48];
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  return lex_fail(lx, CQ_EPARSE, "%s at column %zu", what, at + 1);
}

/* The name and options of an item, as written, for quoting. */
static int head_len(const struct item *it) {
  size_t n = it->head_end - it->at;
  return (int)(n > SPEC_QUOTE_MAX ? SPEC_QUOTE_MAX : n);
}

static int lex_name(struct lexer *lx, struct item *it) {
  size_t at = lx->pos, end = word_end(lx, at);
  bool at_sign = lx->host_ok && end < lx->len && lx->s[end] == '@';
  if (at_sign && end == at)
    return lex_fail(lx, CQ_EPARSE, "expected a name before '@' at column %zu",
                    at + 1);
  if (end == at)
    return lex_expected(lx, at, "expected a name");
  if (at_sign) { /* "gpu@hostB": the host is a word too; one '@' only */
    size_t host = end + 1;
    end = word_end(lx, host);
    if (end == host)
      return lex_expected(lx, host, "expected a host after '@'");
  }
  if (end - at > CQ_NAME_MAX)
    return lex_fail(lx, CQ_EPARSE, "name longer than %d bytes at column %zu",
                    CQ_NAME_MAX, at + 1);
  memcpy(it->name, lx->s + at, end - at);
  it->name[end - at] = '\0';
  lx->pos = end;
  return 0;
}

static int lex_option(struct lexer *lx, struct item *it) {
  size_t at = lx->pos, end = word_end(lx, at), n = end - at;
  if (n == 0)
    return lex_expected(lx, at, "expected an option");
  if (end < lx->len && is_stray(lx->s[end]))
    return lex_unexpected(lx, end); /* "lo!ne": the '!' is the mistake */
  unsigned id = 0;
  while (id < lx->n_options && !(strlen(lx->options[id]) == n &&
                                 memcmp(lx->options[id], lx->s + at, n) == 0))
    id++;
  if (id == lx->n_options)
    return lex_fail(lx, CQ_EPARSE, "unknown option \"%.*s\" at column %zu",
                    (int)(n > SPEC_QUOTE_MAX ? SPEC_QUOTE_MAX : n), lx->s + at,
                    at + 1);
  for (unsigned i = 0; i < it->n_opts; i++)
    if (it->opts[i].id == id)
      return lex_fail(lx, CQ_EPARSE, "option \"%s\" given twice at column %zu",
                      lx->options[id], at + 1);
  /* Repeats are refused, so there is room for every distinct option. */
  CQ__ASSERT(it->n_opts < SPEC_OPTIONS_MAX);
  it->opts[it->n_opts].id = id;
  it->opts[it->n_opts].at = at;
  it->n_opts++;
  lx->pos = end;
  return 0;
}

/* Read the next item: 1, 0 when the spec has no more, or an error. The
 * value may be empty; what it must be is for the caller to say. */
static int lex_next(struct lexer *lx, struct item *it) {
  skip_blanks(lx);
  if (lx->pos == lx->len && !lx->want_item)
    return 0;
  if (lx->pos == lx->len || lx->s[lx->pos] == ',')
    return lex_fail(lx, CQ_EPARSE, "empty item at column %zu", lx->pos + 1);
  memset(it, 0, sizeof(*it));
  it->at = lx->pos;
  int rc = lex_name(lx, it);
  if (rc != 0)
    return rc;
  it->head_end = lx->pos;
  skip_blanks(lx);
  while (lx->n_options > 0 && lx->pos < lx->len && lx->s[lx->pos] == ':') {
    lx->pos++;
    skip_blanks(lx);
    if ((rc = lex_option(lx, it)) != 0)
      return rc;
    it->head_end = lx->pos;
    skip_blanks(lx);
  }
  if (lx->pos == lx->len || lx->s[lx->pos] != '=')
    return lex_expected(lx, lx->pos, "expected '=' after \"%.*s\"",
                        head_len(it), lx->s + it->at);
  lx->pos++;
  skip_blanks(lx);
  it->value_at = lx->pos;
  lx->pos = word_end(lx, lx->pos);
  it->value_len = lx->pos - it->value_at;
  skip_blanks(lx);
  lx->want_item = false;
  if (lx->pos < lx->len) {
    if (lx->s[lx->pos] != ',')
      return lex_unexpected(lx, lx->pos);
    lx->pos++;
    lx->want_item = true;
  }
  return 1;
}

/* Whether an item before `it` has its name. */
static bool named_before(const struct lexer *lx, const struct item *it) {
  struct lexer again = lex_again(lx);
  struct item prev;
  while (lex_next(&again, &prev) == 1 && prev.at < it->at)
    if (strcmp(prev.name, it->name) == 0)
      return true;
  return false;
}

static int fail_named_twice(struct lexer *lx, const struct item *it) {
  return lex_fail(lx, CQ_EEXIST, "\"%s\" is named twice (column %zu)", it->name,
                  it->at + 1);
}

/* ------------------------------------------------------------------------ */
/* Resource specs                                                            */
/* ------------------------------------------------------------------------ */

enum { OPT_LONE, OPT_DEVICES, OPT_CLASS, OPT_COUNT };
static const char *const pool_options[OPT_COUNT] = {"lone", "devices", "class"};
_Static_assert(OPT_COUNT <= SPEC_OPTIONS_MAX, "room for every option");

/* A resource-spec item, checked. */
struct decl {
  struct item it;
  int kind;       /* enum cq_resource_kind */
  unsigned flags; /* enum cq_budget_flags */
  bool detect;    /* devices from GPU detection */
  int64_t amount; /* capacity, max_workers or devices */
};

static bool has_option(const struct item *it, unsigned id) {
  for (unsigned i = 0; i < it->n_opts; i++)
    if (it->opts[i].id == id)
      return true;
  return false;
}

/* A count: decimal digits only, no sign, no fraction. CQ_EPARSE if it is
 * not one, CQ_ERANGE if it is above max. */
static int parse_count(const char *s, size_t n, int64_t max, int64_t *out) {
  if (n == 0)
    return CQ_EPARSE;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return CQ_EPARSE;
    if (v <= max) /* stops growing once too large, so it cannot overflow */
      v = v * 10 + (s[i] - '0');
  }
  if (v > max)
    return CQ_ERANGE;
  *out = v;
  return 0;
}

/* Read and check the next item of a resource spec: 1, 0 at the end, or an
 * error. Names taken in the pool or earlier in the spec are not looked at
 * here. */
static int decl_next(struct lexer *lx, struct decl *d) {
  int rc = lex_next(lx, &d->it);
  if (rc != 1)
    return rc;
  const struct item *it = &d->it;
  bool gpu = strcmp(it->name, "gpu") == 0;

  /* The options pick what the item declares, so any two of them conflict,
   * and "gpu" is a device pool by its name alone. */
  if (it->n_opts > 1)
    return lex_fail(lx, CQ_EPARSE,
                    "options \"%s\" and \"%s\" conflict at column %zu",
                    pool_options[it->opts[0].id], pool_options[it->opts[1].id],
                    it->opts[1].at + 1);
  if (gpu && it->n_opts == 1 && it->opts[0].id != OPT_DEVICES)
    return lex_fail(lx, CQ_EPARSE,
                    "option \"%s\" does not apply to device pool \"gpu\" at "
                    "column %zu",
                    pool_options[it->opts[0].id], it->opts[0].at + 1);
  d->kind = gpu || has_option(it, OPT_DEVICES) ? CQ_KIND_DEVICES
            : has_option(it, OPT_CLASS)        ? CQ_KIND_CLASS
                                               : CQ_KIND_BUDGET;
  d->flags = has_option(it, OPT_LONE) ? CQ_BUDGET_LONE : 0u;
  d->amount = 0;

  const char *value = lx->s + it->value_at;
  d->detect = it->value_len == 4 && memcmp(value, "auto", 4) == 0;
  if (d->detect) {
    if (d->kind != CQ_KIND_DEVICES)
      return lex_fail(lx, CQ_EPARSE,
                      "\"auto\" is for device pools only, \"%s\" is not one "
                      "(column %zu)",
                      it->name, it->value_at + 1);
    return 1;
  }
  bool devices = d->kind == CQ_KIND_DEVICES;
  rc = parse_count(value, it->value_len,
                   devices ? CQ_DEVICES_MAX : CQ_BUDGET_MAX, &d->amount);
  if (rc == CQ_EPARSE)
    return lex_fail(lx, rc, "expected a number%s after \"%.*s=\" at column %zu",
                    devices ? " or \"auto\"" : "", head_len(it), lx->s + it->at,
                    it->value_at + 1);
  if (rc == CQ_ERANGE)
    return lex_fail(lx, rc, "number too large at column %zu", it->value_at + 1);
  return 1;
}

/* Why a declaration on `pool` failed with `rc`: the backend's own detail
 * (which names the values that conflict) where it has one, else the
 * code's text. */
static const char *failure_detail(const cq_pool *pool, int rc) {
  const cq_backend_ops *ops = cq_backend_ops_of(pool);
  const char *detail =
      ops != NULL && ops->last_error != NULL ? ops->last_error(pool) : NULL;
  return detail != NULL && detail[0] != '\0' ? detail : cq_strerror(rc);
}

/* Add one checked item to the pool; on failure the message says which. */
static int declare(cq_pool *pool, const struct decl *d,
                   const cq_detect_opts *detect, struct lexer *lx) {
  const char *name = d->it.name;
  int rc;
  if (d->detect) {
    cq_gpu_list list;
    rc = cq_gpu_detect(&list, detect);
    if (rc != 0) {
      lex_fail(lx, rc, "cannot detect GPUs for \"%s\" (item at column %zu): %s",
               name, d->it.at + 1,
               list.error[0] != '\0' ? list.error : cq_strerror(rc));
      cq_gpu_list_free(&list);
      return rc;
    }
    rc = cq_devices_add(pool, name, list.count, (const char *const *)list.ids);
    cq_gpu_list_free(&list);
  } else if (d->kind == CQ_KIND_DEVICES) {
    rc = cq_devices_add(pool, name, (size_t)d->amount, NULL);
  } else if (d->kind == CQ_KIND_CLASS) {
    rc = cq_class_add(pool, name, d->amount);
  } else {
    rc = cq_budget_add_ex(pool, name, d->amount, d->flags);
  }
  if (rc != 0)
    lex_fail(lx, rc, "cannot add \"%s\" (item at column %zu): %s", name,
             d->it.at + 1, failure_detail(pool, rc));
  return rc;
}

/* Remove the first `n` items of the spec again, all added by this call.
 * Only a racing caller that already acquired one can make its removal fail;
 * then it stays, as there is no taking back what another thread holds. */
static void undeclare(cq_pool *pool, const struct lexer *lx, size_t n) {
  struct lexer again = lex_again(lx);
  struct decl d;
  for (size_t i = 0; i < n && decl_next(&again, &d) == 1; i++)
    (void)cq_resource_remove(pool, d.it.name);
}

int cq__pool_add_spec_n(cq_pool *pool, const char *spec, size_t len,
                        const cq_detect_opts *detect, char *err,
                        size_t err_len) {
  struct lexer lx = {.s = spec,
                     .len = len,
                     .which = "resource spec",
                     .options = pool_options,
                     .n_options = OPT_COUNT,
                     .msg = err,
                     .msg_len = err_len};
  if (pool == NULL || spec == NULL)
    return lex_fail(&lx, CQ_EINVAL, "%s", cq_strerror(CQ_EINVAL));
  const cq_backend_ops *ops = cq_backend_ops_of(pool);
  bool shared = ops != NULL && (ops->flags & CQ_BACKEND_SHARED) != 0;

  /* Check everything before adding anything. */
  struct decl d;
  size_t n = 0;
  int rc;
  while ((rc = decl_next(&lx, &d)) == 1) {
    if (named_before(&lx, &d.it))
      return fail_named_twice(&lx, &d.it);
    cq_resource_stats st;
    bool taken =
        !shared && cq_resource_stats_get(pool, d.it.name, &st) != CQ_ENOENT;
    if (taken)
      return lex_fail(&lx, CQ_EEXIST, "\"%s\" already exists (column %zu)",
                      d.it.name, d.it.at + 1);
    n++;
  }
  if (rc < 0)
    return rc;
  if (n == 0)
    return lex_fail(&lx, CQ_EPARSE, "empty");

  struct lexer walk = lex_again(&lx);
  for (size_t i = 0; i < n; i++) {
    rc = decl_next(&walk, &d);
    CQ__ASSERT(rc == 1); /* the same text, read once without error */
    rc = declare(pool, &d, detect, &lx);
    if (rc != 0) {
      if (!shared)
        undeclare(pool, &lx, i);
      return rc;
    }
  }
  if (err != NULL && err_len > 0)
    err[0] = '\0';
  return 0;
}

int cq_pool_add_spec(cq_pool *pool, const char *spec,
                     const cq_detect_opts *detect, char *err, size_t err_len) {
  return cq__pool_add_spec_n(pool, spec, spec != NULL ? strlen(spec) : 0,
                             detect, err, err_len);
}

/* ------------------------------------------------------------------------ */
/* Request specs                                                             */
/* ------------------------------------------------------------------------ */

/* Add one item to the request `tmp`. The name "class" gives the request its
 * class (so a resource of that name cannot be asked for in a spec). A value
 * is an amount or a class name, both short, so it fits a name's buffer. */
static int req_item(struct lexer *lx, cq_req *tmp, const struct item *it) {
  bool is_class = strcmp(it->name, "class") == 0;
  if (it->value_len == 0)
    return lex_fail(lx, CQ_EPARSE, "expected %s after \"%s=\" at column %zu",
                    is_class ? "a class name" : "an amount", it->name,
                    it->value_at + 1);
  if (it->value_len > CQ_NAME_MAX)
    return lex_fail(lx, CQ_EPARSE, "value longer than %d bytes at column %zu",
                    CQ_NAME_MAX, it->value_at + 1);
  char value[CQ_NAME_MAX + 1];
  memcpy(value, lx->s + it->value_at, it->value_len);
  value[it->value_len] = '\0';
  int rc = is_class ? cq_req_set_class(tmp, value)
                    : cq_req_add_str(tmp, it->name, value);
  if (rc != 0)
    return lex_fail(lx, rc, "%s (item at column %zu)", cq_req_error(tmp),
                    it->at + 1);
  return 0;
}

int cq__req_parse_n(cq_req *req, const char *spec, size_t len) {
  if (cq_backend_req_pool(req) == NULL || spec == NULL) /* not initialised */
    return CQ_EINVAL;
  struct lexer lx = {.s = spec,
                     .len = len,
                     .which = "request spec",
                     .host_ok = true,
                     .msg = cq_backend_req_msg(req),
                     .msg_len = CQ__MSG_MAX};
  /* Items go into a copy; the request itself changes only on success. */
  cq_req tmp = *req;
  struct item it;
  int rc;
  while ((rc = lex_next(&lx, &it)) == 1) {
    if (named_before(&lx, &it))
      return fail_named_twice(&lx, &it);
    if ((rc = req_item(&lx, &tmp, &it)) != 0)
      return rc;
  }
  if (rc < 0)
    return rc;
  cq_backend_req_msg(&tmp)[0] = '\0';
  /* The whole storage (a backend's request may use all of it); req->data
   * stays the caller's. */
  memcpy(req->cq_private, tmp.cq_private, sizeof(req->cq_private));
  return 0;
}

int cq_req_parse(cq_req *req, const char *spec) {
  return cq__req_parse_n(req, spec, spec != NULL ? strlen(spec) : 0);
}

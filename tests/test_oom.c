/*
 * Out-of-memory injection, part of the reliability suite.
 *
 * A counting allocator, given to the pool (cq_pool_config.alloc), to GPU
 * detection (cq_detect_opts.alloc) and to the libuv adapter, fails one
 * chosen allocation call: the Nth after it is armed, alloc and realloc
 * alike. Every operation that allocates is run with N = 1, 2, ... until it
 * succeeds without reaching N, once with only the Nth call failing and once
 * with every call from the Nth on failing. For each N the operation must
 *   - return CQ_ENOMEM, and say "out of memory" where it has a message;
 *   - leak nothing: the allocator's live blocks return to what they were
 *     (a resource spec that failed half-way keeps the resources it added and
 *     removed again until the pool goes, by the design of
 *     cq_resource_remove(), and the first resource allocates the table, which
 *     stays: that memory is counted exactly), and to 0 once the pool is
 *     destroyed;
 *   - leave no half-done trace: the pool's and every resource's and device's
 *     figures are as before, the name is still free;
 *   - leave the pool usable: an acquire and a release succeed, and the same
 *     operation, run again without a failure, succeeds.
 * Each (operation, N) that failed is one injection point; the total is
 * printed ("OOM points covered") for docs/RELIABILITY.md.
 *
 * The allocator also checks the library's side of the hooks: every block
 * freed or grown is one of its own and live (it keeps a set of its live
 * blocks apart from them, so the check never reads freed memory), so a
 * block freed twice, or given to the wrong allocator, fails the test; and
 * the library never passes NULL to the free hook. A second
 * test arms it to fail every call and runs the acquire and release paths,
 * which the header promises never allocate.
 */
#include "support/cqt.h"

#include "cq_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CQT_WITH_UV
#include "cronoq/cronoq_uv.h"
#endif

/* ------------------------------------------------------------------------ */
/* The counting allocator                                                    */
/* ------------------------------------------------------------------------ */

/* The live blocks: an open-addressing hash set of their addresses, on the
 * system allocator, kept apart from the blocks so that looking up a block
 * that was freed reads nothing of it. */
#define SET_GONE ((void *)&A) /* a removed entry; never a block */

static struct {
  pthread_mutex_t lock;
  long calls;   /* alloc and realloc calls since armed */
  long fail_at; /* the call to fail (1-based); 0: none */
  bool sticky;  /* fail every call from fail_at on */
  long failed;  /* calls failed since armed */
  long live;    /* blocks allocated and not freed */
  long null_frees;
  void **set;      /* live blocks, NULL or SET_GONE where there is none */
  size_t set_cap;  /* a power of two, or 0 */
  size_t set_used; /* entries live or gone */
} A = {PTHREAD_MUTEX_INITIALIZER, 0, 0, false, 0, 0, 0, NULL, 0, 0};

/* Whether this call fails. Lock held. */
static bool should_fail(void) {
  A.calls++;
  bool fail = A.fail_at > 0 &&
              (A.calls == A.fail_at || (A.sticky && A.calls > A.fail_at));
  if (fail)
    A.failed++;
  return fail;
}

static size_t set_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

/* The slot of p in the set, or where it would go (the first gone or empty
 * one on its probe path) when *found is false. Lock held, set_cap > 0. */
static size_t set_slot(const void *p, bool *found) {
  size_t mask = A.set_cap - 1, i = set_hash(p) & mask, gone = SIZE_MAX;
  for (;; i = (i + 1) & mask) {
    if (A.set[i] == p) {
      *found = true;
      return i;
    }
    if (A.set[i] == SET_GONE && gone == SIZE_MAX)
      gone = i;
    if (A.set[i] == NULL) {
      *found = false;
      return gone != SIZE_MAX ? gone : i;
    }
  }
}

/* Add a new live block. Lock held. Returns false if the set cannot grow. */
static bool set_add(void *p) {
  if ((A.set_used + 1) * 2 > A.set_cap) {
    size_t old_cap = A.set_cap, cap = old_cap ? old_cap : 256;
    while ((size_t)A.live * 4 + 4 > cap)
      cap *= 2;
    void **old = A.set;
    A.set = calloc(cap, sizeof(void *));
    if (A.set == NULL) {
      A.set = old;
      return false;
    }
    A.set_cap = cap;
    A.set_used = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i] != NULL && old[i] != SET_GONE) {
        bool found;
        A.set[set_slot(old[i], &found)] = old[i];
        A.set_used++;
      }
    free(old);
  }
  bool found;
  size_t i = set_slot(p, &found);
  if (found)
    return true;
  if (A.set[i] == NULL)
    A.set_used++;
  A.set[i] = p;
  return true;
}

/* Whether p is a live block. Lock held. */
static bool set_has(const void *p) {
  bool found = false;
  if (A.set_cap > 0 && p != SET_GONE)
    set_slot(p, &found);
  return found;
}

/* Remove a live block. Lock held. Returns false if p is not one. */
static bool set_remove(const void *p) {
  if (!set_has(p))
    return false;
  bool found;
  A.set[set_slot(p, &found)] = SET_GONE;
  return true;
}

static void *t_alloc(size_t size, void *arg) {
  assert_ptr_equal(arg, &A);
  pthread_mutex_lock(&A.lock);
  if (should_fail()) {
    pthread_mutex_unlock(&A.lock);
    return NULL;
  }
  void *p = malloc(size > 0 ? size : 1);
  bool added = p != NULL && set_add(p);
  if (added)
    A.live++;
  pthread_mutex_unlock(&A.lock);
  assert_true(added);
  return p;
}

static void *t_realloc(void *ptr, size_t size, void *arg) {
  assert_ptr_equal(arg, &A);
  if (ptr == NULL)
    return t_alloc(size, arg);
  pthread_mutex_lock(&A.lock);
  if (!set_has(ptr)) {
    pthread_mutex_unlock(&A.lock);
    fail_msg("the library grew %p, which is not a live block of its "
             "allocator",
             ptr);
  }
  if (should_fail()) {
    pthread_mutex_unlock(&A.lock);
    return NULL; /* the old block stays as it was */
  }
  /* Out of the set before realloc(), so nothing compares with it after. */
  set_remove(ptr);
  void *grown = realloc(ptr, size > 0 ? size : 1);
  bool moved = grown != NULL && set_add(grown);
  pthread_mutex_unlock(&A.lock);
  assert_true(moved);
  return grown;
}

static void t_free(void *ptr, void *arg) {
  assert_ptr_equal(arg, &A);
  pthread_mutex_lock(&A.lock);
  if (ptr == NULL) {
    A.null_frees++; /* asserted 0 wherever the live blocks are */
    pthread_mutex_unlock(&A.lock);
    return;
  }
  bool was_live = set_remove(ptr);
  if (was_live)
    A.live--;
  pthread_mutex_unlock(&A.lock);
  if (!was_live)
    fail_msg("the library freed %p, which is not a live block of its "
             "allocator (freed twice, or not its own)",
             ptr);
  free(ptr);
}

static const cq_allocator hooks = {t_alloc, t_realloc, t_free, &A};

static void alloc_arm(long fail_at, bool sticky) {
  pthread_mutex_lock(&A.lock);
  A.calls = 0;
  A.failed = 0;
  A.fail_at = fail_at;
  A.sticky = sticky;
  pthread_mutex_unlock(&A.lock);
}

static void alloc_disarm(void) {
  pthread_mutex_lock(&A.lock);
  A.fail_at = 0;
  pthread_mutex_unlock(&A.lock);
}

static long alloc_live(void) {
  pthread_mutex_lock(&A.lock);
  long live = A.live;
  long null_frees = A.null_frees;
  pthread_mutex_unlock(&A.lock);
  if (null_frees != 0)
    fail_msg("the library passed NULL to the free hook %ld times", null_frees);
  return live;
}

/* ------------------------------------------------------------------------ */
/* The fixture: a pool on the allocator, with one budget to prove it usable  */
/* ------------------------------------------------------------------------ */

#define MANY_RES 70 /* more than cq_pool_snapshot()'s stack list holds */

struct fx {
  cq_pool *pool;
  cq_pool *made; /* a pool an operation created */
  cq_gpu_list list;
  cq_detect_opts detect;
  char err[160];
  int writes; /* metrics writer calls */
  cq_req req; /* a holder and a waiter, for cases that want them */
  cq_grant holder, waiter;
  int waiter_calls, waiter_status;
#ifdef CQT_WITH_UV
  uv_loop_t loop;
  cq_uv *uv;
  int uv_closed;
#endif
};

/* What must not change when an operation fails. */
#define STATE_RES_MAX 128
#define STATE_DEV_MAX 8

struct state {
  cq_pool_stats pool;
  size_t n_res;
  cq_resource_stats res[STATE_RES_MAX];
  cq_device_stats dev[STATE_RES_MAX][STATE_DEV_MAX];
};

static void state_take(cq_pool *p, struct state *s) {
  memset(s, 0, sizeof(*s));
  assert_cq_ok(cq_pool_stats_get(p, &s->pool));
  assert_cq_ok(cq_pool_snapshot(p, s->res, STATE_RES_MAX, &s->n_res));
  assert_true(s->n_res <= STATE_RES_MAX);
  for (size_t i = 0; i < s->n_res; i++)
    for (uint32_t d = 0; s->res[i].kind == CQ_KIND_DEVICES &&
                         d < s->res[i].devices && d < STATE_DEV_MAX;
         d++)
      assert_cq_ok(cq_device_stats_get(p, s->res[i].name, d, &s->dev[i][d]));
}

static void state_equal(const struct state *a, const struct state *b) {
  assert_memory_equal(&a->pool, &b->pool, sizeof(a->pool));
  assert_int_equal(a->n_res, b->n_res);
  for (size_t i = 0; i < a->n_res; i++) {
    assert_string_equal(a->res[i].name, b->res[i].name);
    assert_memory_equal(&a->res[i], &b->res[i], sizeof(a->res[i]));
    assert_memory_equal(a->dev[i], b->dev[i], sizeof(a->dev[i]));
  }
}

/* Blocks the pool keeps until it is destroyed, whatever happens: its
 * resource table (allocated with the first resource, and kept when it grew
 * for an addition that then failed) and removed resources (requests may
 * still point at them). */
static long kept_blocks(cq_pool *p) {
  long n = 0;
  cq__mutex_lock(&p->lock);
  n += p->tab.res != NULL;
  for (const struct cq__res *r = p->tab.graveyard; r != NULL; r = r->grave_next)
    n += 1 + (r->devs != NULL);
  cq__mutex_unlock(&p->lock);
  return n;
}

static void fx_open(struct fx *fx) {
  memset(fx, 0, sizeof(*fx));
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  assert_cq_ok(cq_pool_create(&fx->pool, &cfg));
  assert_cq_ok(cq_budget_add(fx->pool, "base", 4));
  fx->detect.alloc = &hooks;
}

/* An acquire and a release on the pool still work (of "base", or where
 * the case removed it, of nothing). */
static void fx_usable(struct fx *fx) {
  cq_req req;
  cq_grant g;
  cq_resource_stats st;
  bool base = cq_resource_stats_get(fx->pool, "base", &st) == 0;
  cq_grant_init(&g);
  assert_cq_ok(cq_req_init(&req, fx->pool));
  if (base)
    assert_cq_ok(cq_req_add(&req, "base", 4));
  assert_cq_ok(cq_grant_try(fx->pool, &g, &req));
  if (base)
    assert_int_equal(cqt_budget(fx->pool, "base").in_use, 4);
  assert_cq_ok(cq_grant_release(fx->pool, &g));
  if (base)
    assert_int_equal(cqt_budget(fx->pool, "base").in_use, 0);
}

static void fx_close(struct fx *fx) {
  cq_gpu_list_free(&fx->list);
  assert_cq_ok(cq_pool_destroy(fx->made));
  assert_cq_ok(cq_pool_destroy(fx->pool));
#ifdef CQT_WITH_UV
  if (fx->loop.data == fx) {
    assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
  }
#endif
  assert_int_equal(alloc_live(), 0);
}

/* Add budgets "r0".."r<n-1>" of capacity 1. */
static void add_budgets(cq_pool *p, int n) {
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof(name), "r%d", i);
    assert_cq_ok(cq_budget_add(p, name, 1));
  }
}

static void absent(struct fx *fx, const char *name) {
  cq_resource_stats st;
  assert_cq_err(cq_resource_stats_get(fx->pool, name, &st), CQ_ENOENT);
  cq_req req;
  assert_cq_ok(cq_req_init(&req, fx->pool));
  assert_cq_err(cq_req_add(&req, name, 1), CQ_ENOENT);
}

static void present(struct fx *fx, const char *name, int kind,
                    int64_t capacity) {
  cq_resource_stats st = cqt_budget(fx->pool, name);
  assert_int_equal(st.kind, kind);
  assert_int_equal(st.capacity, capacity);
  assert_int_equal(st.in_use, 0);
}

/* ------------------------------------------------------------------------ */
/* The operations                                                            */
/* ------------------------------------------------------------------------ */

struct oom_case {
  const char *name;
  void (*setup)(struct fx *); /* extra state, before arming */
  int (*op)(struct fx *);
  void (*absent)(struct fx *);         /* after a failure: no trace */
  void (*present)(struct fx *);        /* after success: the effect, undone if
                                          fx_close would not */
  const char *(*message)(struct fx *); /* must say "out of memory" */
  int min_points;                      /* it allocates at least this often */
};

/* Pool creation. */
static int op_pool_create(struct fx *fx) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  return cq_pool_create(&fx->made, &cfg);
}
static void no_pool_made(struct fx *fx) { assert_null(fx->made); }
static void pool_made(struct fx *fx) {
  assert_non_null(fx->made);
  assert_cq_ok(cq_budget_add(fx->made, "x", 1));
}

static void on_event(const cq_event *ev, void *arg) {
  (void)ev;
  (void)arg;
}
static int op_pool_create_events(struct fx *fx) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  cfg.on_event = on_event;
  cfg.event_buffer = 64;
  return cq_pool_create(&fx->made, &cfg);
}

/* Budgets and classes: the first resource (the table is allocated), one in
 * a table with room, one that makes the table grow (realloc). */
static void setup_empty(struct fx *fx) {
  assert_cq_ok(cq_resource_remove(fx->pool, "base"));
  assert_cq_ok(cq_pool_destroy(fx->pool));
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  assert_cq_ok(cq_pool_create(&fx->pool, &cfg));
}
static int op_budget_add(struct fx *fx) {
  return cq_budget_add(fx->pool, "db", 10);
}
static void db_absent(struct fx *fx) { absent(fx, "db"); }
static void db_present_plain(struct fx *fx) {
  present(fx, "db", CQ_KIND_BUDGET, 10);
}

static void setup_table_full(struct fx *fx) {
  add_budgets(fx->pool, 7); /* with "base": 8, the table's first size */
}
static int op_budget_add_ex(struct fx *fx) {
  return cq_budget_add_ex(fx->pool, "mem", 1024, CQ_BUDGET_LONE);
}
static void mem_absent(struct fx *fx) { absent(fx, "mem"); }
static void mem_present(struct fx *fx) {
  present(fx, "mem", CQ_KIND_BUDGET, 1024);
  assert_int_equal(cqt_budget(fx->pool, "mem").flags, CQ_BUDGET_LONE);
  for (int i = 0; i < 7; i++) { /* the grown table kept every resource */
    char name[16];
    snprintf(name, sizeof(name), "r%d", i);
    present(fx, name, CQ_KIND_BUDGET, 1);
  }
}

static int op_class_add(struct fx *fx) {
  return cq_class_add(fx->pool, "jobs", 3);
}
static void jobs_absent(struct fx *fx) { absent(fx, "jobs"); }
static void jobs_present(struct fx *fx) {
  present(fx, "jobs", CQ_KIND_CLASS, 3);
  cq_req req;
  assert_cq_ok(cq_req_init(&req, fx->pool));
  assert_cq_ok(cq_req_set_class(&req, "jobs"));
}

/* The table grows (it moves) while grants hold and wait on its resources;
 * afterwards the waiter is still granted when the holder releases. */
static void waiter_cb(cq_grant *g, int status) {
  struct fx *fx = g->data;
  fx->waiter_calls++;
  fx->waiter_status = status;
}
static void setup_busy_table_full(struct fx *fx) {
  add_budgets(fx->pool, 7);
  assert_cq_ok(cq_req_init(&fx->req, fx->pool));
  assert_cq_ok(cq_req_add(&fx->req, "r3", 1));
  cq_grant_init(&fx->holder);
  cq_grant_init(&fx->waiter);
  fx->waiter.data = fx;
  assert_cq_ok(cq_grant_try(fx->pool, &fx->holder, &fx->req));
  assert_cq_ok(
      cq_grant_submit(fx->pool, &fx->waiter, &fx->req, CQ_NEVER, waiter_cb));
  assert_int_equal(cqt_waiting(fx->pool), 1);
}
static void mem_present_busy(struct fx *fx) {
  present(fx, "mem", CQ_KIND_BUDGET, 1024);
  assert_int_equal(cqt_budget(fx->pool, "r3").in_use, 1);
  assert_int_equal(cqt_budget(fx->pool, "r3").waiting, 1);
  assert_int_equal(fx->waiter_calls, 0);
  assert_cq_ok(cq_grant_release(fx->pool, &fx->holder));
  assert_int_equal(fx->waiter_calls, 1);
  assert_cq_ok(fx->waiter_status);
  assert_int_equal(cqt_budget(fx->pool, "r3").in_use, 1);
  assert_cq_ok(cq_grant_release(fx->pool, &fx->waiter));
}

/* A removed resource's slot is reused: only the resource is allocated. */
static void setup_removed(struct fx *fx) {
  assert_cq_ok(cq_budget_add(fx->pool, "old", 1));
  assert_cq_ok(cq_resource_remove(fx->pool, "old"));
}

/* Device pools: default ids, given ids (many devices), none. */
static int op_devices_add(struct fx *fx) {
  return cq_devices_add(fx->pool, "gpu", 4, NULL);
}
static void gpu_absent(struct fx *fx) {
  absent(fx, "gpu");
  cq_device_stats ds;
  assert_cq_err(cq_device_stats_get(fx->pool, "gpu", 0, &ds), CQ_ENOENT);
}
static void gpu_present(struct fx *fx) {
  present(fx, "gpu", CQ_KIND_DEVICES, 4 * CQ_DEVICE_MILLI);
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(fx->pool, "gpu", 3, &ds));
  assert_string_equal(ds.id, "3");
}

#define MANY_DEVICES 1000
static char many_ids[MANY_DEVICES][24];
static const char *many_id_ptrs[MANY_DEVICES];

static int op_devices_add_ids(struct fx *fx) {
  return cq_devices_add(fx->pool, "tpu", MANY_DEVICES, many_id_ptrs);
}
static void tpu_absent(struct fx *fx) { absent(fx, "tpu"); }
static void tpu_present(struct fx *fx) {
  present(fx, "tpu", CQ_KIND_DEVICES, (int64_t)MANY_DEVICES * CQ_DEVICE_MILLI);
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(fx->pool, "tpu", MANY_DEVICES - 1, &ds));
  assert_string_equal(ds.id, many_ids[MANY_DEVICES - 1]);
}

static int op_devices_add_none(struct fx *fx) {
  return cq_devices_add(fx->pool, "gpu", 0, NULL);
}
static void gpu0_present(struct fx *fx) {
  present(fx, "gpu", CQ_KIND_DEVICES, 0);
}

/* Resource specs: several items, a table that grows half-way, and GPU
 * detection for "gpu=auto" (its list on the same allocator). */
#define SPEC_MANY                                                              \
  "a=1, b:lone=2, c:class=3, gpu=2, tpu:devices=3, d=4, e=5, f=6, g=7"

static int op_spec(struct fx *fx) {
  return cq_pool_add_spec(fx->pool, SPEC_MANY, &fx->detect, fx->err,
                          sizeof(fx->err));
}
static const char *msg_err(struct fx *fx) { return fx->err; }
static const char *const spec_names[] = {"a", "b", "c", "gpu", "tpu",
                                         "d", "e", "f", "g"};
static void spec_absent(struct fx *fx) {
  for (size_t i = 0; i < sizeof(spec_names) / sizeof(spec_names[0]); i++)
    absent(fx, spec_names[i]);
}
static void spec_present(struct fx *fx) {
  present(fx, "b", CQ_KIND_BUDGET, 2);
  assert_int_equal(cqt_budget(fx->pool, "b").flags, CQ_BUDGET_LONE);
  present(fx, "c", CQ_KIND_CLASS, 3);
  present(fx, "gpu", CQ_KIND_DEVICES, 2000);
  present(fx, "tpu", CQ_KIND_DEVICES, 3000);
  present(fx, "g", CQ_KIND_BUDGET, 7);
  assert_string_equal(fx->err, "");
}

static void env_only(const char *name, const char *value) {
  assert_int_equal(unsetenv("CRONOQ_NUM_GPUS"), 0);
  assert_int_equal(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
  assert_int_equal(unsetenv("CRONOQ_NVIDIA_SMI"), 0);
  if (name != NULL)
    assert_int_equal(setenv(name, value, 1), 0);
}

static void setup_num_gpus(struct fx *fx) {
  (void)fx;
  env_only("CRONOQ_NUM_GPUS", "3");
}
static int op_spec_auto(struct fx *fx) {
  return cq_pool_add_spec(fx->pool, "gpu=auto, db=10", &fx->detect, fx->err,
                          sizeof(fx->err));
}
static void auto_absent(struct fx *fx) {
  absent(fx, "gpu");
  absent(fx, "db");
}
static void auto_present(struct fx *fx) {
  present(fx, "gpu", CQ_KIND_DEVICES, 3000);
  present(fx, "db", CQ_KIND_BUDGET, 10);
}

#define UUIDS                                                                  \
  "GPU-00000000-aaaa, GPU-11111111-bbbb, GPU-22222222-cccc, "                  \
  "GPU-33333333-dddd, GPU-44444444-eeee, MIG-55555555-ffff, 6, 7, 8, 9"
#define N_UUIDS 10

static void setup_cuda_visible(struct fx *fx) {
  (void)fx;
  env_only("CUDA_VISIBLE_DEVICES", UUIDS);
}
static void auto_uuid_present(struct fx *fx) {
  present(fx, "gpu", CQ_KIND_DEVICES, N_UUIDS * 1000);
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(fx->pool, "gpu", 5, &ds));
  assert_string_equal(ds.id, "MIG-55555555-ffff");
}

/* GPU detection itself: every source, and lists that grow (4, 8, 16). */
static int op_detect(struct fx *fx) {
  return cq_gpu_detect(&fx->list, &fx->detect);
}
static void list_empty(struct fx *fx) {
  /* cq_gpu_detect() frees what it built before it fails. */
  assert_int_equal(fx->list.count, 0);
  assert_null(fx->list.ids);
  cq_gpu_list_free(&fx->list); /* "in every case": must be harmless */
}
static void setup_num_gpus_many(struct fx *fx) {
  (void)fx;
  env_only("CRONOQ_NUM_GPUS", "9");
}
static void list_of_nine(struct fx *fx) {
  assert_int_equal(fx->list.count, 9);
  assert_string_equal(fx->list.ids[8], "8");
  assert_string_equal(fx->list.source, "CRONOQ_NUM_GPUS");
}
static void list_of_uuids(struct fx *fx) {
  assert_int_equal(fx->list.count, N_UUIDS);
  assert_string_equal(fx->list.ids[0], "GPU-00000000-aaaa");
  assert_string_equal(fx->list.ids[9], "9");
}

/* A stand-in for nvidia-smi: two GPUs, the second in MIG mode. */
static char fake_smi[64];
static bool fake_smi_ok;
#define SMI_OUTPUT                                                             \
  "GPU 0: NVIDIA H100 (UUID: GPU-0a0a0a0a-1111)\n"                             \
  "GPU 1: NVIDIA H100 (UUID: GPU-1b1b1b1b-2222)\n"                             \
  "  MIG 1g.10gb Device 0: (UUID: MIG-2c2c2c2c-3333)\n"                        \
  "  MIG 1g.10gb Device 1: (UUID: MIG-3d3d3d3d-4444)\n"                        \
  "GPU 2: NVIDIA H100 (UUID: GPU-4e4e4e4e-5555)\n"                             \
  "GPU 3: NVIDIA H100 (UUID: GPU-5f5f5f5f-6666)\n"                             \
  "GPU 4: NVIDIA H100 (UUID: GPU-6a6a6a6a-7777)\n"

static void make_fake_smi(void) {
  snprintf(fake_smi, sizeof(fake_smi), "/tmp/cq_oom_smi_XXXXXX");
  int fd = mkstemp(fake_smi);
  assert_true(fd >= 0);
  static const char script[] = "#!/bin/sh\ncat <<'EOF'\n" SMI_OUTPUT "EOF\n";
  assert_int_equal(write(fd, script, sizeof(script) - 1),
                   (ssize_t)(sizeof(script) - 1));
  assert_int_equal(fchmod(fd, 0700), 0);
  assert_int_equal(close(fd), 0);
  /* Where /tmp does not allow running it, detection finds no GPU. */
  cq_gpu_list l;
  cq_detect_opts o = CQ_DETECT_OPTS_INIT;
  o.nvidia_smi = fake_smi;
  o.timeout_ms = CQT_PATIENCE_MS; /* a loaded machine is not a hung one */
  env_only(NULL, NULL);
  assert_cq_ok(cq_gpu_detect(&l, &o));
  fake_smi_ok = l.count == 6;
  cq_gpu_list_free(&l);
}

static void setup_smi(struct fx *fx) {
  env_only(NULL, NULL);
  fx->detect.nvidia_smi = fake_smi;
  fx->detect.timeout_ms = CQT_PATIENCE_MS;
}
static void list_of_smi(struct fx *fx) {
  if (!fake_smi_ok) {
    assert_int_equal(fx->list.count, 0);
    return;
  }
  assert_int_equal(fx->list.count, 6);
  assert_string_equal(fx->list.source, "nvidia-smi");
  assert_string_equal(fx->list.ids[1], "MIG-2c2c2c2c-3333");
  assert_string_equal(fx->list.ids[5], "GPU-6a6a6a6a-7777");
}

/* The parsers, reached directly (as the fuzzers do): what they built
 * before failing is the caller's to free. */
static void list_ready(struct fx *fx) {
  memset(&fx->list, 0, sizeof(fx->list));
  fx->list.alloc_ = hooks;
}
static int op_parse_cuda(struct fx *fx) {
  list_ready(fx);
  int rc = cq__parse_cuda_visible(UUIDS, &fx->list);
  if (rc != 0)
    cq_gpu_list_free(&fx->list);
  return rc;
}
static int op_parse_smi(struct fx *fx) {
  list_ready(fx);
  int rc = cq__parse_nvidia_smi(SMI_OUTPUT, &fx->list);
  if (rc != 0)
    cq_gpu_list_free(&fx->list);
  return rc;
}
static void list_of_smi_parsed(struct fx *fx) {
  assert_int_equal(fx->list.count, 6);
  assert_string_equal(fx->list.ids[2], "MIG-3d3d3d3d-4444");
}

/* Snapshots larger than the stack list, and the metrics exposition. */
static void setup_many(struct fx *fx) { add_budgets(fx->pool, MANY_RES); }
static int op_snapshot(struct fx *fx) {
  static cq_resource_stats out[MANY_RES + 1];
  size_t n = 0;
  int rc = cq_pool_snapshot(fx->pool, out, MANY_RES + 1, &n);
  if (rc == 0)
    assert_int_equal(n, MANY_RES + 1);
  return rc;
}

static int count_writes(const char *text, size_t len, void *arg) {
  (void)text;
  (void)len;
  ((struct fx *)arg)->writes++;
  return 0;
}
static void setup_metrics(struct fx *fx) {
  assert_cq_ok(cq_devices_add(fx->pool, "gpu", 2, NULL));
  assert_cq_ok(cq_class_add(fx->pool, "jobs", 2));
}
static int op_metrics(struct fx *fx) {
  fx->writes = 0;
  return cq_pool_write_metrics(fx->pool, count_writes, fx);
}
static void nothing_written(struct fx *fx) { assert_int_equal(fx->writes, 0); }
static void written(struct fx *fx) { assert_true(fx->writes > 10); }

#ifdef CQT_WITH_UV
/* The libuv adapter: its one allocation, on a loop of its own. */
static void setup_loop(struct fx *fx) {
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  fx->loop.data = fx;
}
static int op_uv_init(struct fx *fx) {
  return cq_uv_init(&fx->uv, &fx->loop, fx->pool, &hooks);
}
static void uv_absent(struct fx *fx) {
  assert_int_equal(uv_loop_alive(&fx->loop), 0); /* no handle left */
}
static void uv_closed(cq_uv *uv) {
  struct fx *fx = *cq_uv_data(uv);
  fx->uv_closed++;
}
static void uv_present(struct fx *fx) {
  assert_ptr_equal(cq_uv_pool(fx->uv), fx->pool);
  *cq_uv_data(fx->uv) = fx;
  assert_cq_ok(cq_uv_close(fx->uv, uv_closed));
  assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(fx->uv_closed, 1);
}
#endif

static const struct oom_case cases[] = {
    {"pool_create", NULL, op_pool_create, no_pool_made, pool_made, NULL, 1},
    {"pool_create_with_event_hook", NULL, op_pool_create_events, no_pool_made,
     pool_made, NULL, 2},
    {"budget_add_first_resource", setup_empty, op_budget_add, db_absent,
     db_present_plain, NULL, 2},
    {"budget_add", NULL, op_budget_add, db_absent, db_present_plain, NULL, 1},
    {"budget_add_ex_grows_the_table", setup_table_full, op_budget_add_ex,
     mem_absent, mem_present, NULL, 2},
    {"budget_add_grows_the_table_under_holders_and_waiters",
     setup_busy_table_full, op_budget_add_ex, mem_absent, mem_present_busy,
     NULL, 2},
    {"budget_add_reuses_a_removed_slot", setup_removed, op_budget_add,
     db_absent, db_present_plain, NULL, 1},
    {"class_add", NULL, op_class_add, jobs_absent, jobs_present, NULL, 1},
    {"devices_add", NULL, op_devices_add, gpu_absent, gpu_present, NULL, 2},
    {"devices_add_many_with_ids", NULL, op_devices_add_ids, tpu_absent,
     tpu_present, NULL, 2},
    {"devices_add_none", NULL, op_devices_add_none, gpu_absent, gpu0_present,
     NULL, 1},
    {"pool_add_spec", NULL, op_spec, spec_absent, spec_present, msg_err, 11},
    {"pool_add_spec_gpu_auto_num_gpus", setup_num_gpus, op_spec_auto,
     auto_absent, auto_present, msg_err, 6},
    {"pool_add_spec_gpu_auto_cuda_visible", setup_cuda_visible, op_spec_auto,
     auto_absent, auto_uuid_present, msg_err, 14},
    {"gpu_detect_num_gpus", setup_num_gpus_many, op_detect, list_empty,
     list_of_nine, NULL, 12},
    {"gpu_detect_cuda_visible", setup_cuda_visible, op_detect, list_empty,
     list_of_uuids, NULL, 13},
    {"gpu_detect_nvidia_smi", setup_smi, op_detect, list_empty, list_of_smi,
     NULL, 1},
    {"parse_cuda_visible", NULL, op_parse_cuda, list_empty, list_of_uuids, NULL,
     13},
    {"parse_nvidia_smi_mig", NULL, op_parse_smi, list_empty, list_of_smi_parsed,
     NULL, 9},
    {"pool_snapshot_many", setup_many, op_snapshot, NULL, NULL, NULL, 1},
    {"pool_write_metrics", setup_metrics, op_metrics, nothing_written, written,
     NULL, 4},
#ifdef CQT_WITH_UV
    {"uv_init", setup_loop, op_uv_init, uv_absent, uv_present, NULL, 1},
#endif
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* Points per case, filled in by each case's test as it runs. */
static int points_of[N_CASES];
static bool points_known[N_CASES];

/* Run one operation failing its Nth allocation (only that one, or every
 * one from it on), for N = 1, 2, ... until it no longer reaches N.
 * Returns the number of points. */
static int run_mode(const struct oom_case *c, bool sticky) {
  int points = 0;
  for (long n = 1;; n++) {
    struct fx fx;
    fx_open(&fx);
    if (c->setup != NULL)
      c->setup(&fx);
    static struct state before, after;
    state_take(fx.pool, &before);
    long live0 = alloc_live(), grave0 = kept_blocks(fx.pool);
    snprintf(fx.err, sizeof(fx.err), "untouched");

    alloc_arm(n, sticky);
    int rc = c->op(&fx);
    long calls = A.calls, failed = A.failed;
    alloc_disarm();

    if (failed == 0) {
      if (rc != 0)
        fail_msg("%s succeeded in allocating but returned %s: %s", c->name,
                 cq_err_name(rc), fx.err);
      assert_int_equal(calls, n - 1);
      if (c->present != NULL)
        c->present(&fx);
      fx_usable(&fx);
      fx_close(&fx);
      return points;
    }
    if (rc != CQ_ENOMEM)
      fail_msg("%s with allocation %ld failing%s returned %s (%d), expected "
               "ENOMEM",
               c->name, n, sticky ? " (and every later one)" : "",
               cq_err_name(rc), rc);
    if (c->message != NULL && strstr(c->message(&fx), "out of memory") == NULL)
      fail_msg("%s, allocation %ld failing: message \"%s\" does not say out "
               "of memory",
               c->name, n, c->message(&fx));
    long kept = kept_blocks(fx.pool) - grave0;
    if (alloc_live() != live0 + kept)
      fail_msg("%s, allocation %ld failing: %ld blocks live before, %ld after "
               "(%ld more kept by the pool)",
               c->name, n, live0, alloc_live(), kept);
    state_take(fx.pool, &after);
    state_equal(&before, &after);
    if (c->absent != NULL)
      c->absent(&fx);
    fx_usable(&fx);

    /* The same operation, without a failure, succeeds. */
    snprintf(fx.err, sizeof(fx.err), "untouched");
    rc = c->op(&fx);
    if (rc != 0)
      fail_msg("%s failed again after an injected failure: %s: %s", c->name,
               cq_err_name(rc), fx.err);
    if (c->present != NULL)
      c->present(&fx);
    fx_close(&fx);
    points++;
  }
}

static void
test_every_allocation_failure_is_enomem_and_leaves_no_trace(void **state) {
  const struct oom_case *c = *state;
  int once = run_mode(c, false);
  int sticky = run_mode(c, true);
  assert_int_equal(once, sticky); /* the same calls, failed differently */
  if (once < c->min_points)
    fail_msg("%s allocated %d times, expected at least %d", c->name, once,
             c->min_points);
  points_of[c - cases] = once;
  points_known[c - cases] = true;
}

/* ------------------------------------------------------------------------ */
/* The paths that must not allocate at all                                   */
/* ------------------------------------------------------------------------ */

#define PARKED 200

static int cb_calls, cb_granted;
static void count_cb(cq_grant *g, int status) {
  (void)g;
  cb_calls++;
  cb_granted += status == 0;
}

static void expect_no_allocation(const char *what) {
  if (A.calls != 0)
    fail_msg("%s made %ld allocation calls; the acquire and release paths "
             "must make none",
             what, A.calls);
}

static void hot_paths(unsigned flags, cq_event_fn hook) {
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  cfg.flags = flags;
  cfg.on_event = hook;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_pool_add_spec(p, "gpu=4, db=10, mem:lone=100, jobs:class=8",
                                NULL, NULL, 0));
  assert_cq_ok(cq_budget_add(p, "gone", 1));
  alloc_arm(1, true); /* every allocation from here on fails */

  /* Building requests. */
  static cq_req big, small, frac, whole, lone;
  assert_cq_ok(cq_req_init(&big, p));
  assert_cq_ok(cq_req_add(&big, "db", 5));
  assert_cq_ok(cq_req_set_class(&big, "jobs"));
  assert_cq_ok(cq_req_init(&small, p));
  assert_cq_ok(cq_req_parse(&small, "db=1, class=jobs"));
  assert_cq_ok(cq_req_init(&frac, p));
  assert_cq_ok(cq_req_add_str(&frac, "gpu", "0.25"));
  assert_cq_ok(cq_req_add(&frac, "db", 1));
  assert_cq_ok(cq_req_set_hold_limit(&frac, 60000));
  assert_cq_ok(cq_req_init(&whole, p));
  assert_cq_ok(cq_req_add_devices(&whole, "gpu", 2));
  assert_cq_ok(cq_req_init(&lone, p));
  assert_cq_ok(cq_req_add(&lone, "mem", 1000));
  assert_cq_err(cq_req_add(&lone, "nosuch", 1), CQ_ENOENT);
  expect_no_allocation("building requests");

  /* Holders, then many parked waiters of each style. */
  static cq_grant g_big, g_lone, parked[PARKED], held[4];
  cq_grant_init(&g_big);
  cq_grant_init(&g_lone);
  assert_cq_ok(cq_grant_acquire(p, &g_big, &big, CQ_NEVER));
  assert_cq_ok(cq_grant_try(p, &g_lone, &lone));
  for (int i = 0; i < 4; i++) {
    cq_grant_init(&held[i]);
    assert_cq_ok(cq_grant_try(p, &held[i], &frac));
  }
  cb_calls = cb_granted = 0;
  for (int i = 0; i < PARKED; i++) {
    cq_grant_init(&parked[i]);
    const cq_req *r = i % 3 == 0 ? &small : i % 3 == 1 ? &whole : &lone;
    int64_t deadline = i % 2 ? CQ_NEVER : cq_now() + CQT_PATIENCE_MS;
    assert_cq_ok(cq_grant_submit(p, &parked[i], r, deadline, count_cb));
  }
  assert_true(cqt_waiting(p) > PARKED / 2);
  assert_cq_err(cq_grant_try(p, &g_big, &small), CQ_ESTATE);
  expect_no_allocation("acquiring and parking");

  /* Asking about the pool. */
  int64_t copies;
  assert_cq_ok(cq_req_headroom(p, &frac, &copies));
  cq_task tasks[] = {{"big", &big}, {"whole", &whole}};
  assert_cq_ok(cq_tasks_validate(p, tasks, 2, NULL, NULL));
  cq_room room;
  assert_cq_ok(cq_pool_room(p, "jobs", &room));
  cq_resource_stats snap[8];
  size_t n;
  assert_cq_ok(cq_pool_snapshot(p, snap, 8, &n));
  cq_device_stats ds;
  assert_cq_ok(cq_device_stats_get(p, "gpu", 0, &ds));
  int64_t next;
  assert_cq_ok(cq_pool_expire(p, &next));
  char visible[64];
  assert_cq_ok(cq_grant_cuda_visible(&held[0], "gpu", visible, 64));
  expect_no_allocation("stats and queries");

  /* Changing capacities, devices, removing. */
  assert_cq_ok(cq_budget_set_capacity(p, "db", 12));
  assert_cq_ok(cq_class_set_max(p, "jobs", 9));
  assert_cq_ok(cq_device_set_online(p, "gpu", 3, 0));
  assert_cq_ok(cq_device_set_online(p, "gpu", 3, 1));
  assert_cq_ok(cq_resource_remove(p, "gone"));
  expect_no_allocation("capacity changes");

  /* Cancel some, release everything; the waiters are granted in turn. */
  for (int i = 0; i < PARKED; i += 7)
    (void)cq_grant_cancel(p, &parked[i]);
  assert_cq_ok(cq_grant_release_part(p, &g_big, "db", 5));
  uint32_t dev;
  assert_int_equal(cq_grant_devices(&held[0], "gpu", &dev, 1), 1);
  assert_cq_ok(cq_grant_release_device(p, &held[0], "gpu", dev, 100));
  assert_cq_ok(cq_grant_release(p, &g_big));
  assert_cq_ok(cq_grant_release(p, &g_lone));
  for (int i = 0; i < 4; i++)
    assert_cq_ok(cq_grant_release(p, &held[i]));
  for (int round = 0; round < PARKED && cqt_waiting(p) > 0; round++)
    for (int i = 0; i < PARKED; i++)
      if (cq_grant_is_held(&parked[i]))
        assert_cq_ok(cq_grant_release(p, &parked[i]));
  for (int i = 0; i < PARKED; i++)
    if (cq_grant_is_held(&parked[i]))
      assert_cq_ok(cq_grant_release(p, &parked[i]));
  assert_int_equal(cqt_waiting(p), 0);
  assert_int_equal(cb_calls, PARKED);
  assert_cq_ok(cq_pool_close(p));
  expect_no_allocation("releasing and cancelling");
  alloc_disarm();
  assert_cq_ok(cq_pool_destroy(p));
  assert_int_equal(alloc_live(), 0);
}

static void quiet_hook(const cq_event *ev, void *arg) {
  (void)ev;
  (void)arg;
}

static void test_acquire_and_release_paths_never_allocate(void **state) {
  (void)state;
  hot_paths(0, NULL);
  hot_paths(CQ_POOL_STAGED_CLAIMS | CQ_POOL_BACKFILL, quiet_hook);
}

#ifdef CQT_WITH_UV
static void uv_cb(cq_uv_req *r, int status) {
  (void)r;
  cb_calls++;
  cb_granted += status == 0;
}

static void test_uv_acquire_and_release_never_allocate(void **state) {
  (void)state;
  cq_pool_config cfg = CQ_POOL_CONFIG_INIT;
  cfg.alloc = &hooks;
  cq_pool *p;
  assert_cq_ok(cq_pool_create(&p, &cfg));
  assert_cq_ok(cq_budget_add(p, "db", 1));
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  cq_uv *uv;
  assert_cq_ok(cq_uv_init(&uv, &loop, p, &hooks));
  cq_req req;
  assert_cq_ok(cq_req_init(&req, p));
  assert_cq_ok(cq_req_add(&req, "db", 1));
  static cq_uv_req r[16];
  cb_calls = cb_granted = 0;
  alloc_arm(1, true);
  for (int i = 0; i < 16; i++) {
    cq_uv_req_init(&r[i]);
    assert_cq_ok(
        cq_uv_acquire(uv, &r[i], &req, cq_now() + CQT_PATIENCE_MS, uv_cb));
  }
  assert_int_equal(cb_granted, 1);
  for (int i = 0; i < 16; i++) {
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT) >= 0, 1);
    for (int k = 0; k < 16; k++)
      if (cq_grant_is_held(&r[k].grant))
        assert_cq_ok(cq_uv_release(&r[k]));
  }
  assert_int_equal(cb_granted, 16);
  expect_no_allocation("the adapter's acquires and releases");
  alloc_disarm();
  assert_cq_ok(cq_uv_close(uv, NULL));
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_cq_ok(cq_pool_destroy(p));
  assert_int_equal(alloc_live(), 0);
}
#endif

/* Printed for docs/RELIABILITY.md: the points of every case. A case whose
 * test has not run in this process (this test run alone) is counted here,
 * failing each of its allocations once. */
static void test_report_points_covered(void **state) {
  (void)state;
  int total = 0, ops = 0;
  for (size_t i = 0; i < N_CASES; i++) {
    if (!points_known[i]) {
      points_of[i] = run_mode(&cases[i], false);
      points_known[i] = true;
    }
    printf("  %-54s %3d\n", cases[i].name, points_of[i]);
    total += points_of[i];
    ops += points_of[i] > 0;
  }
  printf("OOM points covered: %d, over %d operations\n", total, ops);
  assert_int_equal(A.null_frees, 0);
  assert_int_equal(ops, (int)N_CASES);
}

int main(void) {
  for (int i = 0; i < MANY_DEVICES; i++) {
    snprintf(many_ids[i], sizeof(many_ids[i]), "GPU-%08x-%04d", (unsigned)i, i);
    many_id_ptrs[i] = many_ids[i];
  }
  make_fake_smi();
  struct CMUnitTest tests[N_CASES + 3];
  size_t n = 0;
  for (size_t i = 0; i < N_CASES; i++) {
    struct CMUnitTest t = {
        cases[i].name,
        test_every_allocation_failure_is_enomem_and_leaves_no_trace, NULL, NULL,
        (void *)&cases[i]};
    tests[n++] = t;
  }
  struct CMUnitTest hot =
      cmocka_unit_test(test_acquire_and_release_paths_never_allocate);
  tests[n++] = hot;
#ifdef CQT_WITH_UV
  struct CMUnitTest uvhot =
      cmocka_unit_test(test_uv_acquire_and_release_never_allocate);
  tests[n++] = uvhot;
#endif
  struct CMUnitTest report = cmocka_unit_test(test_report_points_covered);
  tests[n++] = report;
  int rc = _cmocka_run_group_tests("test_oom", tests, n, NULL, NULL);
  unlink(fake_smi);
  free(A.set);
  return rc;
}

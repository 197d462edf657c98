/*
 * thread_pool: N worker threads take tasks from a queue, each task attempt
 * between an acquire and a release of its resources. This is the whole
 * integration a thread-pool host scheduler needs: see run_attempt().
 *
 *   thread_pool [WORKERS] [TASKS]
 *
 * Tasks of two kinds share the pool: "query" tasks need a database
 * connection, "report" tasks a connection and the licensed report tool.
 * The program checks, as it goes, that no limit is ever exceeded.
 */
#include <cronoq/cronoq.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DB_CONNECTIONS 3
#define LICENSES 1

static cq_pool *pool;
static cq_req query_req, report_req;
static atomic_int next_task, tasks_total;
static atomic_int db_in_use, license_in_use, peak_db, peak_license;

static void note_peak(atomic_int *peak, int now) {
  int p = atomic_load(peak);
  while (now > p && !atomic_compare_exchange_weak(peak, &p, now)) {
  }
}

static void do_work(int task, int report) {
  int db = atomic_fetch_add(&db_in_use, 1) + 1;
  int lic = report ? atomic_fetch_add(&license_in_use, 1) + 1 : 0;
  note_peak(&peak_db, db);
  note_peak(&peak_license, lic);
  if (db > DB_CONNECTIONS || lic > LICENSES) {
    fprintf(stderr, "task %d: limit exceeded (db %d, license %d)\n", task, db,
            lic);
    exit(1);
  }
  struct timespec ts = {0, 1000000}; /* 1 ms of "work" */
  nanosleep(&ts, NULL);
  if (report)
    atomic_fetch_sub(&license_in_use, 1);
  atomic_fetch_sub(&db_in_use, 1);
}

/* The integration: acquire, run, release, whatever the outcome. */
static int run_attempt(int task, const cq_req *req, int report) {
  cq_grant grant;
  cq_grant_init(&grant);
  int rc = cq_grant_acquire(pool, &grant, req, cq_now() + 60000);
  if (rc != 0)
    return rc; /* timed out, cancelled or closed: nothing is held */
  do_work(task, report);
  return cq_grant_release(pool, &grant);
}

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    int task = atomic_fetch_add(&next_task, 1);
    if (task >= atomic_load(&tasks_total))
      return NULL;
    int report = task % 4 == 0;
    if (run_attempt(task, report ? &report_req : &query_req, report) != 0)
      return (void *)1;
  }
}

int main(int argc, char **argv) {
  int workers = argc > 1 ? atoi(argv[1]) : 8;
  atomic_store(&tasks_total, argc > 2 ? atoi(argv[2]) : 400);
  if (workers < 1 || workers > 256)
    return 2;

  cq_pool_create(&pool, NULL);
  cq_budget_add(pool, "warehouse-db", DB_CONNECTIONS);
  cq_budget_add(pool, "report-license", LICENSES);
  cq_req_init(&query_req, pool);
  cq_req_parse(&query_req, "warehouse-db=1");
  cq_req_init(&report_req, pool);
  cq_req_parse(&report_req, "warehouse-db=1,report-license=1");

  pthread_t th[256];
  for (int i = 0; i < workers; i++)
    pthread_create(&th[i], NULL, worker, NULL);
  int failed = 0;
  for (int i = 0; i < workers; i++) {
    void *ret;
    pthread_join(th[i], &ret);
    failed |= ret != NULL;
  }
  printf("%d tasks on %d workers: at most %d of %d connections and %d of %d "
         "licenses in use at once\n",
         atomic_load(&tasks_total), workers, atomic_load(&peak_db),
         DB_CONNECTIONS, atomic_load(&peak_license), LICENSES);
  /* With more workers than connections, every connection was used. */
  if (workers > DB_CONNECTIONS && atomic_load(&peak_db) != DB_CONNECTIONS)
    failed = 1;
  return cq_pool_destroy(pool) != 0 || failed;
}

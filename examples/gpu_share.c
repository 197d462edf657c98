/*
 * gpu_share: run N copies of a command at once, each on a fraction of a GPU.
 *
 *   gpu_share FRACTION N COMMAND [ARG...]
 *   CRONOQ_NUM_GPUS=2 gpu_share 0.5 4 sh -c 'echo $CUDA_VISIBLE_DEVICES'
 *
 * The GPUs come from detection (CRONOQ_NUM_GPUS, CUDA_VISIBLE_DEVICES or
 * nvidia-smi). Each copy acquires FRACTION of one GPU (or whole GPUs, "2"),
 * starts the command with CUDA_VISIBLE_DEVICES naming what it got, waits for
 * it and releases, whatever the exit status. This is how a host scheduler
 * passes a device grant to a child process.
 */
#include <cronoq/cronoq.h>

#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

static cq_pool *pool;
static cq_req req;
static char **command;

/* The environment of the child: ours, with CUDA_VISIBLE_DEVICES replaced. */
static char **child_env(const char *visible, char *entry, size_t len) {
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 2, sizeof(*env));
  if (env == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0)
      env[k++] = environ[i];
  snprintf(entry, len, "CUDA_VISIBLE_DEVICES=%s", visible);
  env[k] = entry;
  return env;
}

static void *run_copy(void *arg) {
  long copy = (long)arg;
  cq_grant grant;
  cq_grant_init(&grant);
  int rc = cq_grant_acquire(pool, &grant, &req, CQ_NEVER);
  if (rc != 0) {
    fprintf(stderr, "copy %ld: %s\n", copy, cq_strerror(rc));
    return (void *)1;
  }
  char visible[256], entry[300];
  cq_grant_cuda_visible(&grant, "gpu", visible, sizeof(visible));
  char **env = child_env(visible, entry, sizeof(entry));
  pid_t pid;
  int status = 1;
  if (env != NULL &&
      posix_spawnp(&pid, command[0], NULL, NULL, command, env) == 0)
    waitpid(pid, &status, 0);
  free(env);
  cq_grant_release(pool, &grant); /* whatever the command's outcome */
  return (void *)(long)(status != 0);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: gpu_share FRACTION N COMMAND [ARG...]\n");
    return 2;
  }
  long copies = strtol(argv[2], NULL, 10);
  command = &argv[3];

  cq_gpu_list gpus;
  if (cq_gpu_detect(&gpus, NULL) != 0) {
    fprintf(stderr, "gpu detection: %s\n", gpus.error);
    return 1;
  }
  fprintf(stderr, "%zu GPU(s) from %s\n", gpus.count, gpus.source);
  cq_pool_create(&pool, NULL);
  cq_devices_add(pool, "gpu", gpus.count, (const char *const *)gpus.ids);
  cq_gpu_list_free(&gpus);

  cq_req_init(&req, pool);
  if (cq_req_add_str(&req, "gpu", argv[1]) != 0) {
    fprintf(stderr, "%s\n", cq_req_error(&req));
    return 1;
  }
  pthread_t *threads = calloc((size_t)copies, sizeof(*threads));
  for (long i = 0; i < copies; i++)
    pthread_create(&threads[i], NULL, run_copy, (void *)i);
  int failed = 0;
  for (long i = 0; i < copies; i++) {
    void *ret;
    pthread_join(threads[i], &ret);
    failed |= ret != NULL;
  }
  free(threads);
  cq_pool_destroy(pool);
  return failed;
}

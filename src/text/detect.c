/*
 * GPU detection: which GPUs this process may use, and their ids for
 * CUDA_VISIBLE_DEVICES.
 *
 * Sources, first match wins: CRONOQ_NUM_GPUS (a count), CUDA_VISIBLE_DEVICES
 * (the ids, as CUDA will read them), `nvidia-smi -L` (UUIDs, or indices).
 * Only text that cannot mean anything is an error; a machine without
 * nvidia-smi, or where it fails or hangs, simply has no GPUs. The parsers
 * take plain strings so that tests and fuzzers can reach them directly.
 */
/* pipe2() is in glibc's GNU set (and POSIX.1-2024). */
#define _GNU_SOURCE
#include "text/text.h"

#include "util/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 5000
#define OUTPUT_MAX ((size_t)64 * 1024)
/* How long a killed child has to end before detection leaves it behind. */
#define KILL_WAIT_MS 500

static void *list_alloc(cq_gpu_list *l, size_t size) {
  return l->alloc_.alloc(size, l->alloc_.arg);
}

/* Append an id of `len` bytes; CQ_ENOMEM or 0. */
static int list_push(cq_gpu_list *l, const char *id, size_t len) {
  if (l->count == l->cap_) {
    size_t cap = l->cap_ ? l->cap_ * 2 : 4;
    char **grown =
        l->alloc_.realloc(l->ids, cap * sizeof(*grown), l->alloc_.arg);
    if (grown == NULL)
      return CQ_ENOMEM;
    l->ids = grown;
    l->cap_ = cap;
  }
  char *copy = list_alloc(l, len + 1);
  if (copy == NULL)
    return CQ_ENOMEM;
  memcpy(copy, id, len);
  copy[len] = '\0';
  l->ids[l->count++] = copy;
  return 0;
}

void cq_gpu_list_free(cq_gpu_list *list) {
  if (list == NULL || list->alloc_.free == NULL)
    return;
  for (size_t i = 0; i < list->count; i++) /* each set by list_push() */
    list->alloc_.free(list->ids[i], list->alloc_.arg);
  if (list->ids != NULL) /* the hooks are never handed NULL */
    list->alloc_.free(list->ids, list->alloc_.arg);
  list->ids = NULL;
  list->count = 0;
  list->cap_ = 0;
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool id_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '-' || c == '/' || c == '_';
}

/* Whether one of the first n ids of the list is [id, id + len). */
static bool list_has(const cq_gpu_list *l, size_t n, const char *id,
                     size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(l->ids[i]) == len && memcmp(l->ids[i], id, len) == 0)
      return true;
  return false;
}

/* An entry of CUDA_VISIBLE_DEVICES: an index, or a GPU-/MIG- UUID. */
static bool valid_entry(const char *s, size_t len) {
  if (len == 0 || len > CQ_DEVICE_ID_MAX)
    return false;
  bool digits = true;
  for (size_t i = 0; i < len; i++) {
    if (!id_char(s[i]))
      return false;
    digits = digits && is_digit(s[i]);
  }
  return digits || (len > 4 &&
                    (strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0));
}

int cq__parse_cuda_visible(const char *text, cq_gpu_list *out) {
  const char *p = text;
  while (is_space(*p))
    p++;
  if (*p == '\0')
    return 0; /* set but empty: no devices */
  for (;;) {
    while (is_space(*p))
      p++;
    const char *start = p;
    while (*p != ',' && *p != '\0')
      p++;
    const char *end = p;
    while (end > start && is_space(end[-1]))
      end--;
    size_t len = (size_t)(end - start);
    if (!valid_entry(start, len)) {
      snprintf(out->error, sizeof(out->error),
               "CUDA_VISIBLE_DEVICES: cannot use entry \"%.*s\" in \"%.60s\"",
               (int)(len > 60 ? 60 : len), start, text);
      return CQ_EPARSE;
    }
    if (list_has(out, out->count, start, len)) {
      snprintf(out->error, sizeof(out->error),
               "CUDA_VISIBLE_DEVICES: \"%.*s\" appears twice in \"%.60s\"",
               (int)(len > 60 ? 60 : len), start, text);
      return CQ_EPARSE;
    }
    if (out->count >= CQ_DEVICES_MAX) {
      snprintf(out->error, sizeof(out->error),
               "CUDA_VISIBLE_DEVICES: more than %d entries", CQ_DEVICES_MAX);
      return CQ_EPARSE;
    }
    int rc = list_push(out, start, len);
    if (rc != 0)
      return rc;
    if (*p == '\0')
      return 0;
    p++; /* past the comma */
  }
}

/* Find the UUID of a line "... (UUID: X)": its start and length. */
static bool find_uuid(const char *line, size_t n, const char **uuid,
                      size_t *len) {
  static const char tag[] = "(UUID: ";
  for (size_t i = 0; i + sizeof(tag) - 1 <= n; i++) {
    if (memcmp(line + i, tag, sizeof(tag) - 1) != 0)
      continue;
    const char *u = line + i + sizeof(tag) - 1;
    size_t k = 0;
    while (u + k < line + n && u[k] != ')')
      k++;
    if (u + k == line + n || !valid_entry(u, k))
      return false;
    *uuid = u;
    *len = k;
    return true;
  }
  return false;
}

/*
 * `nvidia-smi -L` prints one line per GPU, "GPU <index>: <name> (UUID:
 * <uuid>)", and, under a GPU in MIG mode, indented lines "MIG <profile>
 * Device <n>: (UUID: MIG-...)". CUDA then sees the MIG devices instead of
 * their GPU, so those replace it.
 */
int cq__parse_nvidia_smi(const char *text, cq_gpu_list *out) {
  const char *line = text;
  size_t gpu_at = 0; /* index in `out` of the last GPU line */
  bool gpu_has_mig = false;
  while (*line != '\0') {
    size_t n = strcspn(line, "\n");
    const char *next = line[n] == '\n' ? line + n + 1 : line + n;
    size_t lead = 0;
    while (lead < n && (is_space(line[lead]) || line[lead] == '\r'))
      lead++;
    size_t trail = n;
    while (trail > lead &&
           (is_space(line[trail - 1]) || line[trail - 1] == '\r'))
      trail--;
    const char *s = line + lead;
    size_t len = trail - lead;
    const char *uuid = NULL;
    size_t ulen = 0;
    int rc = 0;
    if (len == 0) {
      /* blank line */
    } else if (lead == 0 && len > 4 && memcmp(s, "GPU ", 4) == 0 &&
               is_digit(s[4])) {
      size_t k = 4;
      while (k < len && is_digit(s[k]))
        k++;
      if (k >= len || s[k] != ':')
        goto bad;
      gpu_at = out->count;
      gpu_has_mig = false;
      if (find_uuid(s, len, &uuid, &ulen))
        rc = list_push(out, uuid, ulen);
      else if (valid_entry(s + 4, k - 4))
        rc = list_push(out, s + 4, k - 4);
      else
        goto bad; /* an index no device id can hold (found by fuzzing) */
    } else if (lead > 0 && len > 4 && memcmp(s, "MIG ", 4) == 0 &&
               out->count > 0) {
      if (!find_uuid(s, len, &uuid, &ulen))
        goto bad;
      if (!gpu_has_mig) {
        /* The GPU itself is not usable by CUDA in MIG mode. */
        out->alloc_.free(out->ids[gpu_at], out->alloc_.arg);
        memmove(&out->ids[gpu_at], &out->ids[gpu_at + 1],
                (out->count - gpu_at - 1) * sizeof(out->ids[0]));
        out->count--;
        gpu_has_mig = true;
      }
      rc = list_push(out, uuid, ulen);
    } else {
      goto bad;
    }
    if (rc != 0)
      return rc;
    if (out->count > CQ_DEVICES_MAX) {
      snprintf(out->error, sizeof(out->error),
               "nvidia-smi -L: more than %d devices", CQ_DEVICES_MAX);
      return CQ_EPARSE;
    }
    line = next;
    continue;
  bad:
    snprintf(out->error, sizeof(out->error),
             "nvidia-smi -L printed an unexpected line: \"%.*s\"",
             (int)(len > 100 ? 100 : len), s);
    return CQ_EPARSE;
  }
  /* Two devices with one id could not be told apart in
   * CUDA_VISIBLE_DEVICES, and a device pool refuses them. */
  for (size_t i = 1; i < out->count; i++)
    if (list_has(out, i, out->ids[i], strlen(out->ids[i]))) {
      snprintf(out->error, sizeof(out->error),
               "nvidia-smi -L: \"%.60s\" is listed twice", out->ids[i]);
      return CQ_EPARSE;
    }
  return 0;
}

/* Reap child `pid`, waiting until `deadline` at the latest (one look if it
 * has passed): 1 reaped (its status in *status), 0 still running, -1 gone
 * (reaped by someone else, so its pid is no longer ours to signal). */
static int reap_by(pid_t pid, int64_t deadline, int *status) {
  for (;;) {
    pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid)
      return 1;
    if (w < 0 && errno != EINTR)
      return -1;
    if (cq_now() >= deadline)
      return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/*
 * Run `cmd -L` and collect its standard output into buf (NUL-terminated).
 * Returns true only when it ran to completion with exit status 0 within
 * the time limit.
 *
 * Both ends of the pipe are close-on-exec from the start: a process that
 * another thread starts meanwhile must not inherit the write end, or the
 * output would not end until that process does. The child's stdout is a
 * dup2() of the write end, which does not carry the flag.
 */
static bool run_nvidia_smi(const char *cmd, int64_t timeout_ms, char *buf,
                           size_t cap) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return false;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  (void)posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  (void)posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
                                         O_WRONLY, 0);
  (void)posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null",
                                         O_RDONLY, 0);
  char *argv[] = {(char *)cmd, (char *)"-L", NULL};
  pid_t pid;
  int spawned = posix_spawnp(&pid, cmd, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    return false; /* not installed: no GPUs */
  }

  int64_t deadline = cq_now() + timeout_ms;
  size_t used = 0;
  bool timed_out = false;
  for (;;) {
    int64_t left = deadline - cq_now();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      continue;
    char tmp[4096];
    ssize_t got = read(fds[0], tmp, sizeof(tmp));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break; /* end of output */
    size_t take = (size_t)got;
    if (used + take > cap - 1)
      take = cap - 1 - used;
    memcpy(buf + used, tmp, take);
    used += take;
  }
  close(fds[0]);
  buf[used] = '\0';

  /* Once the output has ended the process has the rest of the time to
   * exit. One still running then is hung: treat it as no GPUs. SIGKILL
   * ends a process only once it leaves the kernel, and an nvidia-smi that
   * hangs is often stuck in a driver call, so the wait after the kill is
   * KILL_WAIT_MS at most; a child left behind then becomes a zombie when
   * it ends, until the process reaps its children (the header says so). */
  int status = 0;
  int reaped = reap_by(pid, timed_out ? 0 : deadline, &status);
  if (reaped == 0) {
    (void)kill(pid, SIGKILL);
    (void)reap_by(pid, cq_now() + KILL_WAIT_MS, &status);
    return false;
  }
  return reaped == 1 && !timed_out && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

/* CRONOQ_NUM_GPUS: a count, digits with optional surrounding blanks. */
static int parse_count(const char *text, cq_gpu_list *out) {
  const char *p = text;
  while (is_space(*p))
    p++;
  size_t n = 0;
  bool any = false;
  for (; is_digit(*p); p++) {
    any = true;
    n = n * 10 + (size_t)(*p - '0');
    if (n > CQ_DEVICES_MAX)
      break;
  }
  while (is_space(*p))
    p++;
  if (!any || *p != '\0' || n > CQ_DEVICES_MAX) {
    snprintf(out->error, sizeof(out->error),
             "CRONOQ_NUM_GPUS: expected a count of GPUs (0 to %d), got "
             "\"%.60s\"",
             CQ_DEVICES_MAX, text);
    return CQ_EPARSE;
  }
  for (size_t i = 0; i < n; i++) {
    char id[24];
    int len = snprintf(id, sizeof(id), "%zu", i);
    int rc = list_push(out, id, (size_t)len);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int cq_gpu_detect(cq_gpu_list *out, const cq_detect_opts *opts) {
  static const cq_detect_opts defaults = CQ_DETECT_OPTS_INIT;
  if (out == NULL)
    return CQ_EINVAL;
  if (opts == NULL)
    opts = &defaults;
  memset(out, 0, sizeof(*out));
  out->source = "none";
  for (size_t i = 0; i < sizeof(opts->reserved_) / sizeof(opts->reserved_[0]);
       i++)
    if (opts->reserved_[i] != 0)
      return CQ_EINVAL;
  if (opts->alloc != NULL) {
    if (opts->alloc->alloc == NULL || opts->alloc->realloc == NULL ||
        opts->alloc->free == NULL)
      return CQ_EINVAL;
    out->alloc_ = *opts->alloc;
  } else {
    out->alloc_ = cq__sys_allocator();
  }

  int rc;
  const char *env = getenv("CRONOQ_NUM_GPUS");
  if (env != NULL) {
    out->source = "CRONOQ_NUM_GPUS";
    rc = parse_count(env, out);
  } else if ((env = getenv("CUDA_VISIBLE_DEVICES")) != NULL) {
    out->source = "CUDA_VISIBLE_DEVICES";
    rc = cq__parse_cuda_visible(env, out);
  } else {
    const char *cmd = opts->nvidia_smi;
    if (cmd == NULL)
      cmd = getenv("CRONOQ_NVIDIA_SMI");
    if (cmd == NULL || *cmd == '\0')
      cmd = "nvidia-smi";
    int64_t timeout =
        opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    char *buf = list_alloc(out, OUTPUT_MAX);
    if (buf == NULL)
      return CQ_ENOMEM;
    rc = 0;
    if (run_nvidia_smi(cmd, timeout, buf, OUTPUT_MAX)) {
      out->source = "nvidia-smi";
      rc = cq__parse_nvidia_smi(buf, out);
    }
    out->alloc_.free(buf, out->alloc_.arg);
  }
  if (rc != 0) {
    char keep[sizeof(out->error)];
    memcpy(keep, out->error, sizeof(keep));
    cq_gpu_list_free(out);
    memcpy(out->error, keep, sizeof(keep));
  }
  return rc;
}

/* trace/trace_machine.c: the machine probe: usable cores (affinity and cgroup CPU quota), memory (MemAvailable and the
 * cgroup limit), and the sequential read bandwidth of the disk holding the data, measured with the page cache kept
 * out (O_DIRECT; posix_fadvise DONTNEED where the filesystem refuses O_DIRECT). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/trace_int.h"

static bool read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  return ok;
}

static bool read_u64(const char *path, uint64_t *out) {
  char b[128];
  if (!read_line(path, b, sizeof b)) return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(b, &end, 10);
  if (end == b || errno) return false;
  *out = v;
  return true;
}

static double cgroup_cpu_quota(void) {
  char b[128];
  if (read_line("/sys/fs/cgroup/cpu.max", b, sizeof b)) { /* v2: "max 100000" or "200000 100000" */
    long long q, p;
    if (sscanf(b, "%lld %lld", &q, &p) == 2 && q > 0 && p > 0) return (double)q / (double)p;
    return 0;
  }
  uint64_t q, p;
  char qb[64];
  if (read_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", qb, sizeof qb) && atoll(qb) > 0 &&
      read_u64("/sys/fs/cgroup/cpu/cpu.cfs_period_us", &p) && p > 0) {
    q = (uint64_t)atoll(qb);
    return (double)q / (double)p;
  }
  return 0;
}

static void meminfo(uint64_t *total, uint64_t *avail) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return;
  char line[256];
  unsigned long long v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemTotal: %llu kB", &v) == 1) *total = v * 1024ull;
    else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) *avail = v * 1024ull;
  }
  fclose(f);
}

static void cgroup_mem(uint64_t *limit, uint64_t *usage) {
  if (read_u64("/sys/fs/cgroup/memory.max", limit)) {
    if (!read_u64("/sys/fs/cgroup/memory.current", usage)) *usage = 0;
    return;
  }
  if (read_u64("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) && *limit < (1ull << 60)) {
    if (!read_u64("/sys/fs/cgroup/memory/memory.usage_in_bytes", usage)) *usage = 0;
    return;
  }
  *limit = 0;
}

/* Reads `path` sequentially, for at most max_bytes or ~0.5 s; bytes/s, or 0 when it cannot. */
static double measure_read(const char *path, uint64_t max_bytes, char *method, size_t mlen) {
  const size_t chunk = 1u << 20;
  int fd = open(path, O_RDONLY | O_DIRECT);
  bool direct = fd >= 0;
  if (!direct) fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  /* Drop the file's cached pages either way: O_DIRECT bypasses them, DONTNEED evicts them (clean pages). */
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  void *raw = sl__malloc(chunk + 4096);
  if (!raw) {
    close(fd);
    return 0;
  }
  char *buf = (char *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
  uint64_t total = 0, t0 = sl__now_ns();
  for (;;) {
    ssize_t r = read(fd, buf, chunk);
    if (r < 0 && direct && errno == EINVAL && total == 0) {
      /* The filesystem refuses O_DIRECT reads (tmpfs, some overlays): fall back to evicted buffered reads. */
      close(fd);
      fd = open(path, O_RDONLY);
      if (fd < 0) break;
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      direct = false;
      continue;
    }
    if (r <= 0) break;
    total += (uint64_t)r;
    if (total >= max_bytes || sl__now_ns() - t0 > 500000000ull) break;
  }
  uint64_t dt = sl__now_ns() - t0;
  if (fd >= 0) {
    if (!direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  sl__free(raw);
  snprintf(method, mlen, "%s", direct ? "o_direct" : "fadvise");
  return total > 0 && dt > 0 ? (double)total / ((double)dt * 1e-9) : 0;
}

int sl_machine_probe(sl_machine *m, const char *data_path, uint64_t max_bytes) {
  memset(m, 0, sizeof *m);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  m->cpus_online = online > 0 ? (int)online : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  double cores = m->cpus_online;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) cores = CPU_COUNT(&set);
  double quota = cgroup_cpu_quota();
  if (quota > 0 && quota < cores) cores = quota;
  m->cores = cores;
  uint64_t total = 0, avail = 0, limit = 0, usage = 0;
  meminfo(&total, &avail);
  cgroup_mem(&limit, &usage);
  if (limit > 0 && limit < (1ull << 60)) {
    if (limit < total || !total) total = limit;
    uint64_t room = limit > usage ? limit - usage : 0;
    if (room < avail || !avail) avail = room;
  }
  m->mem_total = total;
  m->mem_available = avail;
  m->other_load = -1;
  snprintf(m->disk_method, sizeof m->disk_method, "none");
  if (data_path && *data_path) {
    struct stat st;
    if (stat(data_path, &st) == 0 && S_ISREG(st.st_mode)) {
      m->disk_bandwidth = measure_read(data_path, max_bytes ? max_bytes : (256ull << 20), m->disk_method,
                                       sizeof m->disk_method);
      snprintf(m->disk_path, sizeof m->disk_path, "%s", data_path);
    }
  }
  return 0;
}

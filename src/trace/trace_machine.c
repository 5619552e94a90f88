/* trace/trace_machine.c: the machine probe: usable cores (affinity and cgroup CPU quota), memory (MemAvailable and the
 * cgroup limit), and the sequential read bandwidth of the disk holding the data as the device delivers it (O_DIRECT;
 * a cold read of a file the probe writes beside the data where the filesystem refuses O_DIRECT). */
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

/* Reads fd sequentially from offset 0 into an aligned buffer for at most max_bytes or ~0.5 s: the bytes read into
 * *got, the block device's bytes for this thread meanwhile into *dev (-1: unknown), the seconds taken into *secs.
 * false when a read fails before any byte (O_DIRECT refused by the filesystem: EINVAL). */
static bool timed_read(int fd, uint64_t max_bytes, uint64_t *got, int64_t *dev, double *secs) {
  const size_t chunk = 1u << 20;
  void *raw = sl__malloc(chunk + 4096);
  if (!raw) return false;
  char *buf = (char *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
  int64_t d0 = 0, d1 = 0, c0 = 0, c1 = 0;
  bool io = sl__thread_io(&d0, &c0);
  uint64_t total = 0, t0 = sl__now_ns();
  bool ok = true;
  for (;;) {
    ssize_t r = read(fd, buf, chunk);
    if (r < 0 && total == 0) ok = false;
    if (r <= 0) break;
    total += (uint64_t)r;
    if (total >= max_bytes || sl__now_ns() - t0 > 500000000ull) break;
  }
  *secs = (double)(sl__now_ns() - t0) * 1e-9;
  *dev = io && sl__thread_io(&d1, &c1) && d1 >= d0 ? d1 - d0 : -1;
  *got = total;
  sl__free(raw);
  return ok && total > 0;
}

/* The device's bytes/s from a read of `got` bytes in `secs`, of which the device delivered `dev` (-1: unknown; an
 * O_DIRECT read is the device's by construction). 0 when the device did not do the work: the page cache served it,
 * and that is no disk figure. */
static double device_rate(uint64_t got, int64_t dev, double secs, bool direct) {
  if (!(secs > 0) || got == 0) return 0;
  if (dev < 0) return direct ? (double)got / secs : 0;
  if ((double)dev < 0.5 * (double)got) return 0;
  return (double)(dev < (int64_t)got ? dev : (int64_t)got) / secs;
}

/* A file of up to 16 MiB written by the probe beside `path` (same filesystem), synced, its pages evicted, read
 * back, and removed: a cold read of our own file, where O_DIRECT is refused. The user's files are never evicted (a
 * pipeline traced right after would read its data from the disk instead of the page cache it had). */
static double probe_file_rate(const char *path, uint64_t max_bytes) {
  char tmpl[4096];
  const char *slash = strrchr(path, '/');
  int dl = slash ? (int)(slash - path) : 1;
  if (snprintf(tmpl, sizeof tmpl, "%.*s/.sluice-probe-XXXXXX", dl, slash ? path : ".") >= (int)sizeof tmpl) return 0;
  int fd = mkstemp(tmpl);
  if (fd < 0) return 0;
  uint64_t size = max_bytes < (16u << 20) ? max_bytes : (16u << 20);
  char *blk = sl__malloc(1u << 20);
  bool ok = blk != NULL;
  if (blk) memset(blk, 0x5a, 1u << 20);
  for (uint64_t w = 0; ok && w < size; w += 1u << 20) ok = write(fd, blk, 1u << 20) == (ssize_t)(1u << 20);
  sl__free(blk);
  double rate = 0;
  if (ok && fdatasync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && lseek(fd, 0, SEEK_SET) == 0) {
    uint64_t got = 0;
    int64_t dev = -1;
    double secs = 0;
    if (timed_read(fd, size, &got, &dev, &secs)) rate = device_rate(got, dev, secs, false);
  }
  close(fd);
  unlink(tmpl);
  return rate;
}

/* The read bandwidth of the block device holding `path`, as the device delivers it: an O_DIRECT read of the file
 * (it bypasses the page cache and leaves it alone), else a cold read of a file the probe writes beside it; the
 * device's bytes come from this thread's read_bytes (/proc/thread-self/io), so a read the page cache served
 * counts for nothing. 0 and method "none" when neither can be had (then no disk limit is modelled). */
static double measure_read(const char *path, uint64_t max_bytes, char *method, size_t mlen) {
  snprintf(method, mlen, "none");
  int fd = open(path, O_RDONLY | O_DIRECT);
  if (fd >= 0) {
    uint64_t got = 0;
    int64_t dev = -1;
    double secs = 0;
    bool ok = timed_read(fd, max_bytes, &got, &dev, &secs);
    close(fd);
    if (ok) {
      double r = device_rate(got, dev, secs, true);
      if (r > 0) snprintf(method, mlen, "o_direct");
      return r;
    }
  }
  /* The filesystem refuses O_DIRECT (tmpfs, some overlays): our own file, evicted. */
  double r = probe_file_rate(path, max_bytes);
  if (r > 0) snprintf(method, mlen, "fadvise");
  return r;
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

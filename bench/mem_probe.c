/* mem_probe: the machine's memory latency now, as dependent random reads per second (a pointer chase through a
 * 64 MiB random cycle, past any cache). bench/advice_bench.py runs it before and after each `sluice optimize`: on
 * this VM the rate moved 5.4-6.7 M/s within a quiet minute (issue 48), and a pipeline whose ops chase memory
 * (transformer's tokenize, the ops after imagenet-cacheable's cache) moves with it, which no model of the pipeline
 * foresees.
 *
 * Usage: mem_probe [SECONDS [ROUNDS]]: ROUNDS lines of "M reads/s" over SECONDS each (default 1 s, 1 round). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: a fixed seed, so every probe chases the same cycle */
static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 1.0;
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  if (!(secs > 0) || secs > 60 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "mem_probe: usage: mem_probe [SECONDS (0-60] [ROUNDS (1-1000)]]\n");
    return 2;
  }
  const size_t n = (size_t)16 << 20; /* 16 Mi entries of 4 bytes */
  uint32_t *next = malloc(n * sizeof *next);
  if (!next) {
    fprintf(stderr, "mem_probe: cannot allocate %zu MiB\n", n * sizeof *next >> 20);
    return 1;
  }
  /* Sattolo's shuffle: one cycle through every entry, so the chase never settles in a short loop */
  for (size_t i = 0; i < n; i++) next[i] = (uint32_t)i;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)(rnd(&s) % i);
    uint32_t t = next[i];
    next[i] = next[j];
    next[j] = t;
  }
  uint32_t x = 0;
  for (int r = 0; r < rounds; r++) {
    uint64_t reads = 0;
    double t0 = now(), t;
    do {
      for (int k = 0; k < 65536; k++) x = next[x];
      reads += 65536;
    } while ((t = now()) - t0 < secs);
    printf("%.3f M reads/s\n", (double)reads / (t - t0) * 1e-6);
  }
  free(next);
  return x == n; /* never: keeps the chase from being optimised away */
}

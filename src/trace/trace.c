/* trace/trace.c: the tracer. Runs a pipeline, snapshots every op's always-on counters over the traced interval,
 * and writes or reads the versioned trace document (docs/trace-format.md). Also the spec identity used to refuse
 * a trace of a different pipeline. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "core/outfile_int.h"
#include "ops/pipeline_int.h"
#include "trace/trace_int.h"

#define TRACE_FORMAT "sluice-trace"

/* Busy and total jiffies of all CPUs from /proc/stat's first 8 "cpu" fields. Time in niced processes (nice > 0,
 * field 2) is left out when this process is not niced (`self_niced` false): CFS gives a nice-10 job a tenth of a
 * nice-0 thread's share (nice 19: 1.5%), so a background build or backup yields its cores to the pipeline and is
 * not load it competes with (a 2-core machine running builds at nice 19 beside optimize read as 1.6 cores of other
 * load, and the plan predicted 0.4 of what it measured: issue 48). A niced sluice competes with them. */
void sl__jiffies_busy(const unsigned long long v[8], bool self_niced, double *busy, double *total) {
  double t = 0;
  for (int i = 0; i < 8; i++) t += (double)v[i]; /* guest time is already in user */
  *total = t;
  *busy = t - (double)v[3] - (double)v[4] - (self_niced ? 0 : (double)v[1]); /* minus idle and iowait */
}

/* Busy and total jiffies of all CPUs (/proc/stat), to see what else ran during a trace. */
static bool sys_jiffies(double *busy, double *total) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return false;
  unsigned long long v[10] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                 &v[5], &v[6], &v[7], &v[8], &v[9]);
  fclose(f);
  if (n < 5) return false;
  errno = 0;
  int pr = getpriority(PRIO_PROCESS, 0);
  sl__jiffies_busy(v, errno == 0 && pr > 0, busy, total);
  return true;
}

/* CPU time and runqueue wait (ns) summed over this process's threads (/proc/self/task/<tid>/schedstat). */
static bool sched_totals(double *cpu, double *delay) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return false;
  struct dirent *de;
  *cpu = *delay = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long long c = 0, w = 0;
    if (fscanf(f, "%llu %llu", &c, &w) == 2) {
      *cpu += (double)c;
      *delay += (double)w;
    }
    fclose(f);
  }
  closedir(d);
  return true;
}

void sl__load_snap_take(sl__load_snap *s) {
  s->jif = sys_jiffies(&s->jb, &s->jt);
  s->sch = sched_totals(&s->sc, &s->sd);
}

void sl__load_between(double *other_load, double *run_delay, const sl__load_snap *a, const sl__load_snap *b,
                      double secs, double process_cpu, int cpus) {
  *other_load = -1;
  *run_delay = 0;
  if (a->sch && b->sch && b->sc > a->sc) {
    double r = (b->sd - a->sd) / (b->sc - a->sc);
    *run_delay = r > 0 ? r : 0;
  }
  if (a->jif && b->jif && b->jt > a->jt && secs > 0) {
    /* Busy share of all CPUs over the interval, in cores, minus this process's own CPU. */
    double busy = (b->jb - a->jb) / (b->jt - a->jt) * (cpus > 0 ? cpus : 1);
    double other = busy - process_cpu / secs;
    *other_load = other > 0 ? other : 0;
  }
}

static bool read_io(const char *path, int64_t *read_bytes, int64_t *rchar) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[128];
  long long v;
  int got = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "read_bytes: %lld", &v) == 1) *read_bytes = v, got |= 1;
    else if (sscanf(line, "rchar: %lld", &v) == 1) *rchar = v, got |= 2;
  }
  fclose(f);
  return got == 3;
}
bool sl__proc_io(int64_t *read_bytes, int64_t *rchar) { return read_io("/proc/self/io", read_bytes, rchar); }
bool sl__thread_io(int64_t *read_bytes, int64_t *rchar) { return read_io("/proc/thread-self/io", read_bytes, rchar); }

static double proc_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sl_trace_free(sl_trace *t) {
  if (!t) return;
  for (int i = 0; t->ops && i < t->nops; i++) {
    sl__free(t->ops[i].path);
    sl__free(t->ops[i].label);
    sl__free(t->ops[i].kind);
  }
  sl__free(t->ops);
  json_decref(t->spec);
  sl__free(t->origin);
  sl__free(t);
}

/* ---- spec helpers ---- */
json_t *sl__spec_op_at(json_t *spec, const char *path) {
  json_t *arr = json_object_get(spec, "ops");
  const char *p = path;
  if (strncmp(p, "ops", 3)) return NULL;
  p += 3;
  for (;;) {
    if (*p != '[') return NULL;
    char *end;
    long i = strtol(p + 1, &end, 10);
    if (*end != ']' || i < 0) return NULL;
    json_t *o = json_array_get(arr, (size_t)i);
    p = end + 1;
    if (!*p) return o;
    if (strncmp(p, ".source", 7)) return NULL;
    arr = json_object_get(o, "source");
    p += 7;
  }
}

/* The op's schema says which keys are performance knobs (a shuffle's buffer changes the order it makes: not one). */
bool sl__is_knob(const char *kind, const char *key) { return sl__op_is_knob(kind, key); }

static int identity_chain(json_t *arr, json_t *out) {
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *o = json_array_get(arr, i);
    const char *kind = json_string_value(json_object_get(o, "op"));
    if (!kind) kind = "?";
    if (sl__op_outside_identity(kind)) continue;
    json_t *c = json_object();
    if (!c) return sl__oom("the pipeline's identity");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
      if (sl__is_knob(kind, k) || !strcmp(k, "source")) continue;
      json_object_set(c, k, v);
    }
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(c);
    if (!s || json_array_append_new(out, json_string(s))) {
      sl__free(s);
      return sl__oom("the pipeline's identity");
    }
    sl__free(s);
    json_t *src = json_object_get(o, "source");
    if (src) {
      if (json_array_append_new(out, json_string("{source:"))) return sl__oom("the pipeline's identity");
      int rc = identity_chain(src, out);
      if (rc) return rc;
      if (json_array_append_new(out, json_string("}"))) return sl__oom("the pipeline's identity");
    }
  }
  return 0;
}

json_t *sl__spec_identity(json_t *spec) {
  json_t *out = json_array();
  if (!out) return NULL;
  if (identity_chain(json_object_get(spec, "ops"), out)) {
    json_decref(out);
    return NULL;
  }
  return out;
}

static int check_identity(json_t *a, const char *a_name, json_t *b, const char *b_name) {
  json_t *ia = sl__spec_identity(a), *ib = sl__spec_identity(b);
  int rc = 0;
  if (!ia || !ib) {
    rc = sl__oom("comparing specs");
  } else {
    size_t na = json_array_size(ia), nb = json_array_size(ib), n = na < nb ? na : nb;
    for (size_t i = 0; i < n && !rc; i++) {
      const char *x = json_string_value(json_array_get(ia, i)), *y = json_string_value(json_array_get(ib, i));
      if (strcmp(x, y))
        rc = sl__err(SL_EINVAL, "the trace is of a different pipeline: op %zu (prefetch and cache ops not counted) "
                                "is %s in the %s but %s in the %s", i, x, a_name, y, b_name);
    }
    if (!rc && na != nb)
      rc = sl__err(SL_EINVAL, "the trace is of a different pipeline: the %s has %zu ops and the %s %zu "
                              "(prefetch and cache ops not counted)", a_name, na, b_name, nb);
  }
  json_decref(ia);
  json_decref(ib);
  return rc;
}

int sl_trace_check_spec(const sl_trace *t, const sl_pipeline *p) {
  return check_identity(t->spec, "trace", sl__pipeline_spec(p), "spec");
}

/* ---- running ---- */
static void stats_delta(sl_op_stats *d, const sl_op_stats *a) {
  d->elements_out -= a->elements_out;
  d->elements_in -= a->elements_in;
  d->bytes_out -= a->bytes_out;
  d->cpu_seconds -= a->cpu_seconds;
  d->wall_seconds -= a->wall_seconds;
  d->wait_seconds -= a->wait_seconds;
  d->runq_seconds = d->runq_seconds >= 0 && a->runq_seconds >= 0 ? fmax(d->runq_seconds - a->runq_seconds, 0) : -1;
  d->disk_bytes -= a->disk_bytes;
  d->net_requests -= a->net_requests;
  d->net_retries -= a->net_retries;
  d->net_bytes -= a->net_bytes;
  d->net_ttfb_seconds = fmax(d->net_ttfb_seconds - a->net_ttfb_seconds, 0);
  d->net_xfer_seconds = fmax(d->net_xfer_seconds - a->net_xfer_seconds, 0);
  d->net_solo_bytes -= a->net_solo_bytes;
  d->net_solo_seconds = fmax(d->net_solo_seconds - a->net_solo_seconds, 0);
  d->net_overlap_bytes -= a->net_overlap_bytes;
  d->net_overlap_seconds = fmax(d->net_overlap_seconds - a->net_overlap_seconds, 0);
  d->net_cpu_seconds = fmax(d->net_cpu_seconds - a->net_cpu_seconds, 0);
  d->skipped -= a->skipped;
  if (d->cpu_seconds < 0) d->cpu_seconds = 0;
  if (d->wall_seconds < 0) d->wall_seconds = 0;
  if (d->wait_seconds < 0) d->wait_seconds = 0;
}

static bool knob_is_auto(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) && !strcmp(json_string_value(v), "autotune");
}

static int fill_op(sl__trace_op *to, const sl_op_stats *s, json_t *spec) {
  to->s = *s;
  to->path = sl__strdup(s->path);
  to->label = sl__strdup(s->label);
  to->kind = sl__strdup(s->op);
  if (!to->path || !to->label || !to->kind) return sl__oom("a trace");
  to->s.path = to->path;
  to->s.label = to->label;
  to->s.op = to->kind;
  json_t *o = sl__spec_op_at(spec, to->path);
  to->par_autotune = knob_is_auto(o, "parallelism");
  to->buf_autotune = knob_is_auto(o, "buffer");
  return 0;
}

int sl__trace_from_counters(sl_trace **out, json_t *spec, const char *origin, const sl_machine *m,
                            const sl_op_stats *now, const sl_op_stats *base, int nops, double seconds,
                            double process_cpu, double run_delay) {
  *out = NULL;
  sl_trace *t = sl__calloc(1, sizeof *t);
  if (!t) return sl__oom("a trace");
  t->spec = json_deep_copy(spec);
  t->origin = sl__strdup(origin ? origin : "<live>");
  t->ops = sl__calloc((size_t)nops, sizeof *t->ops);
  int rc = !t->spec || !t->origin || !t->ops ? sl__oom("a trace") : 0;
  t->machine = *m;
  t->seconds = seconds;
  t->process_cpu = process_cpu;
  t->run_delay = run_delay > 0 ? run_delay : 0;
  t->device_bytes = t->read_chars = -1; /* unknown here: the tuner sets its window's */
  for (int i = 0; i < nops && !rc; i++) {
    sl_op_stats s = now[i];
    if (base) stats_delta(&s, &base[i]);
    if (s.parent == -1) t->elements = s.elements_out;
    rc = fill_op(&t->ops[i], &s, t->spec);
    t->nops = i + 1;
  }
  if (rc) {
    sl_trace_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

/* A watchdog that cancels the run at its deadline, so that a pipeline stuck on a slow element cannot hold the
 * trace past its time limit. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  atomic_bool fired;
  uint64_t deadline_ns;
  sl_iter *it;
} watchdog;

static void *watchdog_main(void *arg) {
  watchdog *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->done && sl__now_ns() < w->deadline_ns) sl__cond_wait_ms(&w->cv, &w->mu, 50);
  if (!w->done) {
    atomic_store(&w->fired, true);
    sl_iter_cancel(w->it);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* The first data file an op that lists files names (files, image_folder), for the disk probe. */
static char *first_data_file(const sl_pipeline *p) {
  for (int i = 0; i < sl_pipeline_op_count(p); i++) {
    const sl__op *op = sl__pipeline_op(p, i);
    const sl__op_schema *sc = op->vt->schema;
    const char *f = sc && (sc->flags & SL__OPS_LISTS_FILES) && sc->data_file ? sc->data_file(op) : NULL;
    if (f) return sl__strdup(f);
  }
  return NULL;
}

/* A pipeline of `spec` with a `repeat` appended at the root: a finite input run for as long as a trace needs. */
static int repeated(sl_pipeline **out, json_t *spec, const char *origin) {
  *out = NULL;
  json_t *s = json_deep_copy(spec);
  json_t *r = json_pack("{s:s}", "op", "repeat");
  if (!s || !r || json_array_append_new(json_object_get(s, "ops"), r)) {
    json_decref(s);
    return sl__oom("a spec");
  }
  char *js = json_dumps(s, JSON_COMPACT);
  json_decref(s);
  int rc = js ? sl_pipeline_from_json(out, js, strlen(js), origin) : sl__oom("a spec");
  sl__free(js);
  return rc;
}

/* Removes the root `repeat` that repeated() appended from trace t: its ops and spec are then those of the input. */
static void strip_repeat(sl_trace *t) {
  int r = t->nops - 1;
  if (r < 0 || t->ops[r].s.parent != -1 || sl__op_model(t->ops[r].s.op) != SL__MK_REPEAT) return;
  sl__free(t->ops[r].path);
  sl__free(t->ops[r].label);
  sl__free(t->ops[r].kind);
  t->nops--;
  for (int i = 0; i < t->nops; i++)
    if (t->ops[i].s.parent == r) t->ops[i].s.parent = -1;
  json_t *ops = json_object_get(t->spec, "ops");
  size_t n = json_array_size(ops);
  if (n > 0) json_array_remove(ops, n - 1);
  t->ended = false;
}

int sl_trace_run(sl_trace **out, sl_pipeline *p, const sl_trace_opts *opts) {
  *out = NULL;
  sl_trace_opts def = SL_TRACE_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_TRACE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_trace_opts version %d, expected %d", opts->version, SL_TRACE_OPTS_VERSION);
  if (!(opts->seconds <= SL_TRACE_MAX_SECONDS) || !(opts->warmup >= 0 && opts->warmup <= SL_TRACE_MAX_SECONDS))
    return sl__err(SL_EINVAL, "trace options: seconds %g and warmup %g must be numbers, at most %g (115 days)",
                   opts->seconds, opts->warmup, SL_TRACE_MAX_SECONDS);
  if (opts->repeat) {
    sl_trace_opts once = *opts;
    once.repeat = false;
    sl_pipeline *q = NULL;
    int rc = repeated(&q, sl__pipeline_spec(p), sl__pipeline_origin(p));
    if (!rc) rc = sl_trace_run(out, q, &once);
    sl_pipeline_free(q);
    if (!rc) strip_repeat(*out);
    return rc;
  }
  if (opts->take < 0 || opts->warmup < 0 || isnan(opts->seconds))
    return sl__err(SL_EINVAL, "trace options: take and warmup must not be negative, seconds must be a number");
  sl_trace *t = sl__calloc(1, sizeof *t);
  if (!t) return sl__oom("a trace");
  int rc = 0;
  t->spec = json_deep_copy(sl__pipeline_spec(p));
  t->origin = sl__strdup(sl__pipeline_origin(p) ? sl__pipeline_origin(p) : "<spec>");
  t->nops = sl_pipeline_op_count(p);
  t->ops = sl__calloc((size_t)sl_pipeline_op_count(p), sizeof *t->ops);
  sl_op_stats *base = sl__calloc((size_t)sl_pipeline_op_count(p), sizeof *base);
  if (!t->spec || !t->origin || !t->ops || !base) {
    rc = sl__oom("a trace");
    goto done;
  }
  if (opts->machine) {
    t->machine = *opts->machine;
  } else {
    char *df = opts->no_disk_probe ? NULL : first_data_file(p);
    rc = sl_machine_probe(&t->machine, df, 0);
    sl__free(df);
    if (rc) goto done;
  }

  sl_pipeline_reset_stats(p);
  sl_iter *it = NULL;
  if ((rc = sl_pipeline_iter(&it, p))) goto done;
  /* seconds 0: the default 5 s; < 0 (SL_TRACE_UNTIL_END): to the end of the stream, at most an hour. */
  double limit = opts->seconds > 0 ? opts->seconds : opts->seconds == 0 ? 5.0 : 3600.0;
  uint64_t t0 = sl__now_ns(), tw = t0, n = 0, nw = 0;
  double c0 = proc_cpu();
  sl__load_snap l0, l1;
  sl__load_snap_take(&l0);
  /* What the block devices delivered, against what the reads returned: a page-cache read is no disk work. */
  int64_t io_dev0 = 0, io_ch0 = 0, io_dev1 = 0, io_ch1 = 0;
  bool io0 = sl__proc_io(&io_dev0, &io_ch0);
  bool warm = opts->warmup <= 0 && !opts->warmup_fills_caches;
  bool based = false; /* the counters' snapshot taken at the warm-up's end: the trace is their difference */
  watchdog wd = {.done = false, .it = it};
  double grace = limit * 0.1 > 1 ? limit * 0.1 : 1;
  double fill = opts->warmup_fills_caches ? SL_TRACE_MAX_FILL : 0;
  wd.deadline_ns = t0 + (uint64_t)((opts->warmup + fill + limit + grace) * 1e9);
  atomic_init(&wd.fired, false);
  pthread_mutex_init(&wd.mu, NULL);
  pthread_cond_init(&wd.cv, NULL);
  pthread_t wdt;
  bool wd_on = pthread_create(&wdt, NULL, watchdog_main, &wd) == 0;
  sl_elem e;
  sl_elem_init(&e);
  for (;;) {
    if (!warm && (double)(sl__now_ns() - t0) * 1e-9 >= opts->warmup &&
        (!opts->warmup_fills_caches || sl_pipeline_caches_complete(p) ||
         (double)(sl__now_ns() - t0) * 1e-9 >= opts->warmup + fill)) {
      /* Counters are cumulative; the traced interval is the difference from this snapshot. */
      for (int i = 0; i < sl_pipeline_op_count(p); i++) sl_pipeline_op_stats(&base[i], p, i);
      tw = sl__now_ns();
      c0 = proc_cpu();
      sl__load_snap_take(&l0);
      io0 = sl__proc_io(&io_dev0, &io_ch0);
      nw = n;
      warm = based = true;
    }
    rc = sl_iter_next(&e, it);
    if (rc) break;
    sl_elem_clear(&e);
    n++;
    if (opts->take > 0 && n - nw >= (uint64_t)opts->take && warm) break;
    if (warm && (double)(sl__now_ns() - tw) * 1e-9 >= limit) break;
  }
  uint64_t t1 = sl__now_ns();
  if (wd_on) {
    pthread_mutex_lock(&wd.mu);
    wd.done = true;
    pthread_cond_broadcast(&wd.cv);
    pthread_mutex_unlock(&wd.mu);
    pthread_join(wdt, NULL);
  }
  pthread_mutex_destroy(&wd.mu);
  pthread_cond_destroy(&wd.cv);
  if (rc == SL_ECANCELED && atomic_load(&wd.fired)) {
    sl_error_clear(); /* stopped at the deadline: the trace holds what was done by then */
    rc = 0;
  }
  t->process_cpu = proc_cpu() - c0;
  t->device_bytes = t->read_chars = -1;
  if (io0 && sl__proc_io(&io_dev1, &io_ch1) && io_dev1 >= io_dev0 && io_ch1 >= io_ch0) {
    t->device_bytes = io_dev1 - io_dev0;
    t->read_chars = io_ch1 - io_ch0;
  }
  /* How long this process's threads waited for a CPU per CPU second they got: contention from other processes
   * (and from our own threads beyond the cores) stretches wall time without any I/O; the planner must not take
   * that for waiting. Threads that ended during the run are missing: a lower bound. */
  sl__load_snap_take(&l1);
  sl__load_between(&t->machine.other_load, &t->run_delay, &l0, &l1, t1 > tw ? (double)(t1 - tw) * 1e-9 : 0,
                   t->process_cpu, t->machine.cpus_online);
  t->ended = rc == SL_END;
  if (rc == SL_END) rc = 0;
  /* Freeing the run joins its workers and flushes the counts iterators keep locally: the snapshot after it has
   * every element counted (times were taken above, at the end of the traced interval). */
  sl_iter_free(it);
  if (!rc) {
    t->seconds = (double)(t1 - tw) * 1e-9;
    t->elements = n - nw;
    for (int i = 0; i < sl_pipeline_op_count(p) && !rc; i++) {
      sl_op_stats s;
      sl_pipeline_op_stats(&s, p, i);
      if (based) stats_delta(&s, &base[i]);
      rc = fill_op(&t->ops[i], &s, t->spec);
    }
  }
done:
  sl__free(base);
  if (rc) {
    sl_trace_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

/* ---- JSON ---- */
static json_t *machine_json(const sl_machine *m) {
  return json_pack("{s:f, s:i, s:I, s:I, s:f, s:s, s:s, s:f}", "cores", m->cores, "cpus_online", m->cpus_online,
                   "mem_total", (json_int_t)m->mem_total, "mem_available", (json_int_t)m->mem_available,
                   "disk_bandwidth", m->disk_bandwidth, "disk_method", m->disk_method, "disk_path", m->disk_path,
                   "other_load", m->other_load);
}

static json_t *op_json(const sl__trace_op *o) {
  const sl_op_stats *s = &o->s;
  json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:b, s:I, s:I, s:b, s:b, s:{s:b, s:b}}", "path", s->path, "op", s->op,
                        "label", s->label, "parent", s->parent, "nested", s->nested, "parallelism",
                        (json_int_t)s->parallelism, "buffer", (json_int_t)s->buffer, "async", s->async, "random",
                        s->random, "autotune", "parallelism", o->par_autotune, "buffer", o->buf_autotune);
  if (!j) return NULL;
  json_t *c = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:f, s:I, s:I, s:I, s:f, s:f}", "elements_out",
                        (json_int_t)s->elements_out, "elements_in", (json_int_t)s->elements_in, "bytes_out",
                        (json_int_t)s->bytes_out, "cpu_seconds", s->cpu_seconds, "wall_seconds", s->wall_seconds,
                        "wait_seconds", s->wait_seconds, "disk_bytes", (json_int_t)s->disk_bytes, "skipped",
                        (json_int_t)s->skipped, "buffer_occupancy", s->buffer_occupancy, "bytes_held",
                        (json_int_t)s->bytes_held, "bytes_held_peak", (json_int_t)s->bytes_held_peak, "cardinality",
                        (json_int_t)s->cardinality, "call_mean", s->call_mean, "call_sd", s->call_sd);
  if (c && s->source_bytes && json_object_set_new(c, "source_bytes", json_integer((json_int_t)s->source_bytes))) {
    json_decref(c);
    c = NULL;
  }
  /* Written when measured (absent: unknown, as in traces made before it was added). */
  if (c && s->runq_seconds >= 0 && json_object_set_new(c, "runq_seconds", json_real(s->runq_seconds))) {
    json_decref(c);
    c = NULL;
  }
  /* A reader of remote files: its requests and their times (written only for one that opened remote objects). */
  if (c && (s->net_requests || s->net_objects) &&
      json_object_set_new(c, "network",
                          json_pack("{s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:f, s:I, s:f, s:I, s:I, s:I, s:f}",
                                    "requests",
                                    (json_int_t)s->net_requests, "retries", (json_int_t)s->net_retries, "bytes",
                                    (json_int_t)s->net_bytes, "ttfb_seconds", s->net_ttfb_seconds, "transfer_seconds",
                                    s->net_xfer_seconds, "block_bytes", (json_int_t)s->net_block_bytes, "in_flight",
                                    (json_int_t)s->net_in_flight, "solo_bytes", (json_int_t)s->net_solo_bytes,
                                    "solo_seconds", s->net_solo_seconds, "overlap_bytes",
                                    (json_int_t)s->net_overlap_bytes, "overlap_seconds", s->net_overlap_seconds,
                                    "objects", (json_int_t)s->net_objects, "object_bytes",
                                    (json_int_t)s->net_object_bytes, "kept", (json_int_t)s->net_kept,
                                    "cpu_seconds", s->net_cpu_seconds))) {
    json_decref(c);
    c = NULL;
  }
  if (c && s->serial && json_object_set_new(c, "serial", json_true())) { /* written only when set */
    json_decref(c);
    c = NULL;
  }
  if (!c || json_object_update(j, c)) {
    json_decref(c);
    json_decref(j);
    return NULL;
  }
  json_decref(c);
  return j;
}

int sl_trace_to_json(char **out, const sl_trace *t) {
  *out = NULL;
  json_t *ops = json_array();
  json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:O, s:o, s:{s:f, s:I, s:b, s:f, s:f, s:f}, s:o}", "format",
                           TRACE_FORMAT, "version", SL_TRACE_VERSION, "sluice", sl_version(), "origin", t->origin,
                           "spec", t->spec, "machine", machine_json(&t->machine), "run", "seconds", t->seconds,
                           "elements", (json_int_t)t->elements, "ended", t->ended, "throughput",
                           sl_trace_throughput(t), "process_cpu_seconds", t->process_cpu, "run_delay", t->run_delay,
                           "ops", ops);
  if (!root) return sl__oom("the trace document");
  /* Written when known (absent: unknown, as in version 1 traces). */
  json_t *run = json_object_get(root, "run");
  if (t->device_bytes >= 0 && (json_object_set_new(run, "device_read_bytes", json_integer(t->device_bytes)) ||
                               json_object_set_new(run, "read_chars", json_integer(t->read_chars)))) {
    json_decref(root);
    return sl__oom("the trace document");
  }
  for (int i = 0; i < t->nops; i++) {
    json_t *o = op_json(&t->ops[i]);
    if (!o || json_array_append_new(ops, o)) {
      json_decref(root);
      return sl__oom("the trace document");
    }
  }
  char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!s) return sl__oom("the trace document");
  *out = sl__strdup(s);
  sl__free(s);
  return *out ? 0 : sl__oom("the trace document");
}

int sl_trace_save(const sl_trace *t, const char *path) {
  char *s = NULL;
  int rc = sl_trace_to_json(&s, t);
  if (rc) return rc;
  size_t len = strlen(s);
  s[len] = '\n'; /* the document ends its line; the NUL is not written */
  rc = sl__outfile_write(path, s, len + 1);
  sl__free(s);
  return rc ? sl__err_wrap(rc, "cannot write the trace") : 0;
}

/* Field readers that name what is wrong. */
typedef struct {
  const char *origin;
  int rc;
} rd;

static json_t *need(rd *r, json_t *o, const char *key, const char *where, int (*is)(const json_t *), const char *what) {
  if (r->rc) return NULL;
  json_t *v = json_object_get(o, key);
  if (!v || !is(v)) {
    r->rc = sl__err(SL_EINVAL, "%s: %s%s%s: missing or not %s", r->origin, where, where[0] ? "." : "", key, what);
    return NULL;
  }
  return v;
}
static int is_num(const json_t *v) { return json_is_number(v); }
static int is_int(const json_t *v) { return json_is_integer(v); }
static int is_str(const json_t *v) { return json_is_string(v); }
static int is_bool(const json_t *v) { return json_is_boolean(v); }
static int is_obj(const json_t *v) { return json_is_object(v); }
static int is_arr(const json_t *v) { return json_is_array(v); }
static double num(rd *r, json_t *o, const char *k, const char *w) {
  json_t *v = need(r, o, k, w, is_num, "a number");
  return v ? json_number_value(v) : 0;
}
static int64_t inum(rd *r, json_t *o, const char *k, const char *w) {
  json_t *v = need(r, o, k, w, is_int, "an integer");
  return v ? (int64_t)json_integer_value(v) : 0;
}
static uint64_t unum(rd *r, json_t *o, const char *k, const char *w) {
  int64_t x = inum(r, o, k, w);
  if (!r->rc && x < 0) r->rc = sl__err(SL_EINVAL, "%s: %s.%s: negative", r->origin, w, k);
  return (uint64_t)x;
}
static bool bnum(rd *r, json_t *o, const char *k, const char *w) {
  json_t *v = need(r, o, k, w, is_bool, "true or false");
  return v && json_is_true(v);
}

static int parse_trace(sl_trace *t, json_t *root, const char *origin) {
  rd r = {origin, 0};
  if (!json_is_object(root)) return sl__err(SL_EINVAL, "%s: a trace is a JSON object", origin);
  json_t *fmt = json_object_get(root, "format");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), TRACE_FORMAT))
    return sl__err(SL_EINVAL, "%s: not a sluice trace (no \"format\": \"%s\")", origin, TRACE_FORMAT);
  json_t *ver = json_object_get(root, "version");
  if (!json_is_integer(ver)) return sl__err(SL_EINVAL, "%s: version: missing or not an integer", origin);
  /* Version 1 lacks run.device_read_bytes (the device's share of the reads is then unknown) and is read as before. */
  if (json_integer_value(ver) != SL_TRACE_VERSION && json_integer_value(ver) != 1) {
    json_t *by = json_object_get(root, "sluice");
    return sl__err(SL_EVERSION, "%s: trace format version %lld (written by sluice %s); this sluice %s reads versions 1 "
                                "to %d: take the trace again with 'sluice trace'", origin,
                   (long long)json_integer_value(ver), json_is_string(by) ? json_string_value(by) : "?", sl_version(),
                   SL_TRACE_VERSION);
  }
  json_t *spec = need(&r, root, "spec", "", is_obj, "an object");
  json_t *m = need(&r, root, "machine", "", is_obj, "an object");
  json_t *run = need(&r, root, "run", "", is_obj, "an object");
  json_t *ops = need(&r, root, "ops", "", is_arr, "an array");
  if (r.rc) return r.rc;
  t->spec = json_incref(spec);
  json_t *org = json_object_get(root, "origin");
  t->origin = sl__strdup(json_is_string(org) ? json_string_value(org) : origin);
  if (!t->origin) return sl__oom("a trace");
  sl_machine *mc = &t->machine;
  mc->cores = num(&r, m, "cores", "machine");
  mc->cpus_online = (int)inum(&r, m, "cpus_online", "machine");
  mc->mem_total = unum(&r, m, "mem_total", "machine");
  mc->mem_available = unum(&r, m, "mem_available", "machine");
  mc->disk_bandwidth = num(&r, m, "disk_bandwidth", "machine");
  json_t *dm = need(&r, m, "disk_method", "machine", is_str, "a string");
  json_t *dp = need(&r, m, "disk_path", "machine", is_str, "a string");
  if (r.rc) return r.rc;
  snprintf(mc->disk_method, sizeof mc->disk_method, "%s", json_string_value(dm));
  snprintf(mc->disk_path, sizeof mc->disk_path, "%s", json_string_value(dp));
  json_t *ol = json_object_get(m, "other_load"); /* optional: -1 when absent */
  mc->other_load = json_is_number(ol) ? json_number_value(ol) : -1;
  t->seconds = num(&r, run, "seconds", "run");
  t->elements = unum(&r, run, "elements", "run");
  t->ended = bnum(&r, run, "ended", "run");
  t->process_cpu = num(&r, run, "process_cpu_seconds", "run");
  json_t *rd_ = json_object_get(run, "run_delay"); /* optional */
  t->run_delay = json_is_number(rd_) && json_number_value(rd_) > 0 ? json_number_value(rd_) : 0;
  /* Optional (absent in version 1): both or neither, non-negative integers. */
  json_t *dev = json_object_get(run, "device_read_bytes"), *rch = json_object_get(run, "read_chars");
  t->device_bytes = t->read_chars = -1;
  if (dev || rch) {
    if (!json_is_integer(dev) || json_integer_value(dev) < 0 || !json_is_integer(rch) || json_integer_value(rch) < 0)
      return sl__err(SL_EINVAL, "%s: run.device_read_bytes and run.read_chars: expected both, as non-negative "
                                "integers", origin);
    t->device_bytes = (int64_t)json_integer_value(dev);
    t->read_chars = (int64_t)json_integer_value(rch);
  }
  if (r.rc) return r.rc;
  if (!(t->seconds > 0)) return sl__err(SL_EINVAL, "%s: run.seconds must be positive", origin);
  t->nops = (int)json_array_size(ops);
  if (t->nops == 0) return sl__err(SL_EINVAL, "%s: ops: empty", origin);
  t->ops = sl__calloc((size_t)t->nops, sizeof *t->ops);
  if (!t->ops) return sl__oom("a trace");
  for (int i = 0; i < t->nops; i++) {
    json_t *o = json_array_get(ops, (size_t)i);
    char w[32];
    snprintf(w, sizeof w, "ops[%d]", i);
    if (!json_is_object(o)) return sl__err(SL_EINVAL, "%s: %s: expected an object", origin, w);
    sl__trace_op *to = &t->ops[i];
    sl_op_stats *s = &to->s;
    json_t *path = need(&r, o, "path", w, is_str, "a string");
    json_t *kind = need(&r, o, "op", w, is_str, "a string");
    json_t *label = need(&r, o, "label", w, is_str, "a string");
    if (r.rc) return r.rc;
    s->parent = (int)inum(&r, o, "parent", w);
    s->nested = bnum(&r, o, "nested", w);
    s->parallelism = inum(&r, o, "parallelism", w);
    s->buffer = inum(&r, o, "buffer", w);
    s->async = bnum(&r, o, "async", w);
    s->random = bnum(&r, o, "random", w);
    s->elements_out = unum(&r, o, "elements_out", w);
    s->elements_in = unum(&r, o, "elements_in", w);
    s->bytes_out = unum(&r, o, "bytes_out", w);
    s->cpu_seconds = num(&r, o, "cpu_seconds", w);
    s->wall_seconds = num(&r, o, "wall_seconds", w);
    s->wait_seconds = num(&r, o, "wait_seconds", w);
    s->disk_bytes = unum(&r, o, "disk_bytes", w);
    json_t *sb = json_object_get(o, "source_bytes"); /* optional: traces before it was added lack it */
    if (sb && (!json_is_integer(sb) || json_integer_value(sb) < 0))
      return sl__err(SL_EINVAL, "%s: %s.source_bytes: expected a non-negative integer", origin, w);
    s->source_bytes = sb ? (uint64_t)json_integer_value(sb) : 0;
    json_t *rq = json_object_get(o, "runq_seconds"); /* optional: traces before it was added lack it (unknown) */
    if (rq && (!json_is_number(rq) || !(json_number_value(rq) >= 0) || !isfinite(json_number_value(rq))))
      return sl__err(SL_EINVAL, "%s: %s.runq_seconds: expected a non-negative number", origin, w);
    s->runq_seconds = rq ? json_number_value(rq) : -1;
    json_t *nw = json_object_get(o, "network"); /* optional: readers of remote files only */
    if (nw) {
      json_t *f[7];
      static const char *const NF[7] = {"requests", "retries", "bytes", "ttfb_seconds", "transfer_seconds",
                                        "block_bytes", "in_flight"};
      for (int k = 0; k < 7; k++) {
        f[k] = json_is_object(nw) ? json_object_get(nw, NF[k]) : NULL;
        bool ok = f[k] && (k == 3 || k == 4 ? json_is_number(f[k]) && json_number_value(f[k]) >= 0 &&
                                                  isfinite(json_number_value(f[k]))
                                            : json_is_integer(f[k]) && json_integer_value(f[k]) >= 0);
        if (!ok)
          return sl__err(SL_EINVAL, "%s: %s.network.%s: missing or not a non-negative %s", origin, w, NF[k],
                         k == 3 || k == 4 ? "number" : "integer");
      }
      s->net_requests = (uint64_t)json_integer_value(f[0]);
      s->net_retries = (uint64_t)json_integer_value(f[1]);
      s->net_bytes = (uint64_t)json_integer_value(f[2]);
      s->net_ttfb_seconds = json_number_value(f[3]);
      s->net_xfer_seconds = json_number_value(f[4]);
      s->net_block_bytes = (uint64_t)json_integer_value(f[5]);
      s->net_in_flight = (uint64_t)json_integer_value(f[6]);
      /* optional (added after the rest): the link's saturation figures */
      static const char *const NO[4] = {"solo_bytes", "solo_seconds", "overlap_bytes", "overlap_seconds"};
      double v[4] = {0, 0, 0, 0};
      for (int k = 0; k < 4; k++) {
        json_t *g = json_object_get(nw, NO[k]);
        if (!g) continue;
        bool ok = k % 2 ? json_is_number(g) && json_number_value(g) >= 0 && isfinite(json_number_value(g))
                        : json_is_integer(g) && json_integer_value(g) >= 0;
        if (!ok)
          return sl__err(SL_EINVAL, "%s: %s.network.%s: not a non-negative %s", origin, w, NO[k],
                         k % 2 ? "number" : "integer");
        v[k] = k % 2 ? json_number_value(g) : (double)json_integer_value(g);
      }
      s->net_solo_bytes = (uint64_t)v[0];
      s->net_solo_seconds = v[1];
      s->net_overlap_bytes = (uint64_t)v[2];
      s->net_overlap_seconds = v[3];
      /* optional (added later still): the objects opened, their bytes, those read from the reader's keep */
      static const char *const NK[3] = {"objects", "object_bytes", "kept"};
      uint64_t *dst[3] = {&s->net_objects, &s->net_object_bytes, &s->net_kept};
      for (int k = 0; k < 3; k++) {
        json_t *g = json_object_get(nw, NK[k]);
        if (!g) continue;
        if (!json_is_integer(g) || json_integer_value(g) < 0)
          return sl__err(SL_EINVAL, "%s: %s.network.%s: not a non-negative integer", origin, w, NK[k]);
        *dst[k] = (uint64_t)json_integer_value(g);
      }
      json_t *nc = json_object_get(nw, "cpu_seconds");
      if (nc && !(json_is_number(nc) && json_number_value(nc) >= 0 && isfinite(json_number_value(nc))))
        return sl__err(SL_EINVAL, "%s: %s.network.cpu_seconds: not a non-negative number", origin, w);
      s->net_cpu_seconds = nc ? json_number_value(nc) : 0;
    }
    json_t *se = json_object_get(o, "serial"); /* optional: written only for SL_FN_SERIAL functions */
    if (se && !json_is_boolean(se)) return sl__err(SL_EINVAL, "%s: %s.serial: expected true or false", origin, w);
    s->serial = se && json_is_true(se);
    s->skipped = unum(&r, o, "skipped", w);
    s->buffer_occupancy = num(&r, o, "buffer_occupancy", w);
    s->bytes_held = unum(&r, o, "bytes_held", w);
    s->bytes_held_peak = unum(&r, o, "bytes_held_peak", w);
    s->cardinality = inum(&r, o, "cardinality", w);
    s->call_mean = num(&r, o, "call_mean", w);
    s->call_sd = num(&r, o, "call_sd", w);
    json_t *at = json_object_get(o, "autotune");
    if (r.rc) return r.rc;
    if (s->parent < -1 || s->parent >= t->nops || s->parent == i)
      return sl__err(SL_EINVAL, "%s: %s.parent: %d is not an op index", origin, w, s->parent);
    if (s->cpu_seconds < 0 || s->parallelism < 1)
      return sl__err(SL_EINVAL, "%s: %s: negative CPU time or parallelism below 1", origin, w);
    to->par_autotune = json_is_true(json_object_get(at, "parallelism"));
    to->buf_autotune = json_is_true(json_object_get(at, "buffer"));
    to->path = sl__strdup(json_string_value(path));
    to->kind = sl__strdup(json_string_value(kind));
    to->label = sl__strdup(json_string_value(label));
    if (!to->path || !to->kind || !to->label) return sl__oom("a trace");
    s->path = to->path;
    s->op = to->kind;
    s->label = to->label;
    if (!sl__spec_op_at(t->spec, to->path))
      return sl__err(SL_EINVAL, "%s: %s.path: '%s' is not an op of the trace's spec", origin, w, to->path);
  }
  int roots = 0;
  for (int i = 0; i < t->nops; i++) roots += t->ops[i].s.parent == -1;
  if (roots != 1) return sl__err(SL_EINVAL, "%s: ops: %d ops have no parent; a trace has exactly one root", origin, roots);
  /* Every op's chain of consumers reaches the root, within the depth a built pipeline may have (the planner walks
   * it recursively): no cycles, no chain deeper than SL__MAX_DEPTH. */
  for (int i = 0; i < t->nops; i++) {
    int x = i, steps = 0;
    while (x != -1 && steps <= t->nops && steps <= SL__MAX_DEPTH) x = t->ops[x].s.parent, steps++;
    if (x != -1)
      return sl__err(SL_EINVAL, "%s: ops[%d].parent: the consumers form a cycle or a chain more than %d ops deep (the "
                                "limit on op chain depth)", origin, i, SL__MAX_DEPTH);
  }
  return 0;
}

int sl_trace_from_json(sl_trace **out, const char *json, size_t len, const char *origin) {
  *out = NULL;
  if (!origin) origin = "<trace>";
  json_error_t err;
  json_t *root = json_loadb(json, len, 0, &err);
  if (!root) return sl__err(SL_EINVAL, "%s:%d:%d: malformed JSON: %s", origin, err.line, err.column, err.text);
  sl_trace *t = sl__calloc(1, sizeof *t);
  if (!t) {
    json_decref(root);
    return sl__oom("a trace");
  }
  int rc = parse_trace(t, root, origin);
  json_decref(root);
  if (rc) {
    sl_trace_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

int sl_trace_load(sl_trace **out, const char *path) {
  *out = NULL;
  FILE *f;
  int rc = sl__fopen_regular(&f, path); /* a FIFO or /dev/zero is refused, not read until memory runs out */
  if (rc) return sl__err_wrap(rc, "cannot open the trace");
  struct stat st;
  bool big = fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size > SL_TRACE_MAX_BYTES;
  sl__str s = {0};
  char buf[65536];
  size_t n;
  while (!rc && !big && (n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (s.len + n > SL_TRACE_MAX_BYTES) big = true; /* checked as read too: the file may grow while it is */
    else rc = sl__str_append(&s, buf, n);
  }
  bool bad = ferror(f);
  fclose(f);
  if (!rc && big)
    rc = sl__err(SL_EINVAL, "%s: larger than the %u MiB a trace may be (SL_TRACE_MAX_BYTES): not a trace", path,
                 SL_TRACE_MAX_BYTES >> 20);
  if (!rc && bad) rc = sl__err(SL_EIO, "%s: read error", path);
  if (!rc) rc = sl_trace_from_json(out, s.s ? s.s : "", s.len, path);
  sl__str_dispose(&s);
  return rc;
}

/* ---- accessors ---- */
uint64_t sl_trace_elements(const sl_trace *t) { return t->elements; }
double sl_trace_seconds(const sl_trace *t) { return t->seconds; }
bool sl_trace_ended(const sl_trace *t) { return t->ended; }
double sl_trace_throughput(const sl_trace *t) { return t->seconds > 0 ? (double)t->elements / t->seconds : 0; }
double sl_trace_process_cpu(const sl_trace *t) { return t->process_cpu; }
const sl_machine *sl_trace_machine(const sl_trace *t) { return &t->machine; }
int sl_trace_op_count(const sl_trace *t) { return t->nops; }
int sl_trace_op(sl_op_stats *out, const sl_trace *t, int i) {
  if (i < 0 || i >= t->nops) return sl__err(SL_EINVAL, "op index %d outside 0..%d", i, t->nops - 1);
  *out = t->ops[i].s;
  return 0;
}
int sl_trace_spec_json(char **out, const sl_trace *t) {
  char *s = json_dumps(t->spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (!s) return sl__oom("the spec text");
  *out = sl__strdup(s);
  sl__free(s);
  return *out ? 0 : sl__oom("the spec text");
}

/* ops/pipeline.c: a spec (JSON text, file or builder) becomes a pipeline: an array of ops in pre-order, each
 * chained to its input; sl_iter is one run of it. Also the per-op counters API. */
#include <errno.h>
#include <math.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/stream_int.h"
#include "ops/op_async_int.h"

/* A pipeline: its ops in pre-order, each chained to its input (engine_int.h reads it through sl__pipeline_*). */
struct sl_pipeline {
  json_t *spec;     /* the normalised spec (owned) */
  char *name;
  uint64_t seed;
  sl__op **ops;     /* pre-order */
  int nops;
  sl__op *root;     /* last op of the top chain */
  char *origin;
  char *base_dir;   /* directory of the spec file: relative paths in the spec resolve against it */
  int nstamps;      /* random maps given a stamp slot in sl_eref (resumable state) */
  bool no_timing;   /* its samplers never time, like SL_NO_TIMING for one pipeline (bench/trace_cost.c's
                     * untraced twin); set before any iterator is opened */
};

struct sl_iter {
  sl_pipeline *pl;
  sl__run run;
  sl__it *root;
  int sticky;
  uint64_t delivered; /* elements handed out, those before a restored state included */
  sl__errbox box;
};

static void op_free(sl__op *op) {
  if (!op) return;
  pthread_mutex_destroy(&op->live_mu);
  sl__op_skips_free(op);
  if (op->vt && op->vt->free) op->vt->free(op);
  sl__keep_free(op->keep);
  sl__free(op->shape);
  sl__free(op->path);
  sl__free(op->label);
  sl__free(op);
}

void sl_pipeline_free(sl_pipeline *p) {
  if (!p) return;
  for (int i = 0; i < p->nops; i++) op_free(p->ops[i]);
  sl__free(p->ops);
  json_decref(p->spec);
  sl__free(p->name);
  sl__free(p->origin);
  sl__free(p->base_dir);
  sl__free(p);
}

static int add_op(sl_pipeline *p, sl__op *op) {
  sl__op **n = sl__realloc(p->ops, (size_t)(p->nops + 1) * sizeof *n);
  if (!n) return sl__oom("the op table");
  p->ops = n;
  op->no_timing = p->no_timing;
  p->ops[p->nops++] = op;
  return 0;
}

/* "unknown op 'mapp'; did you mean 'map'?" */
static int unknown_op(const char *opath, const char *kind) {
  const char *names[64];
  size_t n = 0;
  for (const sl__op_vt *vt; n < 64 && (vt = sl__op_at(n)); n++) names[n] = vt->kind;
  const char *near = sl__name_suggest(names, n, kind);
  if (near)
    return sl__err(SL_EINVAL, "%s.op: unknown op '%s'; did you mean '%s'? (known: %s)", opath, kind, near, sl__op_names());
  return sl__err(SL_EINVAL, "%s.op: unknown op '%s' (known: %s)", opath, kind, sl__op_names());
}

/* Parses the chain `arr` at JSON path `path`; *last gets the chain's last op. `seed` is the structure of the
 * element a nested chain starts from (NULL for the top chain). */
/* "seed_op": the op index (or, for a fused map, the indices) the op's per-element seeds derive from; absent, its
 * own. The planner's fusion writes it so that a rewritten spec draws the same randomness as the one it came from. */
static int seed_ops_parse(sl__op *op, json_t *obj) {
  json_t *v = json_object_get(obj, "seed_op");
  op->seed_ops[0] = op->index;
  op->nseed_ops = 1;
  if (!v) return 0;
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (n < 1 || n > SL__MAX_SEED_OPS || (n > 1 && sl__op_model(op->vt->kind) != SL__MK_MAP))
    return sl__err(SL_EINVAL, "%s.seed_op: expected an op index (a map: or up to %d of them)", op->path,
                   SL__MAX_SEED_OPS);
  for (size_t k = 0; k < n; k++) {
    json_t *x = json_is_array(v) ? json_array_get(v, k) : v;
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 24))
      return sl__err(SL_EINVAL, "%s.seed_op: expected an op index (an integer in 0..16777216), found %s", op->path,
                     sl__json_type_name(x));
    op->seed_ops[k] = (int)json_integer_value(x);
  }
  op->nseed_ops = (int)n;
  return 0;
}

static int parse_chain(sl_pipeline *p, json_t *arr, const char *path, bool nested, int parent, sl__op **last,
                       const sl__struct *seed, int level) {
  /* Each nesting level adds an interleave to the path: the limit bounds this recursion too. */
  if (level > SL__MAX_DEPTH)
    return sl__err(SL_EINVAL, "%s: interleave sources nested more than %d deep (the limit on op chain depth)", path,
                   SL__MAX_DEPTH);
  if (!json_is_array(arr))
    return sl__err(SL_EINVAL, "%s: expected an array of ops, found %s", path, sl__json_type_name(arr));
  if (json_array_size(arr) == 0) return sl__err(SL_EINVAL, "%s: the chain has no ops", path);
  sl__op *prev = NULL;
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *obj = json_array_get(arr, i);
    char opath[512];
    snprintf(opath, sizeof opath, "%s[%zu]", path, i);
    if (!json_is_object(obj))
      return sl__err(SL_EINVAL, "%s: expected an op object, found %s", opath, sl__json_type_name(obj));
    json_t *kind = json_object_get(obj, "op");
    if (!json_is_string(kind)) return sl__err(SL_EINVAL, "%s.op: missing or not a string", opath);
    const sl__op_vt *vt = sl__op_lookup(json_string_value(kind));
    if (!vt) return unknown_op(opath, json_string_value(kind));
    sl__op *op = sl__calloc(1, sizeof *op);
    if (!op) return sl__oom("an op");
    op->vt = vt;
    pthread_mutex_init(&op->live_mu, NULL);
    op->pl = p;
    op->index = p->nops;
    op->parent = -1;
    op->nested = nested;
    op->json = obj;
    op->input = prev;
    op->parallelism = 1;
    op->cardinality = -1;
    op->path = sl__strdup(opath);
    op->label = sl__strdup(vt->kind);
    if (!op->path || !op->label || add_op(p, op)) {
      op_free(op);
      return sl__oom("an op");
    }
    if ((vt->flags & SL__OPF_SOURCE) && prev)
      return sl__err(SL_EINVAL, "%s: '%s' makes elements from nothing and must come first in its chain", opath,
                     vt->kind);
    if ((vt->flags & SL__OPF_NEEDS_INPUT) && !prev && !nested)
      return sl__err(SL_EINVAL, "%s: '%s' needs an input (put a 'files' op before it, or use it inside an "
                                "interleave source)", opath, vt->kind);
    if (prev) prev->parent = op->index;
    int rc = sl__op_check(op, obj);
    if (rc || (rc = seed_ops_parse(op, obj))) return rc;
    if (vt->flags & SL__OPF_TAKES_SOURCE) {
      json_t *src = json_object_get(obj, "source");
      if (!src) return sl__err(SL_EINVAL, "%s.source: '%s' needs a nested source chain", opath, vt->kind);
      char spath[600];
      snprintf(spath, sizeof spath, "%s.source", opath);
      sl__op *slast = NULL;
      rc = parse_chain(p, src, spath, true, op->index, &slast, prev ? prev->shape : seed, level + 1);
      if (rc) return rc;
      op->source = slast;
      slast->parent = op->index;
      for (sl__op *u = slast; u; u = u->input) u->owner = op; /* a state's refs are made again through it */
    }
    int below = prev ? prev->height : 0;
    if (op->source && op->source->height > below) below = op->source->height;
    op->height = below + 1;
    if (op->height > SL__MAX_DEPTH)
      return sl__err(SL_EINVAL, "%s: the op chain is more than %d ops deep here (nested interleave sources count): "
                                "the limit on op chain depth", opath, SL__MAX_DEPTH);
    if ((rc = vt->parse(op, obj)) || (rc = sl__op_infer(op, seed))) return rc;
    /* A random map writes each element's index into the element's ref, so that a resumed run makes it again with
     * the same seed; past SL_REF_STAMPS of them a run cannot save its state (op_state.c says so). */
    op->stamp = -1;
    if (op->random && sl__op_model(vt->kind) == SL__MK_MAP) op->stamp = p->nstamps < SL_REF_STAMPS ? p->nstamps++ : -2;
    atomic_store(&op->active_par, (int)op->parallelism);
    atomic_store(&op->active_buf, (int)op->buffer);
    atomic_store(&op->live_cache, 0);
    atomic_store(&op->live_cache_settled, false);
    prev = op;
  }
  if (parent >= 0) { /* nothing: caller links the chain's last op */
  }
  *last = prev;
  return 0;
}

static int build(sl_pipeline **out, json_t *spec, const char *origin, const char *base_dir) {
  *out = NULL;
  sl_pipeline *p = sl__calloc(1, sizeof *p);
  if (!p) {
    json_decref(spec);
    return sl__oom("a pipeline");
  }
  p->spec = spec;
  p->origin = sl__strdup(origin ? origin : "<spec>");
  p->base_dir = sl__strdup(base_dir ? base_dir : "");
  int rc = 0;
  if (!p->origin || !p->base_dir) {
    rc = sl__oom("a pipeline");
    goto fail;
  }
  if (!json_is_object(spec)) {
    rc = sl__err(SL_EINVAL, "%s: the spec must be a JSON object, found %s", p->origin, sl__json_type_name(spec));
    goto fail;
  }
  const char *key;
  json_t *v;
  json_object_foreach(spec, key, v) {
    if (strcmp(key, "name") && strcmp(key, "seed") && strcmp(key, "ops") && strcmp(key, "comment")) {
      rc = sl__err(SL_EINVAL, "%s: unknown top-level key '%s' (known: name, seed, ops, comment)", p->origin, key);
      goto fail;
    }
  }
  json_t *name = json_object_get(spec, "name");
  if (name && !json_is_string(name)) {
    rc = sl__err(SL_EINVAL, "%s: name: expected a string, found %s", p->origin, sl__json_type_name(name));
    goto fail;
  }
  p->name = sl__strdup(name ? json_string_value(name) : "pipeline");
  json_t *seed = json_object_get(spec, "seed");
  if (seed && (!json_is_integer(seed) || json_integer_value(seed) < 0)) {
    rc = sl__err(SL_EINVAL, "%s: seed: expected a non-negative integer", p->origin);
    goto fail;
  }
  p->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
  if (!p->name) {
    rc = sl__oom("a pipeline");
    goto fail;
  }
  json_t *ops = json_object_get(spec, "ops");
  if (!ops) {
    rc = sl__err(SL_EINVAL, "%s: the spec has no 'ops' array", p->origin);
    goto fail;
  }
  rc = parse_chain(p, ops, "ops", false, -1, &p->root, NULL, 0);
  if (!rc) rc = sl__pipeline_check_caches(p); /* a cache file that is an input would be overwritten */
  if (rc) {
    if (strncmp(sl_error_last(), p->origin, strlen(p->origin))) sl__err_wrap(rc, "%s", p->origin);
    goto fail;
  }
  *out = p;
  return 0;
fail:
  sl_pipeline_free(p);
  return rc;
}

int sl_pipeline_from_json(sl_pipeline **out, const char *json, size_t len, const char *origin) {
  *out = NULL;
  json_error_t err;
  sl__json_oom_take();
  json_t *spec = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  /* jansson's lexer drops characters when an allocation fails and still returns a document: any allocation
   * failure during the parse makes the result untrustworthy. */
  bool oom = sl__json_oom_take();
  if (spec && oom) {
    json_decref(spec);
    spec = NULL;
  }
  if (!spec && (json_error_code(&err) == json_error_out_of_memory || oom))
    return sl__err(SL_ENOMEM, "%s: out of memory reading the spec", origin ? origin : "<spec>");
  if (!spec)
    return sl__err(SL_EINVAL, "%s:%d:%d: malformed JSON: %s", origin ? origin : "<spec>", err.line, err.column,
                   err.text);
  return build(out, spec, origin, NULL);
}

int sl_pipeline_from_file(sl_pipeline **out, const char *path) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return sl__err(SL_EIO, "%s: cannot open the spec: %s", path, strerror(errno));
  json_error_t err;
  sl__json_oom_take();
  json_t *spec = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
  fclose(f);
  bool oom = sl__json_oom_take();
  if (spec && oom) {
    json_decref(spec);
    spec = NULL;
  }
  if (!spec && (json_error_code(&err) == json_error_out_of_memory || oom))
    return sl__err(SL_ENOMEM, "%s: out of memory reading the spec", path);
  if (!spec) return sl__err(SL_EINVAL, "%s:%d:%d: malformed JSON: %s", path, err.line, err.column, err.text);
  /* Relative data paths in a spec are relative to the working directory, as in tf.data; base_dir is kept empty.
   * (A spec that wants paths relative to itself can say so with absolute paths.) */
  return build(out, spec, path, NULL);
}

int sl_pipeline_to_json(char **out, const sl_pipeline *p) {
  char *s = json_dumps(p->spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (!s) return sl__oom("the spec text");
  *out = sl__strdup(s);
  sl__free(s);
  return *out ? 0 : sl__oom("the spec text");
}

const char *sl_pipeline_name(const sl_pipeline *p) { return p->name; }
uint64_t sl_pipeline_seed(const sl_pipeline *p) { return p->seed; }

sl__op *sl__pipeline_op(const sl_pipeline *pl, int i) { return pl->ops[i]; }
sl__op *sl__pipeline_root(const sl_pipeline *pl) { return pl->root; }
json_t *sl__pipeline_spec(const sl_pipeline *pl) { return pl->spec; }
const char *sl__pipeline_origin(const sl_pipeline *pl) { return pl->origin; }
/* The flag is copied onto each op so that the samplers (engine_stats.c) read it from the op without calling back
 * up into the pipeline. */
void sl__pipeline_set_no_timing(sl_pipeline *pl, bool no_timing) {
  pl->no_timing = no_timing;
  for (int i = 0; i < pl->nops; i++) pl->ops[i]->no_timing = no_timing;
}

void sl__pipeline_replace(sl_pipeline *p, sl_pipeline *q) {
  sl_pipeline tmp = *p;
  *p = *q;
  *q = tmp;
  for (int i = 0; i < p->nops; i++) p->ops[i]->pl = p;
  for (int i = 0; i < q->nops; i++) q->ops[i]->pl = q;
  sl_pipeline_free(q);
}

char *sl__resolve_path(const sl_pipeline *pl, const char *path) {
  if (path[0] == '/' || sl__is_url(path) || !pl->base_dir || !pl->base_dir[0]) return sl__strdup(path);
  sl__str s = {0};
  if (sl__str_printf(&s, "%s/%s", pl->base_dir, path)) return NULL;
  return s.s;
}

/* ---- runs ---- */
int sl__iter_open(sl_iter **out, sl_pipeline *p, sl__sr *rd, uint64_t delivered) {
  *out = NULL;
  sl_iter *it = sl__calloc(1, sizeof *it);
  if (!it) return sl__oom("an iterator");
  it->pl = p;
  it->run.pl = p;
  it->delivered = delivered;
  atomic_init(&it->run.cancel, false);
  atomic_init(&it->run.want_state, rd != NULL); /* a resumed run is likely to save again */
  sl__t_restore = rd;
  int rc = sl__op_open(p->root, &it->run, NULL, &it->root);
  sl__t_restore = NULL;
  if (!rc && rd && rd->at != rd->n) {
    rc = sl__err(SL_ECORRUPT, "the saved state has %zu bytes left over after the pipeline's records (damaged, or "
                              "of another pipeline)", rd->n - rd->at);
    sl__it_free(it->root);
  }
  if (rc) {
    sl__free(it);
    return rc;
  }
  *out = it;
  return 0;
}

int sl_pipeline_iter(sl_iter **out, sl_pipeline *p) { return sl__iter_open(out, p, NULL, 0); }

sl__it *sl__iter_root(sl_iter *it) { return it->root; }
sl_pipeline *sl__iter_pipeline(sl_iter *it) { return it->pl; }
int sl__iter_sticky(const sl_iter *it) { return it->sticky; }

uint64_t sl_iter_position(const sl_iter *it) { return it->delivered; }

void sl_iter_keep_state(sl_iter *it) { atomic_store(&it->run.want_state, true); }

void sl_pipeline_set_epoch(sl_pipeline *p, uint64_t epoch) {
  for (int i = 0; i < p->nops; i++)
    if (!p->ops[i]->nested) atomic_store(&p->ops[i]->opens, epoch);
}

int sl_iter_next(sl_elem *out, sl_iter *it) {
  if (it->sticky) return sl__errbox_raise(&it->box);
  if (sl__canceled(&it->run)) {
    it->sticky = SL_ECANCELED;
    sl__err(SL_ECANCELED, "the run was cancelled");
    sl__errbox_capture(&it->box, SL_ECANCELED);
    return SL_ECANCELED;
  }
  int rc = sl__it_next(it->root, out);
  if (rc == 0) it->delivered++;
  if (rc < 0) {
    if (!sl_error_last()[0]) sl__err(rc, "%s", sl_strerror(rc));
    it->sticky = rc;
    sl__errbox_capture(&it->box, rc);
  }
  return rc;
}

void sl_iter_cancel(sl_iter *it) {
  if (it) atomic_store(&it->run.cancel, true);
}

void sl_iter_free(sl_iter *it) {
  if (!it) return;
  atomic_store(&it->run.cancel, true);
  sl__it_free(it->root);
  sl__free(it);
}

/* ---- counters ---- */
int sl_pipeline_op_count(const sl_pipeline *p) { return p->nops; }

static double ns_s(uint64_t ns) { return (double)ns * 1e-9; }
#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

int sl_pipeline_op_stats(sl_op_stats *s, const sl_pipeline *p, int i) {
  if (i < 0 || i >= p->nops) return sl__err(SL_EINVAL, "op index %d outside 0..%d", i, p->nops - 1);
  const sl__op *op = p->ops[i];
  memset(s, 0, sizeof *s);
  s->op = op->vt->kind;
  s->path = op->path;
  s->label = op->label;
  s->parent = op->parent;
  s->nested = op->nested;
  s->parallelism = atomic_load(&((sl__op *)op)->active_par);
  s->buffer = op->buf_autotune ? atomic_load(&((sl__op *)op)->active_buf) : op->buffer;
  s->async = op->async;
  s->random = op->random;
  s->serial = op->serial;
  sl__op_counts((sl__op *)op, &s->elements_out, &s->elements_in, &s->bytes_out);
  /* Own time: next() calls on the consumer's side and work on worker threads, each sample without the op calls
   * timed inside it on the same thread (sl__nest). */
  double cpu = (double)LD(op->st.cpu_ns) + (double)LD(op->st.work_cpu_ns);
  double wall = (double)LD(op->st.wall_ns) + (double)LD(op->st.work_wall_ns);
  s->cpu_seconds = (cpu > 0 ? cpu : 0) * 1e-9;
  s->wall_seconds = (wall > 0 ? wall : 0) * 1e-9;
  s->wait_seconds = ns_s(LD(op->st.wait_ns));
  /* Waiting for a core: the sampled calls' run-queue share of their own wall time, applied to the op's wall. */
  uint64_t rw = LD(op->st.runq_wall_ns);
  s->runq_seconds = rw ? s->wall_seconds * fmin(1.0, (double)LD(op->st.runq_ns) / (double)rw) : wall > 0 ? -1 : 0;
  s->disk_bytes = LD(op->st.disk_bytes);
  s->source_bytes = op->source_bytes;
  s->skipped = LD(op->st.skipped);
  s->errors_skipped = LD(op->st.errors_skipped);
  s->filled = LD(op->st.filled);
  s->net_requests = LD(op->st.net_requests);
  s->net_retries = LD(op->st.net_retries);
  s->net_bytes = LD(op->st.net_bytes);
  s->net_ttfb_seconds = ns_s(LD(op->st.net_ttfb_ns));
  s->net_xfer_seconds = ns_s(LD(op->st.net_xfer_ns));
  s->net_block_bytes = LD(op->st.net_block);
  s->net_in_flight = LD(op->st.net_inflight);
  s->net_solo_bytes = LD(op->st.net_solo_bytes);
  s->net_solo_seconds = ns_s(LD(op->st.net_solo_ns));
  s->net_overlap_bytes = LD(op->st.net_ovl_bytes);
  s->net_overlap_seconds = ns_s(LD(op->st.net_ovl_ns));
  s->net_objects = LD(op->st.net_objects);
  s->net_object_bytes = LD(op->st.net_object_bytes);
  s->net_kept = LD(op->st.net_kept);
  s->net_cpu_seconds = ns_s(LD(op->st.net_cpu_ns));
  uint64_t on = LD(op->st.occ_n);
  s->buffer_occupancy = on ? (double)LD(op->st.occ_sum) / (double)on : 0;
  s->bytes_held = LD(op->st.held);
  s->bytes_held_peak = LD(op->st.held_peak);
  s->cardinality = op->cardinality;
  /* Per-call spread: worker-thread work when the op has any (parallel map), else its own next() calls. */
  uint64_t wn = LD(op->st.work_n), nn = LD(op->st.next_n);
  double n = 0, sum_us = 0, sq = 0;
  if (wn) {
    n = (double)wn;
    sum_us = (double)LD(op->st.work_wall_ns) * 1e-3;
    sq = (double)LD(op->st.work_sq_us);
  } else if (nn) {
    n = (double)nn;
    sum_us = (double)LD(op->st.wall_ns) * 1e-3;
    sq = (double)LD(op->st.next_sq_us);
  }
  if (n > 0) {
    double mean = sum_us / n, var = sq / n - mean * mean;
    s->call_mean = mean * 1e-6;
    s->call_sd = var > 0 ? sqrt(var) * 1e-6 : 0;
  }
  return 0;
}

void sl_pipeline_reset_stats(sl_pipeline *p) {
  for (int i = 0; i < p->nops; i++) {
    sl__stats *st = &p->ops[i]->st;
    uint64_t held = LD(st->held);
    memset(st, 0, sizeof *st);
    atomic_store(&st->held, held);
    atomic_store(&st->held_peak, held);
    sl__op_reset_counts(p->ops[i]);
  }
}

/* The element structure after op i, as the schemas inferred it when the pipeline was built (op_schema.c). */
int sl_pipeline_structure(char **out, const sl_pipeline *p, int i) {
  *out = NULL;
  if (i < 0 || i >= sl_pipeline_op_count(p))
    return sl__err(SL_EINVAL, "op index %d outside 0..%d", i, sl_pipeline_op_count(p) - 1);
  const sl__op *op = sl__pipeline_op(p, i);
  sl__str b = {0};
  int rc = 0;
  if (!op->shape) {
    if (sl__str_printf(&b, "...")) rc = sl__oom("a structure");
  } else {
    rc = sl__struct_describe(&b, op->shape);
  }
  if (rc) {
    sl__str_dispose(&b);
    return rc;
  }
  *out = b.s;
  return 0;
}

int sl_pipeline_op_skips(char **out, const sl_pipeline *p, int i) {
  *out = NULL;
  if (i < 0 || i >= sl_pipeline_op_count(p)) return sl__err(SL_EINVAL, "sl_pipeline_op_skips: no op %d", i);
  return sl__op_skips_json(out, sl__pipeline_op(p, i));
}

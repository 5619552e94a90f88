/* ops/op_basic.c: the small synchronous operators: range, take, skip, repeat, shard. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dist_hook_int.h"
#include "ops/op_int.h"

static int64_t in_card(const sl__op *op) { return op->input ? op->input->cardinality : -1; }

/* ---------------- range ---------------- */
typedef struct {
  int64_t start, stop, step;
} range_cfg;
typedef struct {
  sl__it it;
  int64_t next;
} range_it;

static int range_parse(sl__op *op, json_t *o) {
  range_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("range");
  op->impl = c;
  int rc;
  sl_args k = sl__op_knobs(op, o);
  if ((rc = sl__get_int(&c->start, &k, "start")) || (rc = sl__get_int_or(&c->stop, &k, "stop", INT64_MAX)) ||
      (rc = sl__get_int(&c->step, &k, "step")))
    return rc;
  if (c->step == 0) return sl__err(SL_EINVAL, "%s.step: must not be 0", op->path);
  if (!json_object_get(o, "stop")) op->cardinality = -2;
  else if ((c->step > 0 && c->stop <= c->start) || (c->step < 0 && c->stop >= c->start)) op->cardinality = 0;
  else {
    __int128 span = c->step > 0 ? (__int128)c->stop - c->start : (__int128)c->start - c->stop;
    __int128 st = c->step > 0 ? c->step : -(__int128)c->step;
    op->cardinality = (int64_t)((span + st - 1) / st);
  }
  return 0;
}
static int range_next(sl__it *it, sl_elem *out) {
  range_it *r = (range_it *)it;
  const range_cfg *c = it->op->impl;
  if (c->step > 0 ? r->next >= c->stop : r->next <= c->stop) return SL_END;
  int rc = sl_elem_set_i64(out, "value", r->next);
  if (rc) return rc;
  sl__ref_set(out, it->op, NULL, (uint64_t)r->next, 0);
  if (__builtin_add_overflow(r->next, c->step, &r->next)) r->next = c->stop;
  return 0;
}
static void plain_free(sl__it *it) { sl__free(it); }
static const sl__it_vt RANGE_IT = {range_next, plain_free};
static int range_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(range_it), &RANGE_IT, op, run, NULL);
  if (!rc) ((range_it *)*out)->next = ((range_cfg *)op->impl)->start;
  return rc;
}
static void impl_free(sl__op *op) { sl__free(op->impl); }
static int range_save(sl__it *it, sl__sw *w) {
  sl__sw_u64(w, (uint64_t)((range_it *)it)->next);
  return 0;
}
static int range_load(sl__it *it, sl__sr *r) {
  uint64_t v;
  int rc = sl__sr_u64(r, &v, "a range's next value");
  if (!rc) ((range_it *)it)->next = (int64_t)v;
  return rc;
}
static int range_remake(sl__op *op, sl__run *run, const sl_eref *r, sl_elem *out) {
  (void)run;
  int rc = sl_elem_set_i64(out, "value", (int64_t)r->pos);
  if (!rc) sl__ref_set(out, op, NULL, r->pos, 0);
  return rc;
}
static const sl__op_state RANGE_STATE = {range_save, range_load, NULL, range_remake, 0};
static const sl__arg RANGE_KNOBS[] = {
    {"start", SL__ARG_INT, "0", 0, 0, 0, NULL, "the first value"},
    {"stop", SL__ARG_INT, NULL, 0, 0, 0, NULL, "the end, not included (absent: no end)"},
    {"step", SL__ARG_INT, "1", 0, 0, 0, NULL, "the increment (not 0)"},
    {NULL}};
static int range_infer(sl__op *op, sl__struct *s, const sl__struct *src) {
  (void)src;
  *s = (sl__struct){0};
  return sl__struct_put(s, "value", SL_INT64, 0, op->path, NULL);
}
static const sl__op_schema RANGE_SCHEMA = {SL__MK_SOURCE, 0, "the integers start, start + step, ... before stop, as "
                                           "int64 `value`", RANGE_KNOBS, range_infer};
const sl__op_vt sl__op_range = {"range", range_parse, range_open, impl_free, SL__OPF_SOURCE, &RANGE_SCHEMA,
                                &RANGE_STATE};

/* ---------------- take / skip ---------------- */
typedef struct {
  sl__it it;
  int64_t done;
} count_it;

/* take, skip: how many they took or skipped. */
static int count_save(sl__it *it, sl__sw *w) {
  sl__sw_u64(w, (uint64_t)((count_it *)it)->done);
  return 0;
}
static int count_load(sl__it *it, sl__sr *r) {
  uint64_t v;
  int rc = sl__sr_u64(r, &v, "a count");
  if (!rc) ((count_it *)it)->done = (int64_t)v;
  return rc;
}
static const sl__op_state COUNT_STATE = {count_save, count_load, NULL, NULL, SL__STF_PASS};

static int take_parse(sl__op *op, json_t *o) {
  int64_t *n = sl__calloc(1, sizeof *n);
  if (!n) return sl__oom("take");
  op->impl = n;
  int rc;
  sl_args k = sl__op_knobs(op, o);
  if ((rc = sl__get_int(n, &k, "count"))) return rc;
  int64_t ic = in_card(op);
  op->cardinality = ic == -2 ? *n : ic >= 0 ? (ic < *n ? ic : *n) : -1;
  if (ic == -1) op->cardinality = -1;
  return 0;
}
static int take_next(sl__it *it, sl_elem *out) {
  count_it *t = (count_it *)it;
  if (t->done >= *(int64_t *)it->op->impl) return SL_END;
  int rc = sl__it_pull(it, out);
  if (rc == 0) t->done++;
  return rc;
}
static const sl__it_vt TAKE_IT = {take_next, plain_free};
static int take_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(count_it), &TAKE_IT, op, run, seed);
}
static const sl__arg COUNT_KNOBS[] = {
    {"count", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__ARGF_LO, 0, 0, NULL, "the number of elements"},
    {NULL}};
static const sl__op_schema TAKE_SCHEMA = {SL__MK_SEQ, 0, "the first `count` elements", COUNT_KNOBS, NULL};
const sl__op_vt sl__op_take = {"take", take_parse, take_open, impl_free, SL__OPF_NEEDS_INPUT, &TAKE_SCHEMA,
                               &COUNT_STATE};

static int skip_parse(sl__op *op, json_t *o) {
  int rc = take_parse(op, o);
  if (rc) return rc;
  int64_t n = *(int64_t *)op->impl, ic = in_card(op);
  op->cardinality = ic >= 0 ? (ic > n ? ic - n : 0) : ic;
  return 0;
}
static int skip_next(sl__it *it, sl_elem *out) {
  count_it *t = (count_it *)it;
  int64_t n = *(int64_t *)it->op->impl;
  while (t->done < n) {
    int rc = sl__it_pull(it, out);
    if (rc) return rc;
    sl_elem_clear(out);
    t->done++;
  }
  return sl__it_pull(it, out);
}
static const sl__it_vt SKIP_IT = {skip_next, plain_free};
static int skip_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(count_it), &SKIP_IT, op, run, seed);
}
static const sl__op_schema SKIP_SCHEMA = {SL__MK_SEQ, 0, "all but the first `count` elements", COUNT_KNOBS, NULL};
const sl__op_vt sl__op_skip = {"skip", skip_parse, skip_open, impl_free, SL__OPF_NEEDS_INPUT, &SKIP_SCHEMA,
                               &COUNT_STATE};

/* ---------------- repeat ---------------- */
/* With op->live_cache set (an online tuner inserting the plan's cache at the repeat's input), the next epoch that
 * starts is kept as it passes (elements share their buffers, as a cache op's do) and, once complete, replayed
 * instead of opening the input again. The input must be deterministic for that to change nothing: the tuner asks
 * only where the planner allows a cache (no random op upstream). An epoch that outgrows the budget is dropped and
 * the repeat goes on as before. */
enum { REC_NONE = 0, REC_FILLING, REC_REPLAY, REC_GAVE_UP };
typedef struct {
  sl__it it;
  int64_t epochs;
  const sl_elem *seed;
  sl_elem seed_copy;
  bool any; /* the current epoch produced something: an empty input repeated forever must end, not spin */
  int rec;  /* REC_* */
  sl_elem *kept;
  size_t nkept, capkept, at;
  uint64_t bytes;
} repeat_it;

static void repeat_drop_kept(repeat_it *r) {
  for (size_t i = 0; i < r->nkept; i++) sl_elem_clear(&r->kept[i]);
  sl__free(r->kept);
  r->kept = NULL;
  r->nkept = r->capkept = r->at = 0;
  sl__stats_held(r->it.op, -(int64_t)r->bytes);
  r->bytes = 0;
}

/* Keeps a reference to e; false when over the budget or out of memory (the recording is then dropped). */
static bool repeat_keep(repeat_it *r, const sl_elem *e, int64_t budget) {
  size_t b = sl_elem_bytes(e);
  if (r->bytes + b > (uint64_t)budget) return false;
  if (r->nkept == r->capkept) {
    size_t cap = r->capkept ? 2 * r->capkept : 256;
    size_t nb;
    if (!sl__mul_ok(cap, sizeof(sl_elem), &nb)) return false;
    sl_elem *n = sl__realloc(r->kept, nb);
    if (!n) return false;
    r->kept = n;
    r->capkept = cap;
  }
  sl_elem_copy(&r->kept[r->nkept++], e);
  r->bytes += b;
  sl__stats_held(r->it.op, (int64_t)b);
  return true;
}

static int repeat_parse(sl__op *op, json_t *o) {
  int64_t *n = sl__calloc(1, sizeof *n);
  if (!n) return sl__oom("repeat");
  op->impl = n;
  int rc;
  sl_args k = sl__op_knobs(op, o);
  if ((rc = sl__get_int(n, &k, "count"))) return rc;
  int64_t ic = in_card(op);
  if (*n == -1) op->cardinality = ic == 0 ? 0 : -2;
  else if (ic >= 0) {
    if (__builtin_mul_overflow(ic, *n, &op->cardinality)) op->cardinality = -1;
  } else op->cardinality = ic;
  return 0;
}
static int repeat_next(sl__it *it, sl_elem *out) {
  repeat_it *r = (repeat_it *)it;
  int64_t count = *(int64_t *)it->op->impl;
  for (;;) {
    if (count >= 0 && r->epochs >= count) return SL_END;
    if (r->rec == REC_REPLAY) {
      if (r->at == r->nkept) {
        r->at = 0;
        if (++r->epochs, count >= 0 && r->epochs >= count) return SL_END;
        if (sl__canceled(it->run)) return sl__err(SL_ECANCELED, "cancelled");
      }
      sl_elem_copy(out, &r->kept[r->at++]);
      return 0;
    }
    int rc = sl__it_pull(it, out);
    if (rc != SL_END) {
      if (rc == 0) {
        r->any = true;
        if (r->rec == REC_FILLING && !repeat_keep(r, out, atomic_load_explicit(&it->op->live_cache, memory_order_relaxed))) {
          repeat_drop_kept(r);
          r->rec = REC_GAVE_UP;
          atomic_store_explicit(&it->op->live_cache_settled, true, memory_order_relaxed);
        }
      }
      return rc;
    }
    r->epochs++;
    if (!r->any || (count >= 0 && r->epochs >= count)) return SL_END;
    r->any = false;
    /* A timed call of this op marked its input (sl__it_force): the next epoch's input carries the mark. */
    int force = atomic_load_explicit(&it->input->nest_force, memory_order_relaxed);
    sl__it_free(it->input);
    it->input = NULL;
    if (sl__canceled(it->run)) return sl__err(SL_ECANCELED, "cancelled");
    if (r->rec == REC_FILLING && r->nkept > 0) { /* a whole epoch kept: replay it from now on */
      r->rec = REC_REPLAY;
      r->at = 0;
      atomic_store_explicit(&it->op->live_cache_settled, true, memory_order_relaxed);
      continue;
    }
    if (r->rec == REC_NONE && atomic_load_explicit(&it->op->live_cache, memory_order_relaxed) > 0) r->rec = REC_FILLING;
    rc = sl__op_open_input(it->op, it->run, r->seed ? &r->seed_copy : NULL, &it->input);
    if (rc) return rc;
    sl__it_force(it->input, force);
  }
}
static void repeat_free(sl__it *it) {
  repeat_it *r = (repeat_it *)it;
  repeat_drop_kept(r);
  sl_elem_clear(&r->seed_copy);
  sl__free(it);
}
static const sl__it_vt REPEAT_IT = {repeat_next, repeat_free};
static int repeat_save(sl__it *it, sl__sw *w) {
  repeat_it *r = (repeat_it *)it;
  if (r->rec != REC_NONE && r->rec != REC_GAVE_UP)
    return sl__op_err(it->op, SL_EINVAL, "cannot save its position while the online tuner keeps an epoch in memory "
                                         "(a live cache): run without --tuner to save states");
  sl__sw_u64(w, (uint64_t)r->epochs);
  sl__sw_u64(w, r->any);
  return 0;
}
static int repeat_load(sl__it *it, sl__sr *rd) {
  repeat_it *r = (repeat_it *)it;
  uint64_t e, any;
  int rc;
  if ((rc = sl__sr_u64(rd, &e, "a repeat's epoch")) || (rc = sl__sr_u64(rd, &any, "a repeat's epoch"))) return rc;
  r->epochs = (int64_t)e;
  r->any = any != 0;
  return 0;
}
static const sl__op_state REPEAT_STATE = {repeat_save, repeat_load, NULL, NULL, SL__STF_PASS};
static int repeat_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  int rc = sl__it_new(out, sizeof(repeat_it), &REPEAT_IT, op, run, seed);
  if (rc) return rc;
  repeat_it *r = (repeat_it *)*out;
  if (seed) {
    sl_elem_copy(&r->seed_copy, seed);
    r->seed = &r->seed_copy;
  }
  if (*(int64_t *)op->impl == 0) {
    /* count 0: nothing, but the input stays open for a uniform free. */
  }
  return 0;
}
static const sl__arg REPEAT_KNOBS[] = {
    {"count", SL__ARG_INT, "-1", SL__ARGF_LO, -1, 0, NULL, "the number of epochs (-1: for ever)"},
    {NULL}};
static const sl__op_schema REPEAT_SCHEMA = {SL__MK_REPEAT, 0, "its input's epochs, `count` times", REPEAT_KNOBS, NULL};
const sl__op_vt sl__op_repeat = {"repeat", repeat_parse, repeat_open, impl_free, SL__OPF_NEEDS_INPUT, &REPEAT_SCHEMA,
                                 &REPEAT_STATE};

/* ---------------- shard ---------------- */
/* What a shard does with the last, incomplete round of an epoch (fewer elements left than shards):
 * keep: the ranks that have one take it (exactly once; the first ranks get one more element);
 * drop: nobody takes it (every rank the same count; up to num-1 elements unseen this epoch);
 * pad:  the ranks without one take an element from the start of the epoch again (every rank the same count;
 *       up to num-1 elements seen twice), as torch's DistributedSampler does. */
enum { SHARD_KEEP, SHARD_DROP, SHARD_PAD };
typedef struct {
  int64_t num, index;
  int remainder;
} shard_cfg;
typedef struct {
  sl__it it;
  int64_t pos;
  sl_elem held;  /* drop: this rank's element of the current round, until the round completes */
  bool has_held, done;
  sl_elem *first; /* pad: the epoch's first min(num, n) elements */
  int64_t nfirst;
} shard_it;

static int env_int(const char *name, int64_t min, int64_t *out, bool *found) {
  const char *s = getenv(name);
  *found = s && *s;
  if (!*found) return 0;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end || x < min) return -1;
  *out = x;
  return 0;
}

/* "auto" takes the group from a registered distributed runtime (sluice run under mpirun: dist registers it), else
 * from the launcher's environment: torchrun's WORLD_SIZE/RANK, Open MPI's OMPI_COMM_WORLD_SIZE/RANK, or the
 * PMI_SIZE/PMI_RANK of MPICH and Slurm. The spec keeps "auto", so one spec serves every rank. */
static int shard_auto(const sl__op *op, int64_t *num, int64_t *index) {
  const sl__dist_hooks *h = sl__dist_hooks_get();
  if (h && h->shard_auto) {
    int rc = h->shard_auto(num, index, h->payload);
    return rc ? sl__op_wrap(op, rc) : 0;
  }
  const char *const(*vars)[2] = sl__launcher_env;
  for (size_t i = 0; i < SL__LAUNCHER_NENV; i++) {
    bool fs, fr;
    if (env_int(vars[i][0], 1, num, &fs))
      return sl__err(SL_EINVAL, "%s.num_shards: \"auto\": %s=\"%s\" is not an integer >= 1", op->path, vars[i][0],
                     getenv(vars[i][0]));
    if (!fs) continue;
    if (env_int(vars[i][1], 0, index, &fr))
      return sl__err(SL_EINVAL, "%s.index: \"auto\": %s=\"%s\" is not an integer >= 0", op->path, vars[i][1],
                     getenv(vars[i][1]));
    if (!fr)
      return sl__err(SL_EINVAL, "%s.index: \"auto\" takes it from the launcher's environment, but %s is not set "
                     "(%s is)", op->path, vars[i][1], vars[i][0]);
    return 0;
  }
  return sl__err(SL_EINVAL, "%s.num_shards: \"auto\" takes it from the launcher's environment, but WORLD_SIZE is "
                 "not set (torchrun sets WORLD_SIZE and RANK, mpirun OMPI_COMM_WORLD_SIZE and _RANK; or give a "
                 "number)", op->path);
}

static bool is_auto(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return v && json_is_string(v) && !strcmp(json_string_value(v), "auto");
}

static int shard_parse(sl__op *op, json_t *o) {
  shard_cfg *c = sl__calloc(1, sizeof *c);
  if (!c) return sl__oom("shard");
  op->impl = c;
  int rc;
  sl_args k = sl__op_knobs(op, o);
  bool anum = is_auto(o, "num_shards"), aidx = is_auto(o, "index");
  int64_t num = 1, index = 0;
  if ((anum || aidx) && (rc = shard_auto(op, &num, &index))) return rc;
  if (!anum && (rc = sl__get_int(&num, &k, "num_shards"))) return rc;
  if (!aidx && (rc = sl__get_int(&index, &k, "index"))) return rc;
  c->num = num;
  c->index = index;
  /* A launched run (num_shards "auto") is training: every rank must make the same number of steps, so the default
   * pads; a fixed number keeps tf.data's shard (exactly once, uneven). */
  const char *rem = NULL;
  if ((rc = sl__get_str(&rem, &k, "remainder"))) return rc;
  if (!rem) rem = anum ? "pad" : "keep"; /* computed: the table's doc says how */
  if (!strcmp(rem, "keep")) c->remainder = SHARD_KEEP;
  else if (!strcmp(rem, "drop")) c->remainder = SHARD_DROP;
  else if (!strcmp(rem, "pad")) c->remainder = SHARD_PAD;
  else return sl__err(SL_EINVAL, "%s.remainder: unknown value '%s' (known: keep, drop, pad)", op->path, rem);
  if (c->index >= c->num)
    return sl__err(SL_EINVAL, "%s.index: %lld must be below num_shards %lld", op->path, (long long)c->index,
                   (long long)c->num);
  /* In step (default for a launched run): the maps and filters after it fill the places of what they drop. */
  bool in_step = anum;
  if (json_object_get(o, "in_step") && (rc = sl__get_bool(&in_step, &k, "in_step"))) return rc;
  op->in_step = in_step;
  int64_t ic = in_card(op);
  if (ic < 0) op->cardinality = ic;
  else if (c->remainder == SHARD_DROP) op->cardinality = ic / c->num;
  else if (c->remainder == SHARD_PAD) op->cardinality = ic / c->num + (ic % c->num != 0);
  else op->cardinality = ic > c->index ? (ic - c->index + c->num - 1) / c->num : 0;
  return 0;
}
static int shard_next(sl__it *it, sl_elem *out) {
  shard_it *s = (shard_it *)it;
  const shard_cfg *c = it->op->impl;
  if (s->done) return SL_END;
  for (;;) {
    int rc = sl__it_pull(it, out);
    if (rc == SL_END && s->pos % c->num != 0) {
      /* the epoch's last round is incomplete: positions pos .. its end are missing */
      int64_t n = s->pos, mine = n - n % c->num + c->index;
      if (s->has_held) { /* drop */
        sl_elem_clear(&s->held);
        s->has_held = false;
      } else if (c->remainder == SHARD_PAD && mine >= n && mine % n < s->nfirst) {
        /* mine % n < min(num, n) = nfirst: the padded stream wraps around to the epoch's start */
        s->done = true;
        sl_elem_copy(out, &s->first[mine % n]);
        return 0;
      }
    }
    if (rc) return rc;
    int64_t p = s->pos++;
    if (c->remainder == SHARD_PAD && p < c->num) {
      if (!s->first) {
        s->first = sl__calloc((size_t)c->num, sizeof *s->first);
        if (!s->first) {
          sl_elem_clear(out);
          return sl__op_err(it->op, SL_ENOMEM, "out of memory keeping the epoch's first %lld elements for padding",
                            (long long)c->num);
        }
      }
      if (s->nfirst < c->num) sl_elem_copy(&s->first[s->nfirst++], out);
    }
    if (c->remainder == SHARD_DROP) {
      if (p % c->num == c->index) {
        sl_elem_move(&s->held, out);
        s->has_held = true;
      } else sl_elem_clear(out);
      if (p % c->num == c->num - 1 && s->has_held) {
        sl_elem_move(out, &s->held);
        s->has_held = false;
        return 0;
      }
      continue;
    }
    if (p % c->num == c->index) return 0;
    sl_elem_clear(out);
  }
}
static void shard_free(sl__it *it) {
  shard_it *s = (shard_it *)it;
  if (s->has_held) sl_elem_clear(&s->held);
  for (int64_t i = 0; i < s->nfirst; i++) sl_elem_clear(&s->first[i]);
  sl__free(s->first);
  sl__free(it);
}
static const sl__it_vt SHARD_IT = {shard_next, shard_free};
/* Its part: the position in the epoch, whether it is done, and the elements it holds as refs. */
static int shard_save(sl__it *it, sl__sw *w) {
  shard_it *s = (shard_it *)it;
  sl__sw_u64(w, (uint64_t)s->pos);
  sl__sw_u64(w, s->done);
  sl__sw_u64(w, s->has_held);
  if (s->has_held) sl__sw_ref(w, &s->held.ref);
  sl__sw_u64(w, (uint64_t)s->nfirst);
  for (int64_t i = 0; i < s->nfirst; i++) sl__sw_ref(w, &s->first[i].ref);
  return 0;
}
static int shard_remade(sl__it *it, sl__sr *r, sl_elem *e) {
  sl_eref ref;
  int rc = sl__sr_ref(r, &ref);
  if (rc) return rc;
  sl_elem_init(e);
  rc = sl__remake(it->op->input, it->run, &ref, e);
  sl_buf_unref(ref.members);
  return rc;
}
static int shard_load(sl__it *it, sl__sr *r) {
  shard_it *s = (shard_it *)it;
  const shard_cfg *c = it->op->impl;
  uint64_t pos, done, held, nfirst;
  int rc;
  if ((rc = sl__sr_u64(r, &pos, "a shard's position")) || (rc = sl__sr_u64(r, &done, "a shard's end")) ||
      (rc = sl__sr_u64(r, &held, "a shard's held element")))
    return rc;
  s->pos = (int64_t)pos;
  s->done = done != 0;
  if (held) {
    if (c->remainder != SHARD_DROP) /* only "drop" holds an element back */
      return sl__op_err(it->op, SL_ECORRUPT, "the saved state holds an element back, which only remainder \"drop\" does");
    if ((rc = shard_remade(it, r, &s->held))) return rc;
    s->has_held = true;
  }
  if ((rc = sl__sr_u64(r, &nfirst, "a shard's first elements"))) return rc;
  /* What shard_next keeps: with "pad", each of the epoch's first num_shards elements as it passes (so min(pos, num)
   * of them); else none. A state that says otherwise would have shard_next append past the array. */
  uint64_t want = c->remainder != SHARD_PAD ? 0 : pos < (uint64_t)c->num ? pos : (uint64_t)c->num;
  if (nfirst != want)
    return sl__op_err(it->op, SL_ECORRUPT,
                      "the saved state holds %llu of the epoch's first elements at position %llu (expected %llu)",
                      (unsigned long long)nfirst, (unsigned long long)pos, (unsigned long long)want);
  if (nfirst && !(s->first = sl__calloc((size_t)c->num, sizeof *s->first))) return sl__oom("a shard's elements");
  for (; s->nfirst < (int64_t)nfirst; s->nfirst++)
    if ((rc = shard_remade(it, r, &s->first[s->nfirst]))) return rc;
  return 0;
}
static const sl__op_state SHARD_STATE = {shard_save, shard_load, NULL, NULL, SL__STF_PASS};
static int shard_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  return sl__it_new(out, sizeof(shard_it), &SHARD_IT, op, run, seed);
}
static const sl__arg SHARD_KNOBS[] = {
    {"num_shards", SL__ARG_INT, NULL, SL__ARGF_REQUIRED | SL__ARGF_LO | SL__ARGF_AUTO_STR, 1, 0, NULL,
     "the number of shards (\"auto\": $WORLD_SIZE)"},
    {"index", SL__ARG_INT, "0", SL__ARGF_LO | SL__ARGF_AUTO_STR, 0, 0, NULL, "this shard, below num_shards (\"auto\": $RANK)"},
    {"remainder", SL__ARG_ENUM, NULL, 0, 0, 0, "keep|drop|pad",
     "the last incomplete round: kept (exactly once), dropped, or padded from the epoch's start (default: pad "
     "when num_shards is \"auto\", else keep)"},
    {"in_step", SL__ARG_BOOL, NULL, 0, 0, 0, NULL,
     "every rank the same count: a map or filter after it that drops an element hands out the rank's previous "
     "element again in its place, counted as filled (default: true when num_shards is \"auto\")"},
    {NULL}};
static const sl__op_schema SHARD_SCHEMA = {SL__MK_SEQ, 0, "every num_shards-th element, from the index-th",
                                           SHARD_KNOBS, NULL};
const sl__op_vt sl__op_shard = {"shard", shard_parse, shard_open, impl_free, SL__OPF_NEEDS_INPUT, &SHARD_SCHEMA,
                                &SHARD_STATE};

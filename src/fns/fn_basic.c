/* fns/fn_basic.c: functions with known costs for tests and planner demos (`identity`, `spin`, `sleep_io`), and
 * small generic ones (`select`, `length`). */
#include <string.h>
#include <time.h>

#include "fns/fns_int.h"

static int identity_call(void *st, sl_elem *e, sl_fn_call *call) { return 0; }

/* spin: burns `us` microseconds of CPU per element (thread CPU clock), e.g. {"us": 50}. */
typedef struct {
  int64_t us;
} spin_state;
static int spin_init(void **state, const sl_args *a, void *payload) {
  spin_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("spin");
  int rc = sl__get_int(&s->us, a, "us");
  if (rc) {
    sl__free(s);
    return rc;
  }
  *state = s;
  return 0;
}
static int spin_call(void *st, sl_elem *e, sl_fn_call *call) {
  const spin_state *s = st;
  uint64_t end = sl__cpu_ns() + (uint64_t)s->us * 1000u;
  volatile uint64_t x = call->seed;
  while (sl__cpu_ns() < end)
    for (int i = 0; i < 64; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return 0;
}

/* sleep_io: waits `us` microseconds per element without using CPU, like a slow disk or network read. */
static int sleep_call(void *st, sl_elem *e, sl_fn_call *call) {
  const spin_state *s = st;
  struct timespec ts = {(time_t)(s->us / 1000000), (long)(s->us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}

static void free_state(void *st) { sl__free(st); }

/* length: filter predicate on the length of a component (first dimension, or bytes of a string):
 * {"component": "tokens", "max": 256, "min": 1}. */
typedef struct {
  const char *comp;
  int64_t min, max;
} len_state;
static int len_init(void **state, const sl_args *a, void *payload) {
  len_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("length");
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) || (rc = sl__get_int(&s->min, a, "min")) ||
      (rc = sl__get_int(&s->max, a, "max"))) {
    sl__free(s);
    return rc;
  }
  if (!s->comp) {
    sl__free(s);
    return sl__err(SL_EINVAL, "%s.component: required", sl_args_path(a));
  }
  /* A negative or crossed bound would silently drop every element: refuse it, giving the valid range. */
  int64_t mn = s->min, mx = s->max;
  if (mn < 0 || mx < 0 || mn > mx) {
    sl__free(s);
    if (mn < 0 || mx < 0)
      return sl__err(SL_EINVAL, "%s.%s: %lld is out of range (valid: 0 or more)", sl_args_path(a), mn < 0 ? "min" : "max",
                     (long long)(mn < 0 ? mn : mx));
    return sl__err(SL_EINVAL, "%s.min: %lld is above max %lld (valid: 0 <= min <= max)", sl_args_path(a), (long long)mn,
                   (long long)mx);
  }
  *state = s;
  return 0;
}
static int len_call(void *st, sl_elem *e, sl_fn_call *call) {
  const len_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  int64_t n = c->rank == 0 ? (c->dtype == SL_BYTES ? (int64_t)c->size : 1) : c->shape[0];
  call->keep = n >= s->min && n <= s->max;
  return 0;
}

/* select: keeps only the listed components, in that order: {"keep": ["image", "label"]}. */
static int select_call(void *st, sl_elem *e, sl_fn_call *call) {
  const sl_args *a = st;
  json_t *keep = json_object_get(a->obj, "keep");
  sl_elem out;
  sl_elem_init(&out);
  for (size_t i = 0; i < json_array_size(keep); i++) {
    const char *n = json_string_value(json_array_get(keep, i));
    int k = sl_elem_find(e, n);
    if (k < 0) {
      sl_elem_clear(&out);
      return sl__err(SL_ENOTFOUND, "%s: element %llu has no component '%s' (a spec error: no earlier op makes it)",
                     call->op_path, (unsigned long long)call->index, n);
    }
    out.c[out.n++] = e->c[k];
    e->c[k].buf = e->c[k].offs = NULL;
  }
  sl_elem_clear(e);
  sl_elem_move(e, &out);
  return 0;
}
static int select_init(void **state, const sl_args *a, void *payload) {
  json_t *keep = a->obj ? json_object_get(a->obj, "keep") : NULL;
  if (!json_is_array(keep) || json_array_size(keep) == 0 || json_array_size(keep) > SL_MAX_COMPONENTS)
    return sl__err(SL_EINVAL, "%s.keep: expected a non-empty array of component names", sl_args_path(a));
  for (size_t i = 0; i < json_array_size(keep); i++)
    if (!json_is_string(json_array_get(keep, i)))
      return sl__err(SL_EINVAL, "%s.keep[%zu]: expected a string", sl_args_path(a), i);
  *state = (void *)a;
  return 0;
}

/* ---- schemas ---- */
static const sl__arg SPIN_ARGS[] = {
    {"us", SL__ARG_INT, "100", SL__LOHI, 0, 10000000, NULL,
     "microseconds of CPU (spin) or of sleep (sleep_io) per element, at most 10 s"},
    {NULL}};
static const sl__fn_schema SPIN_SCHEMA = {"burns `us` microseconds of CPU per element (a stand-in for work)",
                                          SPIN_ARGS, NULL, NULL, NULL};
static const sl__fn_schema SLEEP_SCHEMA = {"sleeps `us` microseconds per element (a stand-in for I/O)", SPIN_ARGS,
                                           NULL, NULL, NULL};
static const sl__arg NO_ARGS[] = {{NULL}};
static const sl__fn_schema IDENTITY_SCHEMA = {"passes the element through unchanged", NO_ARGS, NULL, NULL, NULL};

static const sl__arg LEN_ARGS[] = {
    {"component", SL__ARG_COMP, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "the component whose length is tested"},
    {"min", SL__ARG_INT, "0", 0, 0, 0, NULL, "the shortest length kept"},
    {"max", SL__ARG_INT, "9223372036854775807", 0, 0, 0, NULL, "the longest length kept"},
    {NULL}};
static const sl__fn_io LEN_READS[] = {{"component", NULL, NULL, SL__DT_ANY, -1, 0}, {NULL}};
static const sl__fn_schema LEN_SCHEMA = {"(filter) keeps elements whose component has min..max values", LEN_ARGS,
                                         LEN_READS, NULL, NULL};

static const sl__arg SELECT_ARGS[] = {
    {"keep", SL__ARG_STRS, NULL, SL__ARGF_REQUIRED | SL__LOHI, 1, SL_MAX_COMPONENTS, NULL,
     "the components kept, in this order"},
    {NULL}};
/* select: the element becomes the listed components, each of which must exist. */
static int select_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)origin;
  json_t *keep = json_object_get(args, "keep");
  sl__struct out = {0};
  out.open = false;
  for (size_t i = 0; i < json_array_size(keep); i++) {
    const char *n = json_string_value(json_array_get(keep, i));
    sl__comp_desc *c = n ? sl__struct_get(s, n) : NULL;
    if (!c && !s->open) {
      sl__str have = {0};
      if (sl__struct_names(&have, s)) return SL_ENOMEM;
      int rc = sl__err(SL_EINVAL, "%s.keep[%zu]: no component '%s' reaches this op (the element has: %s)", path, i, n,
                       have.s);
      sl__str_dispose(&have);
      return rc;
    }
    if (c) out.c[out.n++] = *c;
    else if (n && sl__struct_put(&out, n, SL__DT_ANY, -1, origin, NULL)) return SL_EINVAL;
  }
  *s = out;
  return 0;
}
static const sl__fn_schema SELECT_SCHEMA = {"keeps only the listed components, in that order", SELECT_ARGS, NULL,
                                            NULL, select_infer};

const sl__fn_entry sl__fns_basic[] = {
    {"identity", {SL_FN_DEF_VERSION, 0, NULL, identity_call, NULL}, &IDENTITY_SCHEMA},
    {"spin", {SL_FN_DEF_VERSION, 0, spin_init, spin_call, free_state}, &SPIN_SCHEMA},
    {"sleep_io", {SL_FN_DEF_VERSION, 0, spin_init, sleep_call, free_state}, &SLEEP_SCHEMA},
    {"length", {SL_FN_DEF_VERSION, SL_FN_FILTER, len_init, len_call, free_state}, &LEN_SCHEMA},
    {"select", {SL_FN_DEF_VERSION, 0, select_init, select_call, NULL}, &SELECT_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};

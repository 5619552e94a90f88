/* ops/op_offload.c: the `offload` op, the cut between the part of a pipeline that worker processes run and the
 * part the consuming (trainer) process runs. The transport is dist's (registered through ops/dist_hook_int.h);
 * without one, offload passes its input through, so one spec serves a single process and an MPI job. */
#include <string.h>

#include "ops/dist_hook_int.h"
#include "ops/op_int.h"

const char *const sl__launcher_env[SL__LAUNCHER_NENV][2] = {
    {"WORLD_SIZE", "RANK"}, {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}};

static sl__dist_hooks g_hooks;
static bool g_have_hooks;

void sl__dist_register(const sl__dist_hooks *h) {
  g_have_hooks = h != NULL;
  if (h) g_hooks = *h;
  else memset(&g_hooks, 0, sizeof g_hooks);
}
const sl__dist_hooks *sl__dist_hooks_get(void) { return g_have_hooks ? &g_hooks : NULL; }

typedef struct {
  sl__it it;
  void *stream; /* the transport's stream; NULL in pass-through */
} offload_it;

static int offload_parse(sl__op *op, json_t *o) {
  (void)o; /* no knobs: the schema rejects any */
  const sl__dist_hooks *h = sl__dist_hooks_get();
  /* received from workers: how many is up to them and to the other trainers' demand */
  op->cardinality = h && h->recv_open ? -1 : op->input ? op->input->cardinality : -1;
  return 0;
}
static int offload_next(sl__it *it, sl_elem *out) {
  offload_it *o = (offload_it *)it;
  if (!o->stream) return sl__it_pull(it, out);
  const sl__dist_hooks *h = sl__dist_hooks_get();
  int rc = h->recv_next(o->stream, out);
  return rc < 0 ? sl__op_wrap(it->op, rc) : rc;
}
static void offload_free(sl__it *it) {
  offload_it *o = (offload_it *)it;
  const sl__dist_hooks *h = sl__dist_hooks_get();
  if (o->stream && h && h->recv_close) h->recv_close(o->stream);
  sl__free(it);
}
static const sl__it_vt OFFLOAD_IT = {offload_next, offload_free};
static int offload_open(sl__op *op, sl__run *run, const sl_elem *seed, sl__it **out) {
  const sl__dist_hooks *h = sl__dist_hooks_get();
  bool remote = h && h->recv_open && !op->nested;
  /* remote: the part above the cut runs on the workers; this process never opens it */
  int rc = sl__it_new_ex(out, sizeof(offload_it), &OFFLOAD_IT, op, run, seed, !remote);
  if (rc || !remote) return rc;
  offload_it *o = (offload_it *)*out;
  if ((rc = h->recv_open(&o->stream, op, h->payload)) != 0) {
    rc = sl__op_wrap(op, rc);
    sl__it_free(*out);
    *out = NULL;
  }
  return rc;
}
static const sl__arg OFFLOAD_KNOBS[] = {{NULL}};
static const sl__op_schema OFFLOAD_SCHEMA = {
    SL__MK_CUT, 0, "the cut between worker ranks (above) and trainer ranks (below); a pass-through without MPI",
    OFFLOAD_KNOBS, NULL};
const sl__op_vt sl__op_offload = {"offload", offload_parse, offload_open, NULL, SL__OPF_NEEDS_INPUT, &OFFLOAD_SCHEMA};

static bool op_is(json_t *o, const char *kind) {
  json_t *k = json_object_get(o, "op");
  return k && json_is_string(k) && !strcmp(json_string_value(k), kind);
}

int sl__offload_worker_spec(json_t **out, json_t *spec, int64_t num, int64_t index) {
  *out = NULL;
  json_t *ops = json_object_get(spec, "ops");
  size_t cut = 0, n = json_is_array(ops) ? json_array_size(ops) : 0;
  while (cut < n && !op_is(json_array_get(ops, cut), "offload")) cut++;
  if (cut == n) return sl__err(SL_EINVAL, "--workers: the spec has no {\"op\": \"offload\"} in its top-level ops: "
                               "nothing marks what the workers run");
  if (cut == 0) return sl__err(SL_EINVAL, "ops[0] (offload): nothing above the cut for the workers to run");
  json_t *w = json_deep_copy(spec), *wops = json_array();
  if (!w || !wops) {
    json_decref(w);
    json_decref(wops);
    return sl__oom("the workers' spec");
  }
  bool sharded = false;
  for (size_t i = 0; i < cut; i++) {
    json_t *o = json_deep_copy(json_array_get(ops, i));
    if (o && op_is(o, "shard")) {
      /* the user's shard splits over the workers: "auto" means their group, and every element goes to one worker */
      sharded = true;
      json_t *v = json_object_get(o, "num_shards");
      if (v && json_is_string(v)) json_object_set_new(o, "num_shards", json_integer(num));
      v = json_object_get(o, "index");
      if (v && json_is_string(v)) json_object_set_new(o, "index", json_integer(index));
      if (!json_object_get(o, "remainder")) json_object_set_new(o, "remainder", json_string("keep"));
    }
    if (!o || json_array_append_new(wops, o)) {
      json_decref(w);
      json_decref(wops);
      return sl__oom("the workers' spec");
    }
  }
  if (!sharded && num > 1) {
    /* after the source (a file list, a range): each worker reads its own part, exactly once */
    json_t *sh = json_pack("{s:s, s:I, s:I, s:s}", "op", "shard", "num_shards", (json_int_t)num, "index",
                           (json_int_t)index, "remainder", "keep");
    if (!sh || json_array_insert_new(wops, 1, sh)) {
      json_decref(w);
      json_decref(wops);
      return sl__oom("the workers' spec");
    }
  }
  json_object_set_new(w, "ops", wops);
  *out = w;
  return 0;
}

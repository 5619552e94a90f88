/* plan/plan_dist.c: the planner's model of a distributed pipeline: remote worker cores and the link to the
 * trainer. It chooses where an `offload` cuts the spec (the cheapest bytes to ship where CPU allows) and how many
 * workers a trainer needs, from a trace's per-op CPU and bytes (sl_plan_offload, declared in sluice/dist.h). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "plan/plan_int.h"
#include "sluice/dist.h"

/* Top-level index of a trace op from its path ("ops[3]" -> 3; "ops[1].source[0]" -> 1: a nested op's cost is its
 * interleave's). */
static int top_index(const char *path) {
  if (!path || strncmp(path, "ops[", 4)) return -1;
  return atoi(path + 4);
}

/* The traced spec with one offload op at the plan's cut (any the spec had removed); out->cut is moved to the
 * op's index in the new spec. */
static int offload_spec(char **spec, sl_offload_plan *out, const sl_trace *t) {
  char *text = NULL;
  int rc = sl_trace_spec_json(&text, t);
  if (rc) return rc;
  json_t *js = json_loads(text, 0, NULL);
  sl_free(text);
  json_t *ops = js ? json_object_get(js, "ops") : NULL;
  if (!json_is_array(ops)) {
    json_decref(js);
    return sl__err(SL_ECORRUPT, "offload plan: the trace's spec has no ops");
  }
  int cut = out->cut;
  for (size_t i = json_array_size(ops); i-- > 0;) {
    json_t *k = json_object_get(json_array_get(ops, i), "op");
    if (k && json_is_string(k) && sl__op_model(json_string_value(k)) == SL__MK_CUT) {
      json_array_remove(ops, i);
      if ((int)i < cut) cut--;
    }
  }
  if (out->cut > 0 && json_array_insert_new(ops, (size_t)cut, json_pack("{s:s}", "op", "offload"))) {
    json_decref(js);
    return sl__oom("the planned spec");
  }
  out->cut = out->cut > 0 ? cut : 0;
  char *s = json_dumps(js, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(js);
  if (!s) return sl__oom("the planned spec");
  *spec = sl__strdup(s);
  sl__free(s); /* jansson allocates through our allocator */
  return *spec ? 0 : sl__oom("the planned spec");
}

int sl_plan_offload(char **spec, sl_offload_plan *out, const sl_trace *t, const sl_offload_opts *opts) {
  if (spec) *spec = NULL;
  memset(out, 0, sizeof *out);
  sl_offload_opts o = SL_OFFLOAD_OPTS_INIT;
  /* an older caller's struct is shorter: read only the fields its version has */
  if (opts && opts->version >= 3) o = *opts;
  else if (opts && opts->version == 2) memcpy(&o, opts, offsetof(sl_offload_opts, send_bandwidth));
  else if (opts) memcpy(&o, opts, offsetof(sl_offload_opts, recv_bandwidth));
  double send_bw = o.send_bandwidth > 0 ? o.send_bandwidth : o.recv_bandwidth;
  double gain = o.min_gain > 0 ? o.min_gain : o.min_gain < 0 ? 0 : 0.10;
  const sl_machine *m = sl_trace_machine(t);
  double mc = m && m->cores > 0 ? m->cores : 1;
  int kmax = o.workers > 0 ? o.workers : 1;
  double link = o.link_bandwidth > 0 ? o.link_bandwidth : 1.25e9;
  double wc = o.worker_cores > 0 ? o.worker_cores : mc, tc = o.trainer_cores > 0 ? o.trainer_cores : mc;
  int n = sl_trace_op_count(t), top = 0, root = -1;
  for (int i = 0; i < n; i++) {
    sl_op_stats s;
    if (sl_trace_op(&s, t, i)) return SL_ERROR;
    int k = top_index(s.path);
    if (k + 1 > top) top = k + 1;
    if (s.parent < 0) root = i;
  }
  sl_op_stats rs;
  if (root < 0 || top < 1 || sl_trace_op(&rs, t, root) || rs.elements_out == 0)
    return sl__err(SL_EINVAL, "offload plan: the trace has no output elements to plan from");
  /* cpu[k]: CPU per output element of top-level op k (its nested source included); bytes[k]: what it yields; an
   * offload op already in the spec is transparent (its bytes are its input's). n[k], in[k]: the top-level op's
   * elements out and in, for the visit ratios. */
  double *cpu = sl__calloc((size_t)top, sizeof *cpu), *bytes = sl__calloc((size_t)top, sizeof *bytes);
  double *n_out = sl__calloc((size_t)top, sizeof *n_out), *v = sl__calloc((size_t)top, sizeof *v);
  bool *is_off = sl__calloc((size_t)top, sizeof *is_off), *is_rep = sl__calloc((size_t)top, sizeof *is_rep);
  bool *is_pass = sl__calloc((size_t)top, sizeof *is_pass);
  if (!cpu || !bytes || !n_out || !v || !is_off || !is_rep || !is_pass) {
    sl__free(is_pass);
    sl__free(is_rep);
    sl__free(cpu);
    sl__free(bytes);
    sl__free(n_out);
    sl__free(v);
    sl__free(is_off);
    return sl__oom("the offload plan");
  }
  for (int i = 0; i < n; i++) {
    sl_op_stats s;
    sl_trace_op(&s, t, i);
    int k = top_index(s.path);
    if (k < 0) continue;
    cpu[k] += s.cpu_seconds;
    if (!s.nested) {
      sl__model_kind mk = sl__op_model(s.op);
      n_out[k] = (double)s.elements_out;
      bytes[k] = (double)s.bytes_out;
      is_off[k] = mk == SL__MK_CUT;
      is_rep[k] = mk == SL__MK_REPEAT;
      is_pass[k] = sl__plan_kind_buffers(mk) || mk == SL__MK_CUT;
    }
  }
  /* Visit ratios (elements op k yields per output element), from the last op up, as the one-machine model's: an
   * op's input yields as many per element of the op as the trace saw, except through a shuffle or prefetch, which
   * in steady state passes on one element per element it takes. Dividing the totals by the output's count instead
   * charged a short trace's output with the shuffle buffer's filling: on imagenet (1024 images) a 2 s trace on one
   * core priced the ops above the shuffle 3-10x, and the bytes shipped above it alike. */
  v[top - 1] = 1;
  for (int k = top - 1; k > 0; k--)
    v[k - 1] = is_pass[k] || n_out[k] <= 0 ? v[k] : v[k] * n_out[k - 1] / n_out[k];
  double total = 0;
  for (int k = 0; k < top; k++) {
    double per = n_out[k] > 0 ? v[k] / n_out[k] : 0;
    cpu[k] *= per;
    bytes[k] *= per;
    total += cpu[k];
  }
  out->predicted_local = total > 0 ? tc / total : INFINITY;
  out->cut = 0;
  out->trainer_cpu = total;
  out->predicted = out->predicted_local;
  out->limit = "trainer";
  /* cut c: ops [0, c) on the workers, [c, top) on the trainer (c = top: the trainer only consumes); shipped: the
   * output of the last op before c that is not an offload. No repeat below a cut: the workers' stream ends once. */
  int first_cut = 1;
  for (int k = 0; k < top; k++)
    if (is_rep[k]) first_cut = k + 1;
  double above = 0;
  for (int c = 1; c <= top; c++) {
    above += cpu[c - 1];
    int b = c - 1;
    while (b > 0 && is_off[b]) b--;
    double ship = bytes[b], below = total - above;
    /* the trainer's cores also receive and unpack what crosses the cut, and the workers' pack and send it (over
     * shared memory or TCP both ends copy every byte; a worker's send measured 2-3x its share on imagenet, as it
     * also packs into a message and Open MPI copies that into shared memory) */
    double recv = o.recv_bandwidth > 0 ? ship / o.recv_bandwidth : 0, send = send_bw > 0 ? ship / send_bw : 0;
    double r_t = below + recv > 0 ? tc / (below + recv) : INFINITY;
    double r_w = above + send > 0 ? kmax * wc / (above + send) : INFINITY;
    double r_l = ship > 0 ? link / ship : INFINITY;
    double r = fmin(r_t, fmin(r_w, r_l));
    /* against the trainer alone, the cut must win by the model's error; against another cut, by any margin */
    double bar = out->cut > 0 ? out->predicted * 1.000001 : out->predicted_local * (1 + gain) * 1.000001;
    bool better = r > bar || (out->cut > 0 && r >= out->predicted * 0.999999 && ship < out->bytes_per_element);
    if (!better || is_off[c - 1] || c < first_cut) continue;
    out->cut = c;
    out->predicted = r;
    out->bytes_per_element = ship;
    out->worker_cpu = above + send;
    out->trainer_cpu = below + recv;
    out->limit = r == r_l ? "link" : r == r_w ? "workers" : "trainer";
  }
  out->workers = 0;
  if (out->cut > 0) {
    /* the fewest workers whose cores keep up with what the trainer and the link take */
    double need = out->worker_cpu > 0 && isfinite(out->predicted) ? out->predicted * out->worker_cpu / wc : 1;
    int k = (int)ceil(need - 1e-9);
    out->workers = k < 1 ? 1 : k > kmax ? kmax : k;
  }
  sl__free(cpu);
  sl__free(bytes);
  sl__free(n_out);
  sl__free(v);
  sl__free(is_off);
  sl__free(is_rep);
  sl__free(is_pass);
  return spec ? offload_spec(spec, out, t) : 0;
}

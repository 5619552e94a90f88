/* plan/plan_net.c: the network in the plan. A reader of remote files keeps k ranged requests of B bytes in flight
 * per file (its readahead); each costs the time to first byte L, then B / b at one stream's bandwidth b; so a file
 * streams at min(k B / (L + B / b), link) and S files read at once (an interleave's cycle) at S times that (Little's
 * law: in flight = rate x latency). The trace gives L, b and B (tracer's network counters). The LP (plan_lp.c) holds
 * k as a variable per reader: its rate is linear in k, the readers share the link, and k's blocks share the memory
 * budget with buffers and cache; the plan then sets k to the least that carries the predicted rate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_int.h"

/* At most 64 requests in flight per file, and 256 MiB of read-ahead per reader: past the link more requests only
 * hold memory, and the link is often unknown (docs/remote.md, limits). */
enum { NET_MAX_INFLIGHT = 64 };
#define NET_MAX_BYTES (256.0 * 1024 * 1024)

double sl__plan_net_rate(const sl__pm_net *n, double k) {
  double per = n->stream_bw > 0 && isfinite(n->stream_bw) ? n->block / n->stream_bw : 0;
  double t = n->latency + per;
  double r = t > 0 ? k * n->block / t : INFINITY;
  return fmin(r, n->link);
}

/* Files the reader at i reads at once: the cycle (cyc[], planned) of the interleave whose source chain holds it. */
static int64_t streams_in(const sl_plan *P, int i, const int64_t *cyc) {
  for (int j = P->ops[i].parent; j >= 0; j = P->ops[j].parent)
    if (P->ops[j].kind == SL__MK_INTERLEAVE && P->ops[j].source >= 0 && sl__plan_upstream(P, i, P->ops[j].source))
      return cyc[j] > 0 ? cyc[j] : 1;
  return 1;
}

double sl__plan_net_per_request(const sl__pm_net *x) {
  double per = x->stream_bw > 0 && isfinite(x->stream_bw) ? x->block / x->stream_bw : 0;
  double t = x->latency + per;
  return t > 0 ? x->block / t : INFINITY;
}

bool sl__plan_net_active(const sl_plan *P, const sl__pm_net *x, int cache_at) {
  if (cache_at >= 0 && sl__plan_upstream(P, x->op, cache_at)) return false;
  if (x->keep > 0) return false; /* its epoch is in memory after the first */
  double g = sl__plan_net_per_request(x);
  return x->bytes_per_elem > 0 && g > 0 && isfinite(g) && x->block > 0;
}

double sl__plan_net_qmax(const sl__pm_net *x) {
  double per_q = x->block * (double)(x->streams > 0 ? x->streams : 1);
  return fmax(1, fmin(NET_MAX_INFLIGHT, floor(NET_MAX_BYTES / per_q)));
}

double sl__plan_net_room(const sl_plan *P, double cache_bytes) {
  if (P->M >= 1e17) return INFINITY;
  double least = 0;
  for (int k = 0; k < P->nnet; k++) least += P->net[k].block * (double)(P->net[k].streams > 0 ? P->net[k].streams : 1);
  return fmax(P->M - P->mem_floor - cache_bytes, least);
}

double sl__plan_net_memory(const sl_plan *P, const int64_t *cyc) {
  double m = 0;
  for (int k = 0; k < P->nnet; k++) {
    const sl__pm_net *x = &P->net[k];
    m += (double)(x->in_flight > 0 ? x->in_flight : 1) * x->block * (double)streams_in(P, x->op, cyc);
  }
  return m;
}

double sl__plan_net_kept(const sl_plan *P) {
  double m = 0;
  for (int k = 0; k < P->nnet; k++) m += P->net[k].keep;
  return m;
}

/* The `files` op that names reader i's objects, and whether a later epoch names them again: the chain into the
 * reader (or into the interleave whose source it starts) down to its source, and the ops downstream of it. */
static int files_of(const sl_plan *P, int i, bool *reread) {
  *reread = false;
  for (int j = P->ops[i].parent; j >= 0; j = P->ops[j].parent)
    if (P->ops[j].kind == SL__MK_REPEAT) *reread = true;
  int from = P->ops[i].input;
  if (from < 0)
    for (int j = P->ops[i].parent; j >= 0 && from < 0; j = P->ops[j].parent)
      if (P->ops[j].kind == SL__MK_INTERLEAVE && P->ops[j].source >= 0 && sl__plan_upstream(P, i, P->ops[j].source))
        from = P->ops[j].input;
  for (int j = from; j >= 0; j = P->ops[j].input) {
    if (P->ops[j].kind == SL__MK_REPEAT) *reread = true;
    if (P->ops[j].kind == SL__MK_SOURCE) return strcmp(P->ops[j].op, "files") ? -1 : j;
  }
  return -1;
}

double sl__plan_net_keep(sl_plan *P, double room) {
  double X0, X1, kept = 0;
  if (!P->nnet || sl__plan_lp(P, -1, 0, P->C, &X0, NULL)) {
    sl_error_clear();
    return 0;
  }
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    double need = ceil(x->epoch_bytes * 1.05);
    if (x->keep0 > 0) { /* the spec's own: in force when it holds the epoch, and never changed */
      x->keep = x->reread && x->epoch_bytes > 0 && x->keep0 >= x->epoch_bytes ? x->keep0 : 0;
      continue;
    }
    if (x->reread && x->epoch_bytes > 0 && kept + need <= room) {
      x->keep = need;
      kept += need;
    }
  }
  if (kept > 0 && (sl__plan_lp(P, -1, kept, P->C, &X1, NULL) || !(X1 > X0 * 1.02))) {
    sl_error_clear();
    for (int k = 0; k < P->nnet; k++)
      if (!(P->net[k].keep0 > 0)) P->net[k].keep = 0;
    kept = 0;
  }
  return kept;
}

void sl__plan_net_caps(sl_plan *P, double cache_bytes) {
  for (int k = 0; k < P->nnet; k++) P->net[k].streams = streams_in(P, P->net[k].op, P->cyc);
  double room = sl__plan_net_room(P, cache_bytes);
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    double q = fmin(sl__plan_net_qmax(x), floor(room / (x->block * (double)x->streams)));
    x->q_cap = (int64_t)fmax(1, q);
  }
}

void sl__plan_net_size(sl_plan *P) {
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    x->streams = streams_in(P, x->op, P->cyc);
    double g = sl__plan_net_per_request(x), need = 1.1 * P->predicted * x->bytes_per_elem;
    double q = isfinite(g) && g > 0 ? ceil(need / (g * (double)x->streams)) : 1;
    if (!(q >= 1)) q = 1;
    x->in_flight = (int64_t)fmin(q, (double)(x->q_cap > 0 ? x->q_cap : 1));
  }
}

double sl__plan_net_bound(const sl_plan *P, int cache_at) {
  double X = INFINITY, bpe = 0, link = INFINITY;
  for (int k = 0; k < P->nnet; k++) {
    const sl__pm_net *x = &P->net[k];
    if (!sl__plan_net_active(P, x, cache_at)) continue;
    double q = (double)(x->q_cap > 0 ? x->q_cap : 1), s = (double)(x->streams > 0 ? x->streams : 1);
    X = fmin(X, s * q * sl__plan_net_per_request(x) / x->bytes_per_elem);
    bpe += x->bytes_per_elem;
    link = x->link;
  }
  if (bpe > 0 && isfinite(link)) X = fmin(X, link / bpe);
  return X;
}

/* The link's bandwidth as the trace saw it, or 0 when it shows none: a reader whose requests each got clearly less
 * while two or more transferred at once (at least 1.5 of them on average) than one alone got was sharing a full
 * link, whose bandwidth is then at least what they got together (bytes over the union of their transfers). The
 * figures need 8 kB and 5 ms alone (a request is alone only as a file's last ones end, a stretch the size of the
 * server's last write or so) and two blocks together. It errs low: requests of different files at once are not
 * seen overlapping (each file counts its own), nor is other traffic: a lower bound. The rate each request got
 * together counts their first bytes, which have no time of their own: it errs high (by a first write over a block:
 * a third with 64 kB blocks and 16 kB writes, nothing much with 8 MiB blocks), so the test of a full link errs
 * towards "unknown". */
static double measured_link(const sl_op_stats *s) {
  double block = s->net_block_bytes ? (double)s->net_block_bytes : 1;
  double solo_s = s->net_solo_seconds, ovl_s = s->net_overlap_seconds, ovl_req_s = s->net_xfer_seconds - solo_s;
  if (!(s->net_solo_bytes >= 8192 && solo_s >= 0.005 && (double)s->net_overlap_bytes >= 2 * block && ovl_s > 0 &&
        ovl_req_s > 0))
    return 0;
  double solo_bw = (double)s->net_solo_bytes / solo_s, per_req = (double)s->net_overlap_bytes / ovl_req_s;
  double together = ovl_req_s / ovl_s; /* requests transferring at once, on average, when two or more did */
  if (together < 1.5 || per_req > 0.7 * solo_bw) return 0;
  return (double)s->net_overlap_bytes / ovl_s;
}

int sl__plan_net_model(sl_plan *P, const sl_trace *t) {
  int n = 0;
  for (int i = 0; i < P->nops; i++) n += t->ops[i].s.net_requests > 0;
  P->link_source = "unknown";
  if (!n) return 0;
  P->net = sl__calloc((size_t)n, sizeof *P->net);
  if (!P->net) return sl__oom("a plan's network model");
  const char *lk = getenv("SLUICE_LINK_BANDWIDTH"); /* bytes/s of the link, when the user knows it */
  double link = lk && atof(lk) > 0 ? atof(lk) : INFINITY;
  if (isfinite(link)) P->link_source = "user";
  else { /* the most any reader saw a saturated link carry (the link is shared) */
    double m = 0;
    double all = 0; /* every reader's bytes over the trace: what the link carried at least, all files together */
    for (int i = 0; i < P->nops; i++)
      if (t->ops[i].s.net_requests) {
        m = fmax(m, measured_link(&t->ops[i].s));
        all += (double)t->ops[i].s.net_bytes;
      }
    /* Each file counts its own overlap, so the files of an interleave read at once each saw a share: 8.0 MB/s on
     * a 25 MB/s link read by 4 files, where the trace's bytes over its seconds were 19 (bench/remote.py). */
    if (m > 0 && t->seconds > 0) m = fmax(m, all / t->seconds);
    if (m > 0) link = m, P->link_source = "measured";
  }
  for (int i = 0; i < P->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    if (!s->net_requests) continue;
    sl__pm_net *x = &P->net[P->nnet++];
    x->op = i;
    x->latency = s->net_ttfb_seconds / (double)s->net_requests;
    x->stream_bw = s->net_xfer_seconds > 0 ? (double)s->net_bytes / s->net_xfer_seconds : INFINITY;
    x->block = s->net_block_bytes ? (double)s->net_block_bytes : (double)s->net_bytes / (double)s->net_requests;
    x->link = link;
    /* Bytes per output element from the reader's own elements times its visits per output: over the root's count,
     * a shuffle buffer filled during the trace (113 MB of 250 in a 13 s trace of the imagenet tar spec) doubled it.
     * And no more than the bytes the reader made of them: the bytes received count the read-ahead still in flight
     * (287 MB received, 251 MB yielded in that trace); a compressed shard yields more than it received. */
    double got = (double)s->net_bytes;
    if (s->bytes_out > 0 && (double)s->bytes_out < got) got = (double)s->bytes_out;
    x->bytes_per_elem = s->elements_out > 0 && P->ops[i].V > 0 ? got / (double)s->elements_out * P->ops[i].V
                                                              : (P->N > 0 ? (double)s->net_bytes / P->N : 0);
    json_t *js = sl__spec_op_at(P->spec, P->ops[i].path), *kv = js ? json_object_get(js, "keep") : NULL;
    x->keep0 = json_is_integer(kv) && json_integer_value(kv) > 0 ? (double)json_integer_value(kv) : 0;
    int f = files_of(P, i, &x->reread);
    if (f >= 0 && P->ops[f].card > 0 && s->net_objects > 0) {
      x->epoch_objects = (double)P->ops[f].card;
      x->epoch_bytes = x->epoch_objects * (double)s->net_object_bytes / (double)s->net_objects;
    }
    /* Its I/O threads' CPU: not the consumer's (the process CPU beyond the ops' own, model_residual), but work the
     * cores do while it reads the network, per byte it carries; none once it reads a keep. 21 ms of 87 a batch in
     * the imagenet tar plan over the bench's link (bench/remote.py). */
    if (P->N > 0) P->resid = fmax(0, P->resid - s->net_cpu_seconds / P->N);
    x->cpu = s->net_bytes > 0 ? s->net_cpu_seconds / (double)s->net_bytes * x->bytes_per_elem : 0;
    x->in_flight0 = s->net_in_flight ? (int64_t)s->net_in_flight : 1;
    x->in_flight = 1; /* the floor the solver starts from (sl__plan_net_size plans it) */
    x->q_cap = NET_MAX_INFLIGHT;
    x->streams = 1;
    /* The reader's time blocked on the network is this model's to price: the read-ahead it plans removes it, so
     * the LP sees the reader's CPU alone (as a waiter it would cap the plan at the traced read-ahead's rate). */
    sl__pm_op *o = &P->ops[i];
    o->tt = o->c;
    if (o->blocked > 0) o->blocked = 0;
  }
  return 0;
}

int sl__plan_network(sl_plan *P) {
  int worst = -1;
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    x->streams = streams_in(P, x->op, P->cyc);
    double g = sl__plan_net_per_request(x), s = (double)x->streams; /* the files share the link */
    x->rate0 = fmin(s * (double)x->in_flight0 * g, x->link);
    x->rate = fmin(s * (double)x->in_flight * g, x->link);
    x->bound = x->bytes_per_elem > 0 ? x->rate / x->bytes_per_elem : INFINITY;
    if (sl__plan_net_active(P, x, P->cache_at) && (worst < 0 || x->bound < P->net[worst].bound)) worst = k;
  }
  /* the LP found the network the limit: the reader that carries the least names it */
  if (worst >= 0 && P->limit && !strcmp(P->limit, "network")) P->bottleneck = P->net[worst].op;
  return 0;
}

/* plan/plan_net.c: the network in the plan. A reader of remote files keeps k ranged requests of B bytes in flight
 * per file (its readahead); each costs the time to first byte L, then B / b at one stream's bandwidth b; so a file
 * streams at min(k B / (L + B / b), link) and S files read at once (an interleave's cycle) at S times that (Little's
 * law: in flight = rate x latency). The trace gives L, b and B (tracer's network counters); the plan sets k to the
 * least that carries the planned rate within the memory left, or caps the prediction at what the network carries. */
#include <math.h>
#include <stdlib.h>

#include "plan/plan_int.h"

/* At most 64 requests in flight per file, and 256 MiB of read-ahead per reader: the link's bandwidth is not
 * measured, so past it more requests only hold memory (docs/remote.md, limits). */
enum { NET_MAX_INFLIGHT = 64 };
#define NET_MAX_BYTES (256.0 * 1024 * 1024)

double sl__plan_net_rate(const sl__pm_net *n, double k) {
  double per = n->stream_bw > 0 && isfinite(n->stream_bw) ? n->block / n->stream_bw : 0;
  double t = n->latency + per;
  double r = t > 0 ? k * n->block / t : INFINITY;
  return fmin(r, n->link);
}

/* Files the reader at i reads at once: the cycle of the interleave whose source chain holds it (planned). */
static int64_t streams_of(const sl_plan *P, int i) {
  for (int j = P->ops[i].parent; j >= 0; j = P->ops[j].parent)
    if (P->ops[j].kind == SL__MK_INTERLEAVE && P->ops[j].source >= 0 && sl__plan_upstream(P, i, P->ops[j].source))
      return P->cyc[j] > 0 ? P->cyc[j] : 1;
  return 1;
}

int sl__plan_net_model(sl_plan *P, const sl_trace *t) {
  int n = 0;
  for (int i = 0; i < P->nops; i++) n += t->ops[i].s.net_requests > 0;
  if (!n) return 0;
  P->net = sl__calloc((size_t)n, sizeof *P->net);
  if (!P->net) return sl__oom("a plan's network model");
  const char *lk = getenv("SLUICE_LINK_BANDWIDTH"); /* bytes/s of the link, when the user knows it */
  double link = lk && atof(lk) > 0 ? atof(lk) : INFINITY;
  for (int i = 0; i < P->nops; i++) {
    const sl_op_stats *s = &t->ops[i].s;
    if (!s->net_requests) continue;
    sl__pm_net *x = &P->net[P->nnet++];
    x->op = i;
    x->latency = s->net_ttfb_seconds / (double)s->net_requests;
    x->stream_bw = s->net_xfer_seconds > 0 ? (double)s->net_bytes / s->net_xfer_seconds : INFINITY;
    x->block = s->net_block_bytes ? (double)s->net_block_bytes : (double)s->net_bytes / (double)s->net_requests;
    x->link = link;
    x->bytes_per_elem = P->N > 0 ? (double)s->net_bytes / P->N : 0;
    x->in_flight0 = s->net_in_flight ? (int64_t)s->net_in_flight : 1;
    /* The reader's time blocked on the network is this model's to price: the read-ahead it plans removes it, so
     * the LP sees the reader's CPU alone (as a waiter it would cap the plan at the traced read-ahead's rate). */
    sl__pm_op *o = &P->ops[i];
    o->tt = o->c;
    if (o->blocked > 0) o->blocked = 0;
  }
  return 0;
}

int sl__plan_network(sl_plan *P) {
  double mem_left = P->M - P->mem;
  for (int k = 0; k < P->nnet; k++) {
    sl__pm_net *x = &P->net[k];
    int i = x->op;
    x->streams = streams_of(P, i);
    x->rate0 = (double)x->streams * sl__plan_net_rate(x, (double)x->in_flight0);
    /* the least k whose rate carries the planned rate with a tenth to spare, its blocks within the memory left */
    double need = 1.1 * P->predicted * x->bytes_per_elem, room = fmax(mem_left, 0) + (double)x->in_flight0 * x->block;
    int64_t q = 1;
    while (q < NET_MAX_INFLIGHT && (double)x->streams * sl__plan_net_rate(x, (double)q) < need &&
           (double)(q + 1) * x->block * (double)x->streams <= fmin(room * (double)x->streams, NET_MAX_BYTES))
      q++;
    x->in_flight = q;
    x->rate = (double)x->streams * sl__plan_net_rate(x, (double)q);
    x->bound = x->bytes_per_elem > 0 ? x->rate / x->bytes_per_elem : INFINITY;
    mem_left -= (double)(q - x->in_flight0) * x->block * (double)x->streams;
    P->mem += (double)(q - x->in_flight0) * x->block * (double)x->streams;
    if (x->bound < P->predicted) { /* the network carries less than the CPU plan: it is the limit */
      P->predicted = x->bound;
      if (x->bound < P->bound) {
        P->bound = x->bound;
        P->limit = "network";
        P->bottleneck = i;
      }
    }
  }
  return 0;
}

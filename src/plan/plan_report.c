/* plan/plan_report.c: the analyzer's report: a compact table per op (fits a terminal for a 10-op pipeline), the
 * bottleneck in one sentence with its numbers, the LP bound and what binds it, the plan, and what-ifs; or the same
 * as JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_int.h"

static double total_c(const sl_plan *P) {
  double s = 0;
  for (int i = 0; i < P->nops; i++) s += P->ops[i].c;
  return s;
}

static double pct(double a, double b) { return b > 0 ? 100.0 * (a / b - 1.0) : 0; }

static void name_of(const sl__pm_op *o, char *b, size_t n) {
  if (strcmp(o->label, o->op)) snprintf(b, n, "%s %s", o->op, o->label);
  else snprintf(b, n, "%s", o->op);
}

static double util(const sl_plan *P, const sl__pm_op *o) {
  double p = o->has_par ? (double)o->par0 : 1;
  if (p > P->C) p = P->C;
  return P->T > 0 ? o->d * o->n / (P->T * p) : 0;
}

/* Re-flows the prose after the table to `width` columns (continuation lines indented), so the report fits a
 * terminal. */
static int wrap_prose(sl__str *out, const char *text, int width) {
  int rc = 0;
  const char *p = text;
  while (*p && !rc) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    int col = 0;
    bool first = true;
    size_t i = 0;
    while (i < len && !rc) {
      size_t j = i;
      while (j < len && p[j] != ' ') j++;
      int wl = (int)(j - i);
      if (!first && col + 1 + wl > width) {
        rc |= sl__str_append(out, "\n  ", 3);
        col = 2;
      } else if (!first) {
        rc |= sl__str_append(out, " ", 1);
        col++;
      }
      rc |= sl__str_append(out, p + i, (size_t)wl);
      col += wl;
      first = false;
      i = j;
      while (i < len && p[i] == ' ') i++;
    }
    rc |= sl__str_append(out, "\n", 1);
    p += len + (eol ? 1 : 0);
  }
  return rc;
}

static int prose_of(const sl_plan *P, sl__str *s);

/* A trace that counted too little names no bottleneck: its per-op figures come from too few elements (a finite input
 * that ended after 4). Counted by the ops that carry the CPU as well as by the output (sl__trace_counts): 25
 * batches of 64 are 1,600 decodes. How long to trace: the time 1.5x the minimum takes at the traced rate, at
 * least a second. */
static bool too_short(const sl_plan *P) { return P->counts == SL__COUNT_SHORT; }
static double seconds_needed(const sl_plan *P) {
  double r = P->traced_rate > 0 ? 1.5 * SL_PLAN_MIN_ELEMENTS / P->traced_rate : 0;
  return ceil(fmax(r, 1.0));
}
static int bottleneck_of(const sl_plan *P) { return too_short(P) ? -1 : P->bottleneck; }

/* The table's and the JSON's word for what an op's wall time beyond its CPU was. */
static const char *wait_word(int w) { return w == SL__WAIT_IO ? "I/O" : w == SL__WAIT_CORE ? "core" : ""; }
static const char *wait_json(int w) { return w == SL__WAIT_IO ? "io" : w == SL__WAIT_CORE ? "core" : "none"; }

/* One short sentence on the ops that waited for a core (wall time at least 1.5x their CPU while runnable: the cores
 * ran other threads, this process's or others'), which more threads cannot fix and which is not I/O. */
static int core_waits(const sl_plan *P, sl__str *s) {
  int rc = 0, n = 0;
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    if (o->waits != SL__WAIT_CORE || (o->runq >= 0 ? o->runq < 0.5 * o->c : o->busy_wall < 1.5 * o->c)) continue;
    if (n < 4) rc |= sl__str_printf(s, "%s%s", n ? ", " : "Waiting for a core, not I/O: ", o->path);
    n++;
  }
  if (n)
    rc |= sl__str_printf(s, "%s (%.1f of %.3g cores busy%s).\n", n > 4 ? ", ..." : "", P->busy_cores, P->machine.cores,
                         P->saturated ? ", CPU-saturated" : "");
  return rc;
}

static int text_report(const sl_plan *P, sl__str *s, sl__str *out_table) {
  char a[32], b[32], c[32], d[32], nm[64];
  double sc = total_c(P);
  int rc = 0;
  json_t *name = json_object_get(P->spec, "name");
  sl__str hdr = {0};
  rc |= sl__str_printf(&hdr, "%s: %s elements in %.2f s (%s elem/s traced%s); %.3g cores, memory budget %s",
                       json_is_string(name) ? json_string_value(name) : "pipeline", sl__fmt_si(a, sizeof a, P->N), P->T,
                       sl__fmt_si(b, sizeof b, P->traced_rate), P->seq_trace ? ", sequential variant" : "", P->C,
                       sl__fmt_bytes(c, sizeof c, P->M >= 1e17 ? 0 : P->M));
  if (P->B > 0) rc |= sl__str_printf(&hdr, ", disk %s/s", sl__fmt_bytes(d, sizeof d, P->B));
  if (P->dev_share >= 0 && P->read_bytes > 0) {
    char e[32];
    if (P->dev_share < SL__PLAN_CACHED_READS)
      rc |= sl__str_printf(&hdr, "; the %s read came from the page cache (the device delivered %s): CPU and "
                                 "memory, not disk", sl__fmt_bytes(d, sizeof d, P->read_bytes),
                           sl__fmt_bytes(e, sizeof e, P->dev_share * P->read_bytes));
    else
      rc |= sl__str_printf(&hdr, "; %.0f%% of the %s read came from the device", 100 * P->dev_share,
                           sl__fmt_bytes(d, sizeof d, P->read_bytes));
  }
  if (P->machine.other_load >= 0.25)
  {
    double left = fmax(P->machine.cores - P->machine.other_load, 0);
    bool planned = P->opts.cores > 0 && fabs(P->opts.cores - fmax(left, 0.05)) < 1e-9;
    rc |= sl__str_printf(&hdr, "\nwarning: other processes used %.2f cores in the trace, leaving %.2f of %.3g; %s",
                         P->machine.other_load, left, P->machine.cores,
                         planned ? "planned for those (--cores to plan for more)" : "expect less than predicted");
  }
  if (!rc) rc |= wrap_prose(s, hdr.s, 100);
  sl__str_dispose(&hdr);
  rc |= sl__str_printf(s, "\n%-17s %-18s %6s %8s %9s %4s %5s %5s %4s\n", "op", "what", "visits", "cpu/out", "rate/core",
                       "par", "cpu%", "util", "wait");
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    name_of(o, nm, sizeof nm);
    char path[24];
    snprintf(path, sizeof path, "%s%s", o->nested ? " " : "", o->path);
    rc |= sl__str_printf(s, "%-17.17s %-18.18s %6.3g %8s %9s %4lld %4.0f%% %4.0f%% %4s%s\n", path, nm, o->V,
                         sl__fmt_usec(a, sizeof a, o->c), o->c > 0 ? sl__fmt_si(b, sizeof b, 1.0 / o->c) : "-", (long long)o->par0,
                         sc > 0 ? 100.0 * o->c / sc : 0, 100.0 * util(P, o), wait_word(o->waits),
                         i == bottleneck_of(P)                      ? "  <- bottleneck"
                         : too_short(P) && i == P->dominant ? "  <- dominant"
                                                            : "");
  }
  rc |= sl__str_printf(s, "\n");
  sl__str table = *s; /* the prose goes to its own buffer, then is re-flowed onto the table */
  sl__str prose = {0};
  rc |= prose_of(P, &prose);
  if (!rc) rc |= wrap_prose(&table, prose.s, 100);
  sl__str_dispose(&prose);
  *out_table = table;
  return rc ? sl__oom("the report") : 0;
}

/* The sentences after the table, one line each: the bottleneck, the bound, the plan, the what-ifs. */
static const char *fmt_ms(char *b, size_t n, double s) {
  snprintf(b, n, "%.1f ms", s * 1e3);
  return b;
}

/* Each remote reader: what the network gave and what the plan's read-ahead makes it carry (plan_net.c). */
static int network_prose(const sl_plan *P, sl__str *s) {
  int rc = 0;
  for (int k = 0; k < P->nnet; k++) {
    const sl__pm_net *x = &P->net[k];
    const sl__pm_op *o = &P->ops[x->op];
    char l[32], bw[32], blk[32], r0[32], r1[32], e1[32], lk[32];
    bool limit = !strcmp(sl_plan_limit(P), "network") && P->bottleneck == x->op;
    rc |= sl__str_printf(s, "Network: %s (%s)%s: %s to first byte, %s requests at %s/s a stream, %lld in flight on "
                            "each of %lld file%s: the model gives %s/s",
                         o->path, o->label, limit ? " is the limit, waiting on the network" : "",
                         fmt_ms(l, sizeof l, x->latency), sl__fmt_bytes(blk, sizeof blk, x->block),
                         isfinite(x->stream_bw) ? sl__fmt_bytes(bw, sizeof bw, x->stream_bw) : "unmeasured",
                         (long long)x->in_flight0, (long long)x->streams, x->streams == 1 ? "" : "s",
                         sl__fmt_bytes(r0, sizeof r0, x->rate0));
    if (isfinite(x->link))
      rc |= sl__str_printf(s, " (link %s/s, %s)", sl__fmt_bytes(lk, sizeof lk, x->link),
                           !strcmp(P->link_source, "user") ? "SLUICE_LINK_BANDWIDTH"
                                                           : "measured: the requests shared a full link");
    else
      rc |= sl__str_printf(s, " (link unknown: not seen full; SLUICE_LINK_BANDWIDTH sets it)");
    rc |= sl__str_printf(s, "; %lld in flight would carry %s/s, %s elem/s%s.\n", (long long)x->in_flight,
                         sl__fmt_bytes(r1, sizeof r1, x->rate), sl__fmt_si(e1, sizeof e1, x->bound),
                         x->in_flight != x->in_flight0 ? " (the plan's readahead)" : "");
    char eb[32], kb[32];
    if (x->keep > 0)
      rc |= sl__str_printf(s, "Keep: %s keeps its objects in memory (%s for an epoch of %.0f, \"keep\": %s): the "
                              "first epoch reads them over the network at the rate above, the later ones from memory "
                              "(the plan's figures are theirs).\n",
                           o->path, sl__fmt_bytes(eb, sizeof eb, x->epoch_bytes), x->epoch_objects,
                           sl__fmt_bytes(kb, sizeof kb, x->keep));
    else if (x->reread && x->epoch_bytes > 0 && limit)
      rc |= sl__str_printf(s, "Keep: an epoch of %s's objects is %s, more than the memory budget leaves; with it, "
                              "later epochs would not read the network (sluice optimize --memory).\n",
                           o->path, sl__fmt_bytes(eb, sizeof eb, x->epoch_bytes));
  }
  return rc;
}

static int prose_of(const sl_plan *P, sl__str *s) {
  char a[32], b[32], c[32], nm[64];
  double sc = total_c(P);
  int rc = 0;
  if (P->counts == SL__COUNT_HEAVY)
    rc |= sl__str_printf(s, "Counted by the ops that carry the CPU: the trace saw %.0f output elements (fewer than "
                            "%d), but every op with %.0f%% or more of the CPU made at least %s elements, enough to "
                            "plan from; the figures of ops at the output's granularity rest on %.0f.\n",
                         P->N, SL_PLAN_MIN_ELEMENTS, 100 * SL__COUNT_HEAVY_SHARE,
                         sl__fmt_si(a, sizeof a, P->heavy_min), P->N);
  if (too_short(P)) {
    rc |= sl__str_printf(s, "Too short to name a bottleneck: the trace saw %.0f output elements in %.2f s%s; the "
                            "planner needs at least %d, or %d with every op that does %.0f%% or more of the CPU "
                            "making %d. Trace for %.0f s or more (sluice trace --seconds %.0f%s).\n",
                         P->N, P->T, P->ended ? " (the input ended)" : "", SL_PLAN_MIN_ELEMENTS, SL__COUNT_MIN_ROOT,
                         100 * SL__COUNT_HEAVY_SHARE, SL_PLAN_MIN_ELEMENTS, seconds_needed(P), seconds_needed(P),
                         P->ended ? " --repeat: the input is repeated" : "; add --repeat if the input ends sooner");
    if (P->dominant >= 0) {
      const sl__pm_op *o = &P->ops[P->dominant];
      name_of(o, nm, sizeof nm);
      rc |= sl__str_printf(s, "Dominant op, whatever the count: %s (%s), %.0f%% of the CPU over %.0f of its elements.\n",
                           o->path, nm, sc > 0 ? 100.0 * o->c / sc : 0, o->n);
    }
  } else if (P->bottleneck >= 0) {
    const sl__pm_op *o = &P->ops[P->bottleneck];
    name_of(o, nm, sizeof nm);
    double p = o->has_par ? (double)o->par0 : 1;
    char q[32];
    if (o->tt > 1.5 * o->c && o->blocked >= 0)
      rc |= sl__str_printf(s, "Bottleneck: %s (%s): blocked %s per output element (I/O, sleep or locks; %s of CPU "
                              "and %s waiting for a core besides) at parallelism %.0f, so at most %s elem/s as "
                              "traced; it needs threads, not cores.\n",
                           o->path, nm, sl__fmt_usec(a, sizeof a, o->blocked), sl__fmt_usec(c, sizeof c, o->c),
                           sl__fmt_usec(q, sizeof q, o->runq), p, sl__fmt_si(b, sizeof b, p / o->tt));
    else if (o->tt > 1.5 * o->c)
      rc |= sl__str_printf(s, "Bottleneck: %s (%s): waits %s per output element (I/O or sleep, %s of it CPU) at "
                              "parallelism %.0f, so at most %s elem/s as traced; it needs threads, not cores.\n",
                           o->path, nm, sl__fmt_usec(a, sizeof a, o->tt), sl__fmt_usec(c, sizeof c, o->c), p,
                           sl__fmt_si(b, sizeof b, p / o->tt));
    else
      rc |= sl__str_printf(s, "Bottleneck: %s (%s): %.0f%% of CPU, %s elem/s per core at parallelism %.0f, so at "
                              "most %s elem/s as traced; +1 core would give %+.0f%% to the bound.\n",
                           o->path, nm, sc > 0 ? 100.0 * o->c / sc : 0, sl__fmt_si(a, sizeof a, 1.0 / o->c), p,
                           sl__fmt_si(b, sizeof b, fmin(p, P->C) / o->c), pct(P->bound_plus_core, P->bound));
  }
  const char *lim = sl_plan_limit(P);
  double disk_b = 0;
  for (int i = 0; i < P->nops; i++) disk_b += P->ops[i].b_disk;
  if (!strcmp(lim, "disk"))
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by disk bandwidth: %s/s over %s read per element.\n",
                         sl__fmt_si(a, sizeof a, P->bound), sl__fmt_bytes(b, sizeof b, P->B), sl__fmt_bytes(c, sizeof c, disk_b));
  else if (!strcmp(lim, "cpu"))
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by CPU: %.3g cores / %s CPU per element%s.\n",
                         sl__fmt_si(a, sizeof a, P->bound), P->C, sl__fmt_usec(b, sizeof b, sc), P->cache_at >= 0 ? " (before the cache)" : "");
  else if (!strcmp(lim, "network"))
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by the network (below).\n", sl__fmt_si(a, sizeof a, P->bound));
  else if (!strcmp(lim, "wait"))
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by waiting (I/O) in ops whose parallelism is fixed.\n",
                         sl__fmt_si(a, sizeof a, P->bound));
  else if (!strcmp(lim, "serial")) {
    double sc_serial = 0;
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by functions that share one lock and so one core together "
                            "(Python functions share the GIL):", sl__fmt_si(a, sizeof a, P->bound));
    for (int i = 0; i < P->nops; i++)
      if (P->ops[i].serial) {
        sc_serial += P->ops[i].c;
        rc |= sl__str_printf(s, " %s %s", P->ops[i].path, P->ops[i].label);
      }
    rc |= sl__str_printf(s, ", %s CPU per element in all; more parallelism does not help them, cheaper or native "
                            "functions do.\n", sl__fmt_usec(b, sizeof b, sc_serial));
  } else if (!strcmp(lim, "sequential"))
    rc |= sl__str_printf(s, "Bound: %s elem/s, limited by sequential work on one thread (ops that cannot run in "
                            "parallel).\n", sl__fmt_si(a, sizeof a, P->bound));
  else
    rc |= sl__str_printf(s, "Bound: none measurable (the traced ops cost no measurable CPU).\n");
  /* The plan. */
  rc |= sl__str_printf(s, "Plan: %s elem/s predicted (%.2fx the traced rate):", sl__fmt_si(a, sizeof a, P->predicted),
                       P->traced_rate > 0 ? P->predicted / P->traced_rate : 0);
  int shown = 0;
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    /* The knobs the plan sets: workers (with the buffer they hand off through), or a buffer alone. */
    if (o->has_par && (o->par_tunable || o->buf_tunable) && (P->par[i] != o->par0 || P->par[i] > 1)) {
      rc |= sl__str_printf(s, "%s %s par %lld", shown++ ? "," : "", o->path, (long long)P->par[i]);
      if (o->buf_tunable && P->par[i] > 1) rc |= sl__str_printf(s, " buf %lld", (long long)P->buf[i]);
    } else if (!o->has_par && o->buf_tunable) {
      rc |= sl__str_printf(s, "%s %s buf %lld", shown++ ? "," : "", o->path, (long long)P->buf[i]);
    }
  }
  if (P->cache_at >= 0) {
    bool est = false;
    for (int k = 0; k < P->ncands; k++)
      if (P->cands[k].at == P->cache_at) est = P->cands[k].estimated;
    rc |= sl__str_printf(s, "%s cache after %s (%s%s)", shown++ ? "," : "", P->ops[P->cache_at].path,
                         est ? "about " : "", sl__fmt_bytes(a, sizeof a, P->cache_bytes));
  }
  if (P->add_prefetch) rc |= sl__str_printf(s, "%s prefetch %lld at the root", shown++ ? "," : "", (long long)P->prefetch_buf);
  if (!shown) rc |= sl__str_printf(s, " no change");
  char ch[32];
  rc |= sl__str_printf(s, "; holds at most %s; hand-off per element and new thread boundary %s (%s for cheap "
                          "elements, in chunks).\n", sl__fmt_bytes(a, sizeof a, P->mem),
                       sl__fmt_usec(b, sizeof b, P->hscale * P->handoff),
                       sl__fmt_usec(ch, sizeof ch, P->hscale * P->handoff_cheap));
  /* What-ifs. */
  rc |= sl__str_printf(s, "What if: +1 core: %s elem/s (%+.0f%%).", sl__fmt_si(a, sizeof a, P->bound_plus_core),
                       pct(P->bound_plus_core, P->bound));
  int best = -1;
  for (int k = 0; k < P->ncands; k++)
    if (P->cands[k].legal && (best < 0 || P->cands[k].bound > P->cands[best].bound)) best = k;
  if (P->cache_at >= 0) {
    rc |= sl__str_printf(s, " Cache after %s: %+.0f%% (chosen).", P->ops[P->cache_at].path,
                         pct(P->bound, P->bound_nocache));
  } else if (best >= 0) {
    rc |= sl__str_printf(s, " Best cache (after %s): %+.0f%%, not worth it.", P->ops[P->cands[best].at].path,
                         pct(P->cands[best].bound, P->bound_nocache));
  } else if (P->ncands > 0) {
    /* The refusal that matters most: where a cache would have saved the most CPU. */
    const sl__pm_cache *k = &P->cands[0];
    double most = -1;
    for (int q = 0; q < P->ncands; q++) {
      double saved = 0;
      for (int j = 0; j < P->nops; j++)
        if (sl__plan_upstream(P, j, P->cands[q].at)) saved += P->ops[j].c;
      if (saved > most) most = saved, k = &P->cands[q];
    }
    rc |= sl__str_printf(s, " No cache: after %s, %s.", P->ops[k->at].path, k->why);
  }
  if (P->more_mem_cache_at >= 0 && P->more_mem_cache_at != P->cache_at)
    rc |= sl__str_printf(s, " More memory: a cache after %s would give %+.0f%%.", P->ops[P->more_mem_cache_at].path,
                         pct(P->bound_more_mem, P->bound_nocache));
  else
    rc |= sl__str_printf(s, " More memory: no gain.");
  rc |= sl__str_printf(s, "\n");
  rc |= core_waits(P, s);
  rc |= network_prose(P, s);
  return rc;
}

/* The prose as a JSON array of lines. */
static json_t *prose_lines(const sl_plan *P) {
  sl__str s = {0};
  json_t *a = json_array();
  int rc = a ? prose_of(P, &s) : SL_ENOMEM;
  for (const char *p = s.s; !rc && p && *p;) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    rc = json_array_append_new(a, json_stringn(p, n));
    p += n + (eol ? 1 : 0);
  }
  sl__str_dispose(&s);
  if (rc) json_decref(a);
  return rc ? NULL : a;
}

static json_t *json_report(const sl_plan *P) {
  json_t *ops = json_array(), *cands = json_array(), *r = json_object();
  if (!ops || !cands || !r) {
    json_decref(ops), json_decref(cands), json_decref(r);
    return NULL;
  }
  double sc = total_c(P);
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    json_array_append_new(ops, json_pack("{s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:I, s:I}", "path",
                                         o->path, "op", o->op, "label", o->label, "visit_ratio", o->V,
                                         "cpu_seconds_per_element", o->d, "cpu_seconds_per_output", o->c,
                                         "rate_per_core", o->c > 0 ? 1.0 / o->c : 0.0, "parallelism", (json_int_t)o->par0,
                                         "cpu_share", sc > 0 ? o->c / sc : 0.0, "utilisation", util(P, o),
                                         "bytes_per_element", o->bytes, "planned_parallelism",
                                         (json_int_t)sl_plan_parallelism(P, i), "planned_buffer",
                                         (json_int_t)sl_plan_buffer(P, i)));
    double rate = sl_plan_op_rate(P, i);
    json_object_set_new(json_array_get(ops, (size_t)i), "rate", isfinite(rate) ? json_real(rate) : json_null());
    json_object_set_new(json_array_get(ops, (size_t)i), "waits", json_string(wait_json(o->waits)));
    json_object_set_new(json_array_get(ops, (size_t)i), "wall_seconds_per_output", json_real(o->busy_wall));
    /* The split of that wall time, when the trace measured the run-queue delay (null: an older trace). */
    json_object_set_new(json_array_get(ops, (size_t)i), "runq_seconds_per_output",
                        o->runq >= 0 ? json_real(o->runq) : json_null());
    json_object_set_new(json_array_get(ops, (size_t)i), "blocked_seconds_per_output",
                        o->blocked >= 0 ? json_real(o->blocked) : json_null());
  }
  for (int k = 0; k < P->ncands; k++) {
    const sl__pm_cache *c = &P->cands[k];
    json_t *j = json_pack("{s:s, s:b, s:f, s:b}", "after", P->ops[c->at].path, "legal", c->legal, "bytes", c->bytes,
                          "bytes_estimated", c->estimated);
    if (c->legal) json_object_set_new(j, "bound", json_real(c->bound));
    else json_object_set_new(j, "refused", json_string(c->why));
    json_array_append_new(cands, j);
  }
  if (P->nnet) { /* the remote readers' network model (plan_net.c); null: unmeasured or unknown */
    json_t *net = json_array();
    for (int k = 0; net && k < P->nnet; k++) {
      const sl__pm_net *x = &P->net[k];
      json_t *j = json_pack("{s:s, s:f, s:f, s:I, s:I, s:I, s:f, s:f, s:f}", "path", P->ops[x->op].path,
                            "latency_seconds", x->latency, "block_bytes", x->block, "in_flight", (json_int_t)x->in_flight0,
                            "planned_in_flight", (json_int_t)x->in_flight, "files_at_once", (json_int_t)x->streams,
                            "bytes_per_output", x->bytes_per_elem, "rate_bytes", x->rate0, "planned_rate_bytes", x->rate);
      if (j) {
        json_object_set_new(j, "stream_bandwidth", isfinite(x->stream_bw) ? json_real(x->stream_bw) : json_null());
        json_object_set_new(j, "link_bandwidth", isfinite(x->link) ? json_real(x->link) : json_null());
        json_object_set_new(j, "link_source", json_string(P->link_source)); /* "user", "measured" or "unknown" */
        json_object_set_new(j, "max_in_flight", json_integer((json_int_t)x->q_cap));
        json_object_set_new(j, "bound", isfinite(x->bound) ? json_real(x->bound) : json_null());
        /* one epoch's objects (null: unknown), whether later epochs read them again, the bytes the plan keeps */
        json_object_set_new(j, "epoch_bytes", x->epoch_bytes > 0 ? json_real(x->epoch_bytes) : json_null());
        json_object_set_new(j, "read_again", json_boolean(x->reread));
        json_object_set_new(j, "keep_bytes", json_real(x->keep));
      }
      json_array_append_new(net, j);
    }
    json_object_set_new(r, "network", net);
  }
  json_t *name = json_object_get(P->spec, "name");
  json_object_set_new(r, "pipeline", json_string(json_is_string(name) ? json_string_value(name) : "pipeline"));
  json_object_set_new(r, "traced", json_pack("{s:f, s:f, s:f}", "elements", P->N, "seconds", P->T, "throughput",
                                             P->traced_rate));
  json_object_set_new(r, "busy_cores", json_real(P->busy_cores));
  json_object_set_new(r, "reads", json_pack("{s:f, s:o}", "bytes", P->read_bytes, "device_share",
                                            P->dev_share >= 0 ? json_real(P->dev_share) : json_null()));
  json_object_set_new(r, "cpu_saturated", json_boolean(P->saturated));
  json_object_set_new(r, "budget", json_pack("{s:f, s:f, s:f, s:f}", "cores", P->C, "memory", P->M, "disk_bandwidth",
                                             P->B, "other_load", P->machine.other_load));
  json_object_set_new(r, "ops", ops);
  json_object_set_new(r, "bottleneck", bottleneck_of(P) >= 0 ? json_string(P->ops[P->bottleneck].path) : json_null());
  if (too_short(P))
    json_object_set_new(r, "too_short", json_pack("{s:f, s:i, s:f, s:b, s:o}", "elements", P->N, "needed",
                                                   SL_PLAN_MIN_ELEMENTS, "trace_seconds", seconds_needed(P),
                                                   "repeat", P->ended, "dominant",
                                                   P->dominant >= 0 ? json_string(P->ops[P->dominant].path)
                                                                    : json_null()));
  json_object_set_new(r, "counted_by", json_string(P->counts == SL__COUNT_OUTPUT  ? "output"
                                                   : P->counts == SL__COUNT_HEAVY ? "heavy_ops"
                                                                                  : "too_short"));
  json_object_set_new(r, "bound", json_real(P->bound));
  json_object_set_new(r, "limit", json_string(sl_plan_limit(P)));
  json_object_set_new(r, "predicted", json_real(P->predicted));
  json_object_set_new(r, "memory", json_real(P->mem));
  json_object_set_new(r, "handoff_seconds", json_real(P->hscale * P->handoff));
  json_object_set_new(r, "handoff_cheap_seconds", json_real(P->hscale * P->handoff_cheap));
  json_object_set_new(r, "cache_after", P->cache_at >= 0 ? json_string(P->ops[P->cache_at].path) : json_null());
  json_object_set_new(r, "cache_bytes", json_real(P->cache_bytes));
  json_object_set_new(r, "root_prefetch", json_integer(P->add_prefetch ? P->prefetch_buf : 0));
  json_object_set_new(r, "cache_candidates", cands);
  json_object_set_new(r, "text", prose_lines(P));
  json_object_set_new(r, "whatif", json_pack("{s:f, s:f, s:f, s:o}", "plus_one_core", P->bound_plus_core,
                                             "no_cache", P->bound_nocache, "more_memory", P->bound_more_mem,
                                             "more_memory_cache_after",
                                             P->more_mem_cache_at >= 0 ? json_string(P->ops[P->more_mem_cache_at].path)
                                                                       : json_null()));
  return r;
}

json_t *sl__plan_report_json(const sl_plan *P) {
  sl__json_oom_take(); /* a failed allocation inside json_report would drop a member silently: check for one */
  json_t *r = json_report(P);
  if (r && sl__json_oom_take()) {
    json_decref(r);
    r = NULL;
  }
  if (!r) sl__oom("the report");
  return r;
}

int sl_plan_report(char **out, const sl_plan *P, bool json) {
  *out = NULL;
  if (json) {
    json_t *r = sl__plan_report_json(P);
    char *s = r ? json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(r);
    if (!s) return sl__oom("the report");
    *out = sl__strdup(s);
    sl__free(s);
    return *out ? 0 : sl__oom("the report");
  }
  sl__str s = {0};
  int rc = text_report(P, &s, &s);
  if (rc) {
    sl__str_dispose(&s);
    return rc;
  }
  *out = s.s;
  return 0;
}

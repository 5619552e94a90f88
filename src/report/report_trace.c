/* report/report_trace.c: `sluice report`: a trace as one HTML page. The figures are the analyzer's: the page reads
 * the planner's JSON report (sl_plan_report) and formats its numbers as the terminal report does, so the two
 * never disagree. It adds the drawing (the op graph coloured by CPU share, rates against the traced throughput)
 * and the spec's changes, knob by knob, from the traced spec to a tuned one (or to the plan's). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_fuse_int.h"
#include "plan/plan_int.h"
#include "report/html_int.h"
#include "sluice/report.h"

/* One op: the analyzer's figures (strings borrowed from the JSON report) and its place in the graph. */
typedef struct rop {
  const char *path, *op, *label;
  int parent, depth;
  double visits, cpu_out, rate_core, share, util, rate;
  double runq, blocked; /* seconds per output element waiting for a core / blocked; -1: not in the trace */
  int64_t par, planned_par, planned_buf;
} rop;

typedef struct tctx {
  sl__html h;
  json_t *rep;          /* the planner's JSON report */
  rop *ops;
  int n, bottleneck;
  double traced, bound, predicted, measured; /* measured: the tuned trace's throughput, 0 without one */
  double measured_other;                     /* cores other processes kept busy during the tuned trace */
  const char *limit;
} tctx;

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }
static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* ---- colours by share of CPU ---- */
static const char *const HEAT[5] = {"#ffffb2", "#fecc5c", "#fd8d3c", "#f03b20", "#bd0026"};
static const char *const HEAT_LABEL[5] = {"< 5%", "5-15%", "15-30%", "30-50%", ">= 50%"};
static int heat_of(double share) {
  return share >= 0.5 ? 4 : share >= 0.3 ? 3 : share >= 0.15 ? 2 : share >= 0.05 ? 1 : 0;
}

static void what_of(const rop *o, char *b, size_t n) {
  if (strcmp(o->label, o->op)) snprintf(b, n, "%s %s", o->op, o->label);
  else snprintf(b, n, "%s", o->op);
}

static const char *rate_s(char *b, size_t n, double v) {
  char x[32];
  snprintf(b, n, "%s elem/s", sl__fmt_si(x, sizeof x, v));
  return b;
}

/* ---- the spec's changes ---- */
static bool is_gap(json_t *o) {
  const char *k = json_string_value(json_object_get(o, "op"));
  return k && sl__op_outside_identity(k);
}

static void compact(json_t *v, char *b, size_t n) {
  if (!v) {
    snprintf(b, n, "-");
    return;
  }
  size_t len = json_dumpb(v, b, n - 1, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
  if (len >= n - 1) snprintf(b + n - 5, 5, "...");
  else b[len] = 0;
}

static int add_row(json_t *rows, const char *pa, const char *pb, json_t *op, const char *knob, json_t *va,
                   json_t *vb) {
  char a[256], b[256], what[96];
  compact(va, a, sizeof a);
  compact(vb, b, sizeof b);
  const char *k = str(op, "op"), *fn = json_string_value(json_object_get(op, "fn"));
  if (fn) snprintf(what, sizeof what, "%s %s", k, fn);
  else snprintf(what, sizeof what, "%s", k);
  json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "before_path", pa, "after_path", pb, "what", what, "knob",
                        knob, "before", a, "after", b);
  return r && !json_array_append_new(rows, r) ? 0 : sl__oom("the spec's changes");
}

/* A row for an op the tuned spec inserted or removed, with its knobs. */
static int add_op_row(json_t *rows, const char *pa, const char *pb, json_t *op, bool inserted) {
  json_t *knobs = json_deep_copy(op);
  if (!knobs) return sl__oom("the spec's changes");
  json_object_del(knobs, "op");
  int rc = add_row(rows, pa, pb, op, inserted ? "(inserted)" : "(removed)", inserted ? NULL : knobs,
                   inserted ? knobs : NULL);
  json_decref(knobs);
  return rc;
}

/* Rows for the keys of two ops that differ. For ops of the pipeline's identity (not prefetch or cache) only knobs
 * may differ: anything else means the specs are of different pipelines. */
static int diff_op(json_t *rows, const char *pa, json_t *a, const char *pb, json_t *b, bool identity) {
  const char *kind = str(a, "op"), *k;
  json_t *v;
  for (int side = 0; side < 2; side++) {
    json_object_foreach(side ? b : a, k, v) {
      if (!strcmp(k, "source") || !strcmp(k, "op")) continue;
      if (side && json_object_get(a, k)) continue; /* seen from a */
      json_t *va = json_object_get(a, k), *vb = json_object_get(b, k);
      if (va && vb && json_equal(va, vb)) continue;
      if (identity && !sl__is_knob(kind, k)) {
        char x[128], y[128];
        compact(va, x, sizeof x);
        compact(vb, y, sizeof y);
        return sl__err(SL_EINVAL, "the tuned spec is of a different pipeline: %s.%s is %s in the trace but %s.%s is "
                                  "%s in the tuned spec", pa, k, x, pb, k, y);
      }
      int rc = add_row(rows, pa, pb, a, k, va, vb);
      if (rc) return rc;
    }
  }
  return 0;
}

/* The planner-inserted ops (prefetch, cache) between two identity ops: paired by kind in order; the rest were
 * inserted or removed. */
static int diff_gap(json_t *rows, json_t *a, size_t a0, size_t a1, const char *pre_a, json_t *b, size_t b0,
                    size_t b1, const char *pre_b) {
  bool used[64] = {0};
  char pa[160], pb[160];
  for (size_t i = a0; i < a1; i++) {
    json_t *x = json_array_get(a, i);
    snprintf(pa, sizeof pa, "%s[%zu]", pre_a, i);
    size_t j = b0;
    while (j < b1 && (j - b0 >= 64 || used[j - b0] || strcmp(str(x, "op"), str(json_array_get(b, j), "op")))) j++;
    int rc;
    if (j < b1) {
      used[j - b0] = true;
      snprintf(pb, sizeof pb, "%s[%zu]", pre_b, j);
      rc = diff_op(rows, pa, x, pb, json_array_get(b, j), false);
    } else {
      rc = add_op_row(rows, pa, "-", x, false);
    }
    if (rc) return rc;
  }
  for (size_t j = b0; j < b1; j++) {
    if (j - b0 < 64 && used[j - b0]) continue;
    json_t *y = json_array_get(b, j);
    snprintf(pb, sizeof pb, "%s[%zu]", pre_b, j);
    int rc = add_op_row(rows, "-", pb, y, true);
    if (rc) return rc;
  }
  return 0;
}

static int diff_chain(json_t *rows, json_t *a, const char *pre_a, json_t *b, const char *pre_b) {
  size_t na = json_array_size(a), nb = json_array_size(b), i = 0, j = 0;
  for (;;) {
    size_t ia = i, jb = j;
    while (ia < na && is_gap(json_array_get(a, ia))) ia++;
    while (jb < nb && is_gap(json_array_get(b, jb))) jb++;
    int rc = diff_gap(rows, a, i, ia, pre_a, b, j, jb, pre_b);
    if (rc) return rc;
    i = ia, j = jb;
    if (i == na && j == nb) return 0;
    if (i == na || j == nb)
      return sl__err(SL_EINVAL, "the tuned spec is of a different pipeline: its chain %s has %s ops than the trace's", pre_b,
                     j == nb ? "fewer" : "more");
    json_t *x = json_array_get(a, i), *y = json_array_get(b, j);
    char pa[160], pb[160];
    snprintf(pa, sizeof pa, "%s[%zu]", pre_a, i);
    snprintf(pb, sizeof pb, "%s[%zu]", pre_b, j);
    if (strcmp(str(x, "op"), str(y, "op")))
      return sl__err(SL_EINVAL, "the tuned spec is of a different pipeline: %s is %s in the trace but %s is %s in the "
                                "tuned spec", pa, str(x, "op"), pb, str(y, "op"));
    if ((rc = diff_op(rows, pa, x, pb, y, true))) return rc;
    json_t *sa = json_object_get(x, "source"), *sb = json_object_get(y, "source");
    if (sa || sb) {
      char qa[170], qb[170];
      snprintf(qa, sizeof qa, "%s.source", pa);
      snprintf(qb, sizeof qb, "%s.source", pb);
      if ((rc = diff_chain(rows, sa, qa, sb, qb))) return rc;
    }
    i++, j++;
  }
}

/* ---- the page ---- */
static void cards(tctx *c) {
  sl__html *h = &c->h;
  char a[160], b[128];
  sl__h_raw(h, "<div class=\"cards\">\n");
  sl__h_card(h, "traced throughput", "traced-rate", rate_s(a, sizeof a, c->traced), "the spec as traced");
  if (c->bottleneck >= 0) {
    const rop *o = &c->ops[c->bottleneck];
    char what[96], r[32];
    what_of(o, what, sizeof what);
    snprintf(a, sizeof a, "%s %s", o->path, what);
    snprintf(b, sizeof b, "%.0f%% of CPU; at most %s elem/s at parallelism %lld", 100 * o->share,
             sl__fmt_si(r, sizeof r, o->rate), (long long)o->par);
    sl__h_card(h, "bottleneck", "bottleneck", a, b);
  }
  snprintf(b, sizeof b, "limited by %s", c->limit);
  sl__h_card(h, "LP bound", "bound", rate_s(a, sizeof a, c->bound), b);
  snprintf(b, sizeof b, "%.2fx the traced rate", c->traced > 0 ? c->predicted / c->traced : 0);
  sl__h_card(h, "predicted (plan)", "predicted", rate_s(a, sizeof a, c->predicted), b);
  if (c->measured > 0) {
    int k = snprintf(b, sizeof b, "%+.1f%% vs predicted", c->predicted > 0 ? 100 * (c->measured / c->predicted - 1) : 0);
    if (c->measured_other >= 0.25)
      snprintf(b + k, sizeof b - (size_t)k, "; %.2f cores busy elsewhere", c->measured_other);
    sl__h_card(h, "measured (tuned spec)", "measured", rate_s(a, sizeof a, c->measured), b);
  }
  sl__h_raw(h, "</div>\n");
}

/* The graph (left) and each op's rate at its parallelism on a log axis (right), one row per op in trace order. */
static void graph(tctx *c) {
  sl__html *h = &c->h;
  const double W = 1140, top = 64, rowh = 46, boxh = 34, gx = 10, indent = 30, boxw = 270;
  const double bx0 = 420, bx1 = 940; /* the rate axis */
  double height = top + rowh * c->n + 58;
  /* The axis spans whole decades around every finite rate, the traced throughput and the bound. */
  double lo = c->traced > 0 ? c->traced : 1, hi = lo;
  for (int i = 0; i < c->n; i++)
    if (isfinite(c->ops[i].rate) && c->ops[i].rate > 0) lo = fmin(lo, c->ops[i].rate), hi = fmax(hi, c->ops[i].rate);
  if (c->bound > 0 && isfinite(c->bound)) lo = fmin(lo, c->bound), hi = fmax(hi, c->bound);
  if (c->measured > 0) lo = fmin(lo, c->measured), hi = fmax(hi, c->measured);
  double d0 = floor(log10(lo)), d1 = ceil(log10(hi) + 1e-9);
  if (d1 <= d0) d1 = d0 + 1;
#define XR(v) (bx0 + (bx1 - bx0) * (log10(v) - d0) / (d1 - d0))
  sl__svg_begin(h, W, height, "chart pipeline", "The pipeline's ops, coloured by share of CPU, with each op's rate at "
                                                "its parallelism against the traced throughput");
  sl__h_raw(h, "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
               "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\" fill=\"#5b6575\"/>"
               "</marker></defs>\n");
  sl__svg_text(h, gx, 16, "start", "title", "Ops (data flows down; colour: share of CPU)");
  sl__svg_legend(h, gx, 38, HEAT_LABEL, HEAT, 5);
  sl__svg_text(h, bx0, 16, "start", "title", "Rate each op can sustain at its parallelism (elem/s, log scale)");
  char b[64], t[256];
  for (double d = d0; d <= d1 + 1e-9; d++) {
    double x = XR(pow(10, d));
    sl__svg_line(h, x, top - 8, x, top + rowh * c->n, "#eef1f5", 1, false);
    static const char *const SUFFIX[] = {"", "k", "M", "G", "T", "P"};
    int e = (int)d, k = e >= 0 ? e / 3 : 0;
    if (k > 5) k = 5;
    if (e < 0) snprintf(b, sizeof b, "%g", pow(10, d));
    else snprintf(b, sizeof b, "%.0f%s", pow(10, e - 3 * k), SUFFIX[k]);
    sl__svg_text(h, x, top - 12, "middle", "small", b);
  }
  /* Edges first, under the boxes. */
  for (int i = 0; i < c->n; i++) {
    const rop *o = &c->ops[i];
    int p = o->parent;
    if (p < 0 || p >= c->n) continue;
    double x = gx + indent * o->depth, y = top + rowh * i + (rowh - boxh) / 2;
    double px = gx + indent * c->ops[p].depth, py = top + rowh * p + (rowh - boxh) / 2;
    if (p > i && o->depth == c->ops[p].depth) {
      sl__h_raw(h, "<path d=\"M%.1f,%.1fL%.1f,%.1f\" stroke=\"#5b6575\" stroke-width=\"1.5\" fill=\"none\" "
                   "marker-end=\"url(#arrow)\"/>\n", x + 14, y + boxh, x + 14, py - 1);
    } else { /* into an interleave from its source chain (or any other shape): round the right side */
      double xr = fmax(x + boxw - indent * o->depth, px + boxw - indent * c->ops[p].depth) + 10 + 4 * o->depth;
      sl__h_raw(h, "<path d=\"M%.1f,%.1fH%.1fV%.1fH%.1f\" stroke=\"#5b6575\" stroke-width=\"1.5\" fill=\"none\" "
                   "marker-end=\"url(#arrow)\"/>\n", x + boxw - indent * o->depth, y + boxh / 2, xr, py + boxh / 2,
                px + boxw - indent * c->ops[p].depth + 1);
    }
  }
  for (int i = 0; i < c->n; i++) {
    const rop *o = &c->ops[i];
    bool bn = i == c->bottleneck;
    int k = heat_of(o->share);
    double x = gx + indent * o->depth, y = top + rowh * i + (rowh - boxh) / 2, w = boxw - indent * o->depth;
    char what[96], r[32];
    what_of(o, what, sizeof what);
    sl__h_raw(h, "<g class=\"op%s\" data-path=\"", bn ? " bottleneck" : "");
    sl__h_text(h, o->path);
    sl__h_raw(h, "\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"4\" fill=\"%s\" stroke=\"%s\" "
                 "stroke-width=\"%s\"><title>", x, y, w, boxh, HEAT[k], bn ? "#1d2430" : "#9aa3b2", bn ? "3" : "1");
    sl__h_textf(h, "%s %s: %.1f%% of CPU, %s CPU per output element, %.3g visits, parallelism %lld", o->path, what,
                100 * o->share, sl__fmt_usec(r, sizeof r, o->cpu_out), o->visits, (long long)o->par);
    sl__h_raw(h, "</title></rect>\n");
    const char *tc = k >= 3 ? "on-dark" : NULL;
    char full[256];
    snprintf(full, sizeof full, "%s  %s", o->path, what);
    sl__svg_text(h, x + 8, y + 14, "start", tc, sl__fit(t, sizeof t, full, (size_t)((w - 14) / 7)));
    snprintf(t, sizeof t, "%.0f%% of CPU, parallelism %lld", 100 * o->share, (long long)o->par);
    sl__svg_text(h, x + 8, y + 28, "start", k >= 3 ? "on-dark" : "small", t);
    if (bn) sl__h_raw(h, "<text x=\"%.1f\" y=\"%.1f\" class=\"title\" style=\"fill:#bd0026\">&#9664; bottleneck"
                         "</text>\n", gx + boxw + 6, y + boxh / 2 + 4);
    /* Its rate. */
    double by = top + rowh * i + rowh / 2 - 9;
    if (isfinite(o->rate) && o->rate > 0) {
      snprintf(t, sizeof t, "%s elem/s at parallelism %lld%s", sl__fmt_si(r, sizeof r, o->rate), (long long)o->par,
               bn ? " (the smallest)" : "");
      sl__svg_rect(h, bx0, by, XR(o->rate) - bx0, 18, HEAT[k], t);
      sl__svg_text(h, XR(o->rate) + 6, by + 13, "start", bn ? "title" : NULL, t);
    } else {
      sl__svg_rect(h, bx0, by, bx1 - bx0, 18, "#eef1f5", "no measurable cost");
      sl__svg_text(h, bx1 + 6, by + 13, "start", "small", "no measurable cost");
    }
    sl__h_raw(h, "</g>\n");
  }
  /* Reference lines, their labels staggered below the rows. */
  struct { double v; const char *what, *stroke; bool dashed; } L[3] = {
      {c->traced, "traced", "#1d2430", false}, {c->bound, "LP bound", "#2b6cb0", true},
      {c->measured, "measured (tuned)", "#2f855a", false}};
  double yb = top + rowh * c->n;
  for (int i = 0, row = 0; i < 3; i++) {
    if (!(L[i].v > 0) || !isfinite(L[i].v)) continue;
    double x = XR(L[i].v);
    sl__svg_line(h, x, top - 6, x, yb + 14 + 14 * row, L[i].stroke, 2, L[i].dashed);
    char r[32];
    snprintf(t, sizeof t, "%s %s elem/s", L[i].what, sl__fmt_si(r, sizeof r, L[i].v));
    sl__svg_text(h, x + 4, yb + 14 + 14 * row, "start", "small", t);
    row++;
  }
#undef XR
  sl__svg_end(h);
}

static void throughput_chart(tctx *c) {
  sl__html *h = &c->h;
  json_t *wi = json_object_get(c->rep, "whatif");
  sl__hbar bars[8];
  char notes[8][96], r[32];
  size_t n = 0;
#define BAR(lbl, val, fill, ...)                                                                                      \
  do {                                                                                                                \
    snprintf(notes[n], sizeof notes[n], __VA_ARGS__);                                                                  \
    bars[n] = (sl__hbar){lbl, val, -1, fill, NULL, notes[n], "bar", NULL};                                            \
    n++;                                                                                                              \
  } while (0)
  BAR("traced (as specified)", c->traced, "#9aa3b2", "%s elem/s", sl__fmt_si(r, sizeof r, c->traced));
  BAR("predicted (plan)", c->predicted, "#6b8fc7", "%s elem/s (%.2fx traced)", sl__fmt_si(r, sizeof r, c->predicted),
      c->traced > 0 ? c->predicted / c->traced : 0);
  if (c->measured > 0)
    BAR("measured (tuned spec)", c->measured, "#2f855a", "%s elem/s (%+.1f%% vs predicted)",
        sl__fmt_si(r, sizeof r, c->measured), c->predicted > 0 ? 100 * (c->measured / c->predicted - 1) : 0);
  BAR("LP bound", c->bound, "#2b6cb0", "%s elem/s (limited by %s)", sl__fmt_si(r, sizeof r, c->bound), c->limit);
  double one = num(wi, "plus_one_core");
  BAR("what if +1 core", one, "#a3bfe6", "%s elem/s (%+.0f%%)", sl__fmt_si(r, sizeof r, one),
      c->bound > 0 ? 100 * (one / c->bound - 1) : 0);
  json_t *cache = json_object_get(c->rep, "cache_after");
  double nocache = num(wi, "no_cache");
  if (json_is_string(cache))
    BAR("what if no cache", nocache, "#a3bfe6", "%s elem/s (the plan caches after %s)", sl__fmt_si(r, sizeof r, nocache),
        json_string_value(cache));
  json_t *mm = json_object_get(wi, "more_memory_cache_after");
  if (json_is_string(mm) && !json_equal(mm, cache)) {
    double v = num(wi, "more_memory");
    BAR("what if more memory", v, "#a3bfe6", "%s elem/s (a cache after %s)", sl__fmt_si(r, sizeof r, v),
        json_string_value(mm));
  }
#undef BAR
  sl__hbar_chart ch = {1140, 190, 330, 26, "output elements/s", "Throughput: traced, predicted, bound and what-ifs",
                       NULL, 0};
  sl__svg_hbars(h, &ch, bars, n);
}

static void prose(tctx *c) {
  sl__html *h = &c->h;
  json_t *text = json_object_get(c->rep, "text");
  sl__h_raw(h, "<div class=\"prose\">\n");
  for (size_t i = 0; i < json_array_size(text); i++) {
    const char *line = json_string_value(json_array_get(text, i));
    const char *colon = line ? strchr(line, ':') : NULL;
    sl__h_raw(h, "<p>");
    if (colon && colon - line < 16) { /* "Bottleneck:", "Bound:", "Plan:", "What if:" in bold */
      char head[20];
      snprintf(head, sizeof head, "%.*s", (int)(colon - line + 1), line);
      sl__h_raw(h, "<b>");
      sl__h_text(h, head);
      sl__h_raw(h, "</b>");
      sl__h_text(h, colon + 1);
    } else {
      sl__h_text(h, line);
    }
    sl__h_raw(h, "</p>\n");
  }
  sl__h_raw(h, "</div>\n");
}

static void td(sl__html *h, bool left, const char *s) {
  sl__h_raw(h, left ? "<td class=\"l\">" : "<td>");
  sl__h_text(h, s);
  sl__h_raw(h, "</td>");
}

static void op_table(tctx *c) {
  sl__html *h = &c->h;
  sl__h_raw(h, "<table class=\"ops\">\n<tr><th class=\"l\">op</th><th class=\"l\">what</th><th>visits</th>"
               "<th>cpu/out</th><th title=\"runnable, waiting for a core\">core wait/out</th>"
               "<th title=\"I/O, sleep, locks\">blocked/out</th><th>rate/core</th><th>par</th><th>cpu%%</th>"
               "<th>util</th><th>rate at par</th>"
               "<th>planned par</th><th>planned buffer</th></tr>\n");
  for (int i = 0; i < c->n; i++) {
    const rop *o = &c->ops[i];
    char b[64];
    sl__h_raw(h, "<tr%s>", i == c->bottleneck ? " class=\"bottleneck\" style=\"font-weight:600\"" : "");
    snprintf(b, sizeof b, "%s%s", o->depth ? "\xc2\xa0\xc2\xa0" : "", o->path);
    td(h, true, b);
    what_of(o, b, sizeof b);
    td(h, true, b);
    snprintf(b, sizeof b, "%.3g", o->visits);
    td(h, false, b);
    td(h, false, sl__fmt_usec(b, sizeof b, o->cpu_out));
    td(h, false, o->runq >= 0 ? sl__fmt_usec(b, sizeof b, o->runq) : "-"); /* "-": a trace without the split */
    td(h, false, o->blocked >= 0 ? sl__fmt_usec(b, sizeof b, o->blocked) : "-");
    td(h, false, o->rate_core > 0 ? sl__fmt_si(b, sizeof b, o->rate_core) : "-");
    snprintf(b, sizeof b, "%lld", (long long)o->par);
    td(h, false, b);
    snprintf(b, sizeof b, "%.0f%%", 100 * o->share);
    td(h, false, b);
    snprintf(b, sizeof b, "%.0f%%", 100 * o->util);
    td(h, false, b);
    td(h, false, isfinite(o->rate) ? sl__fmt_si(b, sizeof b, o->rate) : "inf");
    snprintf(b, sizeof b, "%lld", (long long)o->planned_par);
    td(h, false, o->planned_par ? b : "-");
    snprintf(b, sizeof b, "%lld", (long long)o->planned_buf);
    td(h, false, o->planned_buf ? b : "-");
    sl__h_raw(h, "</tr>\n");
  }
  sl__h_raw(h, "</table>\n");
}

static void changes(tctx *c, json_t *rows, bool tuned, bool same_as_plan) {
  sl__html *h = &c->h;
  if (tuned)
    sl__h_raw(h, "<h2>Changes in the tuned spec</h2>\n<p class=\"note\">From the traced spec to the tuned one%s.</p>\n",
              same_as_plan ? " (the same as this trace's plan)"
                           : " (not the plan of this trace: sluice optimize re-solved after measuring, or the spec was "
                             "edited; the prediction above is this trace's plan)");
  else
    sl__h_raw(h, "<h2>Changes the plan makes</h2>\n<p class=\"note\">What <span class=\"mono\">sluice optimize</span> "
                 "would write from this trace (give the spec it wrote with <span class=\"mono\">--tuned</span> to see "
                 "its changes instead).</p>\n");
  if (json_array_size(rows) == 0) {
    sl__h_raw(h, "<p id=\"no-change\">No change: every knob already has the planned value.</p>\n");
    return;
  }
  sl__h_raw(h, "<table class=\"diff\">\n<tr><th class=\"l\">op (traced)</th><th class=\"l\">op (tuned)</th>"
               "<th class=\"l\">what</th><th class=\"l\">knob</th><th class=\"l\">before</th><th class=\"l\">after</th>"
               "</tr>\n");
  size_t i;
  json_t *r;
  json_array_foreach(rows, i, r) {
    sl__h_raw(h, "<tr>");
    td(h, true, str(r, "before_path"));
    td(h, true, str(r, "after_path"));
    td(h, true, str(r, "what"));
    td(h, true, str(r, "knob"));
    sl__h_raw(h, "<td class=\"l mono\"><del>");
    sl__h_text(h, str(r, "before"));
    sl__h_raw(h, "</del></td><td class=\"l mono\"><ins>");
    sl__h_text(h, str(r, "after"));
    sl__h_raw(h, "</ins></td></tr>\n");
  }
  sl__h_raw(h, "</table>\n");
}

static void page(tctx *c, const sl_trace *t, const sl_report_trace_opts *o, json_t *rows, bool tuned, bool same) {
  sl__html *h = &c->h;
  char title[300], a[32], b[32], m[32];
  snprintf(title, sizeof title, "sluice report: %s", str(c->rep, "pipeline"));
  sl__h_begin(h, title);
  json_t *tr = json_object_get(c->rep, "traced"), *bu = json_object_get(c->rep, "budget");
  double mem = num(bu, "memory");
  sl__h_raw(h, "<p class=\"sub\">");
  if (o->source) sl__h_textf(h, "%s: ", o->source);
  sl__h_textf(h, "%s elements in %.2f s (%s elem/s traced); %.3g cores, memory budget %s",
              sl__fmt_si(a, sizeof a, num(tr, "elements")), num(tr, "seconds"), sl__fmt_si(b, sizeof b, c->traced),
              num(bu, "cores"), sl__fmt_bytes(m, sizeof m, mem >= 1e17 ? 0 : mem));
  if (num(bu, "disk_bandwidth") > 0) sl__h_textf(h, ", disk %s/s", sl__fmt_bytes(m, sizeof m, num(bu, "disk_bandwidth")));
  sl__h_raw(h, "</p>\n");
  double other = num(bu, "other_load");
  if (other >= 0.25)
    sl__h_raw(h, "<p class=\"warn\">Other processes kept %.2f cores busy during the trace, leaving %.2f of %.3g to this "
                 "pipeline: expect less than predicted.</p>\n", other,
              fmax(sl_trace_machine(t)->cores - other, 0), sl_trace_machine(t)->cores);
  if (c->measured > 0 && c->measured_other >= 0.25)
    sl__h_raw(h, "<p class=\"warn\">Other processes kept %.2f cores busy during the tuned spec's trace: its measured "
                 "throughput is below what the machine's cores give it.</p>\n", c->measured_other);
  json_t *ts = json_object_get(c->rep, "too_short");
  if (ts)
    sl__h_raw(h, "<p class=\"warn\" id=\"too-short\">Too short to name a bottleneck: the trace saw %.0f output "
                 "elements; the planner needs at least %.0f. Trace for %.0f s or more (sluice trace --seconds %.0f%s)."
                 "</p>\n", num(ts, "elements"), num(ts, "needed"), num(ts, "trace_seconds"), num(ts, "trace_seconds"),
              json_is_true(json_object_get(ts, "repeat")) ? " --repeat: the input ended" : "");
  if (ts && json_is_string(json_object_get(ts, "dominant"))) {
    sl__h_raw(h, "<p class=\"warn\">Dominant op, whatever the count: ");
    sl__h_textf(h, "%s", json_string_value(json_object_get(ts, "dominant")));
    sl__h_raw(h, " (over half of the CPU).</p>\n");
  }
  cards(c);
  sl__h_raw(h, "<h2>Pipeline</h2>\n");
  graph(c);
  sl__h_raw(h, "<h2>Throughput: predicted, measured, bound and what-ifs</h2>\n");
  throughput_chart(c);
  prose(c);
  changes(c, rows, tuned, same);
  sl__h_raw(h, "<h2>Per-op figures</h2>\n");
  op_table(c);
  const sl_machine *mc = sl_trace_machine(t);
  sl__h_raw(h, "<p class=\"note\">");
  sl__h_textf(h, "Machine: %.3g usable cores (%d online), %s available", mc->cores, mc->cpus_online,
              sl__fmt_bytes(m, sizeof m, (double)mc->mem_available));
  if (mc->disk_bandwidth > 0)
    sl__h_textf(h, ", disk %s/s (%s)", sl__fmt_bytes(a, sizeof a, mc->disk_bandwidth), mc->disk_method);
  sl__h_textf(h, ". Rates are output elements per second; cpu/out is CPU per output element; visits are elements "
                 "an op makes per output element.");
  sl__h_raw(h, "</p>\n");
}

/* Fills c->ops from the JSON report and the trace (parents, nesting). */
static int load_ops(tctx *c, const sl_trace *t) {
  json_t *ops = json_object_get(c->rep, "ops");
  c->n = sl_trace_op_count(t);
  if ((int)json_array_size(ops) != c->n)
    return sl__err(SL_ERROR, "report: the planner's report has %zu ops, the trace %d", json_array_size(ops), c->n);
  c->ops = sl__calloc((size_t)(c->n ? c->n : 1), sizeof *c->ops);
  if (!c->ops) return sl__oom("the report's ops");
  json_t *bn = json_object_get(c->rep, "bottleneck");
  c->bottleneck = -1;
  for (int i = 0; i < c->n; i++) {
    json_t *j = json_array_get(ops, (size_t)i);
    rop *o = &c->ops[i];
    sl_op_stats s;
    int rc = sl_trace_op(&s, t, i);
    if (rc) return rc;
    o->path = str(j, "path");
    o->op = str(j, "op");
    o->label = str(j, "label");
    o->parent = s.parent;
    for (const char *p = o->path; (p = strstr(p, ".source[")); p++) o->depth++;
    o->visits = num(j, "visit_ratio");
    o->cpu_out = num(j, "cpu_seconds_per_output");
    json_t *rq = json_object_get(j, "runq_seconds_per_output"), *bl = json_object_get(j, "blocked_seconds_per_output");
    o->runq = json_is_number(rq) ? json_number_value(rq) : -1;
    o->blocked = json_is_number(bl) ? json_number_value(bl) : -1;
    o->rate_core = num(j, "rate_per_core");
    o->share = num(j, "cpu_share");
    o->util = num(j, "utilisation");
    json_t *r = json_object_get(j, "rate");
    o->rate = json_is_number(r) ? json_number_value(r) : INFINITY;
    o->par = (int64_t)json_integer_value(json_object_get(j, "parallelism"));
    o->planned_par = (int64_t)json_integer_value(json_object_get(j, "planned_parallelism"));
    o->planned_buf = (int64_t)json_integer_value(json_object_get(j, "planned_buffer"));
    if (json_is_string(bn) && !strcmp(o->path, json_string_value(bn))) c->bottleneck = i;
  }
  return 0;
}

/* The rows from the traced spec to `b`. A spec `sluice optimize` wrote may have fused ops (plan_fuse.c): when the
 * specs differ otherwise than in knobs, the traced spec is fused as the optimizer fuses it and compared again, and
 * the fusion is the first row. The first difference is named when that does not match either. */
static int diff_specs(json_t *rows, json_t *traced, json_t *b) {
  int rc = diff_chain(rows, json_object_get(traced, "ops"), "ops", json_object_get(b, "ops"), "ops");
  if (rc != SL_EINVAL) return rc;
  char why[512];
  snprintf(why, sizeof why, "%s", sl_error_last());
  json_t *fused = json_deep_copy(traced);
  char *note = NULL;
  int n = fused ? sl__plan_fuse_spec_note(fused, &note) : sl__oom("the fused spec");
  if (n > 0) {
    json_array_clear(rows);
    json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "before_path", "ops", "after_path", "ops", "what", "fusion",
                          "knob", "(fused)", "before", note, "after", "one op per pair (later ops renumbered)");
    rc = r && !json_array_append_new(rows, r) ? 0 : sl__oom("the spec's changes");
    if (!rc) rc = diff_chain(rows, json_object_get(fused, "ops"), "ops", json_object_get(b, "ops"), "ops");
    if (rc == SL_EINVAL) rc = sl__err(SL_EINVAL, "%s (nor is it the traced spec fused: %s)", why, sl_error_last());
  } else {
    rc = n < 0 ? n : sl__err(SL_EINVAL, "%s", why);
  }
  sl__free(note);
  json_decref(fused);
  return rc;
}

static json_t *parse(const char *text, const char *what) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  if (!j) sl__err(sl__json_oom_take() ? SL_ENOMEM : SL_EINVAL, "%s: line %d column %d: %s", what, e.line, e.column,
                  e.text);
  else if (!json_is_array(json_object_get(j, "ops"))) {
    json_decref(j);
    j = NULL;
    sl__err(SL_EINVAL, "%s: not a pipeline spec (no \"ops\" array)", what);
  }
  return j;
}

int sl_report_trace_html(char **out, const sl_trace *t, const sl_report_trace_opts *opts) {
  *out = NULL;
  sl_report_trace_opts def = SL_REPORT_TRACE_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_REPORT_TRACE_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_report_trace_opts version %d, expected %d", opts->version,
                   SL_REPORT_TRACE_OPTS_VERSION);
  /* The planner's documents are taken as JSON values, not re-parsed from text: jansson's parser is not safe when an
   * allocation fails. Only a tuned spec given as text is parsed. */
  tctx c = {0};
  sl_plan *pl = NULL;
  json_t *parsed = NULL, *planned = NULL, *rows = json_array();
  json_t *tuned = opts->tuned_trace ? opts->tuned_trace->spec : NULL;
  int rc = rows ? 0 : sl__oom("the report");
  sl_plan_opts po = opts->plan;
  if (!rc && po.version == 0) po.version = SL_PLAN_OPTS_VERSION; /* embedded: this struct's version covers it */
  if (!rc) rc = sl_plan_solve(&pl, t, &po);
  if (!rc && !(c.rep = sl__plan_report_json(pl))) rc = SL_ENOMEM;
  if (!rc) rc = load_ops(&c, t);
  if (!rc && !(planned = sl__plan_spec(pl))) rc = SL_ENOMEM;
  if (!rc && !tuned && opts->tuned_spec) {
    if (!(parsed = parse(opts->tuned_spec, "the tuned spec"))) rc = sl_error_code();
    tuned = parsed;
  }
  if (!rc)
    rc = diff_specs(rows, t->spec, tuned ? tuned : planned);
  if (!rc) {
    c.traced = num(json_object_get(c.rep, "traced"), "throughput");
    c.bound = num(c.rep, "bound");
    c.predicted = num(c.rep, "predicted");
    c.limit = str(c.rep, "limit");
    c.measured = opts->tuned_trace ? sl_trace_throughput(opts->tuned_trace) : 0;
    c.measured_other = opts->tuned_trace ? sl_trace_machine(opts->tuned_trace)->other_load : 0;
    page(&c, t, opts, rows, tuned != NULL,
         tuned && json_equal(json_object_get(tuned, "ops"), json_object_get(planned, "ops")));
    rc = sl__h_end(&c.h, out);
  } else {
    sl__str_dispose(&c.h.s);
  }
  json_decref(rows);
  json_decref(parsed);
  json_decref(planned);
  json_decref(c.rep);
  sl__free(c.ops);
  sl_plan_free(pl);
  return rc;
}

/* report/report_prov.c: `sluice prov report`: the characterization of a provenance store as one HTML page. The
 * figures are those of the analytics (sl_prov_stats_compute, sl_prov_waste_compute, sl_prov_simulate) as
 * `sluice prov stats|waste|simulate` print them; the page only adds the per-pipeline distributions the charts
 * need (graphlets and push rate of each pipeline, counted from the graphlet set). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/html_int.h"
#include "sluice/prov_rq.h"
#include "sluice/report.h"

typedef struct pctx {
  sl__html h;
  const sl_prov_graphlets *g;
  const char *basis;
  sl_prov_stats *st;
  sl_prov_waste *w;
  sl_prov_sim *sim;
  sl_prov_overlap *ov;
  sl_prov_fleet *fleet; /* NULL without a store in the options */
  double *per_count, *per_rate; /* per pipeline with graphlets */
  size_t npipes;
} pctx;

static const char *pct_s(char *b, size_t n, double share) {
  snprintf(b, n, "%.1f%%", 100 * share);
  return b;
}

/* Graphlets and push rate of each pipeline (the set is in pipeline order). */
static int per_pipeline(pctx *c) {
  size_t n = sl_prov_graphlets_count(c->g);
  c->per_count = sl__calloc(n ? n : 1, sizeof *c->per_count);
  c->per_rate = sl__calloc(n ? n : 1, sizeof *c->per_rate);
  if (!c->per_count || !c->per_rate) return sl__oom("the report's pipelines");
  const sl_prov_graphlet *prev = NULL;
  for (size_t i = 0; i < n; i++) {
    const sl_prov_graphlet *x = sl_prov_graphlets_at(c->g, i);
    if (!prev || prev->pipeline_ctx != x->pipeline_ctx || strcmp(prev->pipeline ? prev->pipeline : "",
                                                                 x->pipeline ? x->pipeline : ""))
      c->npipes++;
    c->per_count[c->npipes - 1] += 1;
    c->per_rate[c->npipes - 1] += x->pushed;
    prev = x;
  }
  for (size_t k = 0; k < c->npipes; k++) c->per_rate[k] /= c->per_count[k];
  return 0;
}

/* A column chart: one bar per bin, its count on top, labels under it; an optional vertical marker at `mark` (in
 * bins from the left edge, < 0: none). */
static void columns(sl__html *h, const char *cls, const char *aria, char labels[][24], const double *v, size_t n,
                    const char *xtitle, const char *ytitle, double mark, const char *mark_label) {
  const double W = 1140, H = 280, x0 = 64, x1 = 1120, y0 = 34, y1 = 220;
  double max = 0;
  for (size_t i = 0; i < n; i++) max = fmax(max, v[i]);
  double step = sl__nice_step(max, 5), hi = max > 0 ? ceil(max / step - 1e-9) * step : 1;
  if (step < 1) step = 1, hi = fmax(hi, 1);
  sl__svg_begin(h, W, H, cls, aria);
  char b[48];
  for (double t = 0; t <= hi * (1 + 1e-9); t += step) {
    double y = y1 - (y1 - y0) * t / hi;
    sl__svg_line(h, x0, y, x1, y, "#eef1f5", 1, false);
    sl__svg_text(h, x0 - 8, y + 4, "end", "small", sl__fmt_tick(b, sizeof b, t, step));
  }
  double bw = (x1 - x0) / (double)(n ? n : 1);
  for (size_t i = 0; i < n; i++) {
    double hgt = (y1 - y0) * v[i] / hi, x = x0 + bw * (double)i;
    char tip[24 + 2 + 320]; /* a label, ": ", and room for any %.0f */
    snprintf(tip, sizeof tip, "%.23s: %.0f", labels[i], v[i]); /* a label is at most 23 */
    sl__h_raw(h, "<g class=\"bin\">\n");
    sl__svg_rect(h, x + bw * 0.1, y1 - hgt, bw * 0.8, hgt, "#6b8fc7", tip);
    if (v[i] > 0) {
      snprintf(b, sizeof b, "%.0f", v[i]);
      sl__svg_text(h, x + bw / 2, y1 - hgt - 4, "middle", "small", b);
    }
    sl__svg_text(h, x + bw / 2, y1 + 15, "middle", "small", labels[i]);
    sl__h_raw(h, "</g>\n");
  }
  sl__svg_line(h, x0, y1, x1, y1, "#9aa3b2", 1, false);
  if (mark >= 0) {
    double x = x0 + bw * mark;
    sl__svg_line(h, x, y0 - 16, x, y1, "#bd0026", 2, true);
    sl__svg_text(h, x + 5, y0 - 20, "start", "title", mark_label);
  }
  sl__svg_text(h, (x0 + x1) / 2, y1 + 36, "middle", "small", xtitle);
  sl__h_raw(h, "<text x=\"14\" y=\"%.1f\" class=\"small\" text-anchor=\"middle\" transform=\"rotate(-90 14 %.1f)\">",
            (y0 + y1) / 2, (y0 + y1) / 2);
  sl__h_text(h, ytitle);
  sl__h_raw(h, "</text>\n");
  sl__svg_end(h);
}

static void graphlets_chart(pctx *c) {
  sl__html *h = &c->h;
  double max = 0;
  for (size_t k = 0; k < c->npipes; k++) max = fmax(max, c->per_count[k]);
  double step = fmax(1, sl__nice_step(max + 1, 10));
  size_t nb = (size_t)(max / step) + 1;
  if (nb > 40) nb = 40;
  double bins[40] = {0};
  char labels[40][24];
  for (size_t k = 0; k < c->npipes; k++) {
    size_t i = (size_t)(c->per_count[k] / step);
    bins[i < nb ? i : nb - 1] += 1;
  }
  for (size_t i = 0; i < nb; i++) {
    if (step == 1) snprintf(labels[i], sizeof labels[i], "%.0f", (double)i);
    else snprintf(labels[i], sizeof labels[i], "%.0f-%.0f", step * (double)i, step * (double)(i + 1) - 1);
  }
  const double *q = c->st->graphlets_per_pipeline;
  char mean[48];
  snprintf(mean, sizeof mean, "mean %.1f", q[6]);
  sl__h_raw(h, "<h2>Graphlets per pipeline</h2>\n<p class=\"note\" id=\"gpp\">");
  char rate[96], span[32];
  if (isnan(c->st->runs_per_day))
    snprintf(rate, sizeof rate, "all in %s (under a day: no daily rate)", sl__fmt_days(span, sizeof span, c->st->days));
  else
    snprintf(rate, sizeof rate, "%.2f runs per pipeline per day", c->st->runs_per_day);
  sl__h_textf(h, "Models (trainer runs) each pipeline made: min %.0f, p25 %.0f, median %.0f, p75 %.0f, p90 %.0f, "
                 "max %.0f, mean %.1f; %s.", q[0], q[1], q[2], q[3], q[4], q[5], q[6], rate);
  sl__h_raw(h, "</p>\n");
  /* The mean's marker: bin i holds the whole counts i*step .. (i+1)*step-1, each a 1/step slice of it, so count k
   * stands at (k + 0.5)/step bins (k's label, for step 1), not at k/step (half a bin to the left). */
  columns(h, "chart graphlets", "Distribution of graphlets per pipeline", labels, bins, nb, "graphlets (models) per "
          "pipeline", "pipelines", (q[6] + 0.5) / step, mean);
}

static void push_chart(pctx *c) {
  sl__html *h = &c->h;
  double bins[10] = {0};
  char labels[10][24], b[32], f[32], g[32];
  for (size_t k = 0; k < c->npipes; k++) {
    int i = (int)(c->per_rate[k] * 10);
    bins[i > 9 ? 9 : i < 0 ? 0 : i] += 1;
  }
  for (int i = 0; i < 10; i++) snprintf(labels[i], sizeof labels[i], "%d-%d%%", 10 * i, 10 * (i + 1));
  sl__h_raw(h, "<h2>Push rate</h2>\n<p class=\"note\">");
  sl__h_textf(h, "%s of graphlets pushed a model (%s did not); %s of trainers failed. Pipelines by the share of their "
                 "graphlets that pushed:", pct_s(b, sizeof b, c->st->push_rate),
              pct_s(f, sizeof f, 1 - c->st->push_rate), pct_s(g, sizeof g, c->st->failed_trainers));
  sl__h_raw(h, "</p>\n");
  char mark[48];
  snprintf(mark, sizeof mark, "all graphlets: %s", b);
  columns(h, "chart push", "Pipelines by push rate", labels, bins, 10, "share of the pipeline's graphlets that pushed",
          "pipelines", 10 * c->st->push_rate, mark);
}

static void compute_chart(pctx *c) {
  sl__html *h = &c->h;
  size_t n = c->st->ncompute < 12 ? c->st->ncompute : 12;
  sl__hbar bars[12];
  char notes[12][64], v[32], s[32];
  for (size_t i = 0; i < n; i++) {
    const sl_prov_waste_row *r = &c->st->compute[i];
    snprintf(notes[i], sizeof notes[i], "%s (%s)", sl__fmt_si(v, sizeof v, r->total),
             pct_s(s, sizeof s, c->st->total_compute > 0 ? r->total / c->st->total_compute : 0));
    bars[i] = (sl__hbar){r->name, r->total, -1, "#6b8fc7", NULL, notes[i], "bar", NULL};
  }
  sl__h_raw(h, "<h2>Compute by component type</h2>\n<p class=\"note\">");
  sl__h_textf(h, "All compute: %s (%s)%s.", sl__fmt_si(v, sizeof v, c->st->total_compute), c->basis,
              c->st->ncompute > n ? "; the 12 largest types" : "");
  sl__h_raw(h, "</p>\n");
  char axis[64];
  snprintf(axis, sizeof axis, "compute (%s)", c->basis);
  sl__hbar_chart ch = {1140, 220, 200, 24, axis, "Compute by component type", NULL, 0};
  sl__svg_hbars(h, &ch, bars, n);
}

static int waste_chart(pctx *c, size_t top) {
  sl__html *h = &c->h;
  const sl_prov_waste *w = c->w;
  size_t n = w->npipelines < top ? w->npipelines : top;
  sl__hbar *bars = sl__calloc(n ? n : 1, sizeof *bars);
  char(*notes)[64] = sl__calloc(n ? n : 1, sizeof *notes);
  if (!bars || !notes) {
    sl__free(bars);
    sl__free(notes);
    return sl__oom("the waste chart");
  }
  char a[32], b[32], s[32], u[32];
  for (size_t i = 0; i < n; i++) {
    const sl_prov_waste_row *r = &w->pipelines[i];
    snprintf(notes[i], sizeof notes[i], "%s of %s (%s)", sl__fmt_si(a, sizeof a, r->wasted),
             sl__fmt_si(b, sizeof b, r->total), pct_s(s, sizeof s, r->total > 0 ? r->wasted / r->total : 0));
    bars[i] = (sl__hbar){r->name, r->total, r->wasted, "#c9d1dd", "#e0533d", notes[i], "bar waste", NULL};
  }
  sl__h_raw(h, "<h2>Wasted compute by pipeline</h2>\n<p class=\"note\" id=\"waste\">");
  sl__h_textf(h, "Wasted: %s of %s (%s), the compute of executions none of whose graphlets pushed; %s of it in no "
                 "graphlet. The %zu pipelines that wasted the most (red: wasted; grey: the rest of their compute):",
              sl__fmt_si(a, sizeof a, w->wasted), sl__fmt_si(b, sizeof b, w->total),
              pct_s(s, sizeof s, w->total > 0 ? w->wasted / w->total : 0), sl__fmt_si(u, sizeof u, w->unattributed), n);
  sl__h_raw(h, "</p>\n");
  char axis[64];
  snprintf(axis, sizeof axis, "compute (%s)", c->basis);
  sl__hbar_chart ch = {1140, 220, 200, 22, axis, "Wasted compute by pipeline", NULL, 0};
  sl__svg_hbars(h, &ch, bars, n);
  sl__free(bars);
  sl__free(notes);
  return 0;
}

/* Re-processed input by execution type: each type's cost (grey) with its recomputed part (amber). */
static int overlap_chart(pctx *c) {
  sl__html *h = &c->h;
  const sl_prov_overlap *o = c->ov;
  size_t n = o->ntypes < 12 ? o->ntypes : 12;
  sl__hbar bars[12];
  char notes[12][64], a[32], b[32], s[32], u[32];
  for (size_t i = 0; i < n; i++) {
    const sl_prov_overlap_row *r = &o->types[i];
    snprintf(notes[i], sizeof notes[i], "%s of %s (%s)", sl__fmt_si(a, sizeof a, r->recomputed_cost),
             sl__fmt_si(b, sizeof b, r->cost), pct_s(s, sizeof s, r->cost > 0 ? r->recomputed_cost / r->cost : 0));
    bars[i] = (sl__hbar){r->name, r->cost, r->recomputed_cost, "#c9d1dd", "#e0a33d", notes[i], "bar overlap", NULL};
  }
  const sl_prov_overlap_row *t = &o->total;
  sl__h_raw(h, "<h2>Re-processed input</h2>\n<p class=\"note\" id=\"overlap\">");
  sl__h_textf(h, "%zu of %zu executions with Examples inputs re-read spans an earlier execution of the same type in "
                 "the same pipeline had read (mean overlap %s). Recomputed: %s, %s of all compute (cost taken as "
                 "linear in spans). Amber: the recomputed part of each type's cost.",
              t->with_overlap, t->executions, pct_s(u, sizeof u, t->mean_overlap),
              sl__fmt_si(a, sizeof a, t->recomputed_cost),
              pct_s(s, sizeof s, o->all_compute > 0 ? t->recomputed_cost / o->all_compute : 0));
  sl__h_raw(h, "</p>\n");
  char axis[64];
  snprintf(axis, sizeof axis, "compute (%s)", c->basis);
  sl__hbar_chart ch = {1140, 220, 200, 24, axis, "Re-processed input by execution type", NULL, 0};
  sl__svg_hbars(h, &ch, bars, n);
  sl__h_raw(h, "<p class=\"note\" id=\"reuse\">");
  sl__h_textf(h, "Reuse would save %s (%s of all compute): the recomputation whose earlier reader wrote Examples, "
                 "output that could have been kept per span and read again.",
              sl__fmt_si(a, sizeof a, t->reusable_cost),
              pct_s(s, sizeof s, o->all_compute > 0 ? t->reusable_cost / o->all_compute : 0));
  sl__h_raw(h, "</p>\n");
  return 0;
}

static void fleet_td(sl__html *h, bool left, const char *s) {
  sl__h_raw(h, left ? "<td class=\"l\">" : "<td>");
  sl__h_text(h, s);
  sl__h_raw(h, "</td>");
}

/* The runs sluice recorded: per spec, input-bound runs, CPU, throughput, headroom, the busiest op. */
static void fleet_section(pctx *c) {
  sl__html *h = &c->h;
  const sl_prov_fleet *f = c->fleet;
  if (!f || (!f->all.runs && !f->all.failed)) return;
  const sl_prov_fleet_row *a = &f->all;
  char b[96];
  sl__h_raw(h, "<h2>Recorded sluice runs</h2>\n<p class=\"note\" id=\"fleet\">");
  sl__h_textf(h, "%zu runs (%zu failed) of %zu pipeline specs; input-bound (the busiest op used at least 80%% of the "
                 "cores it may use): %zu of the %zu runs that recorded its load.",
              a->runs, a->failed, f->npipelines, a->input_bound, a->known);
  if (a->headroom > 0) sl__h_textf(h, " Headroom where a recorded optimize shows it: %.2fx (weighted by runs).", a->headroom);
  sl__h_raw(h, "</p>\n<table class=\"fleet\">\n<tr><th class=\"l\">pipeline</th><th>runs</th><th>failed</th>"
               "<th>input-bound</th><th>CPU s</th><th>median el/s</th><th>headroom</th><th class=\"l\">busiest op "
               "(runs)</th></tr>\n");
  for (size_t i = 0; i < f->npipelines && i < 30; i++) {
    const sl_prov_fleet_row *r = &f->pipelines[i];
    sl__h_raw(h, "<tr>");
    fleet_td(h, true, r->pipeline);
    snprintf(b, sizeof b, "%zu", r->runs);
    fleet_td(h, false, b);
    snprintf(b, sizeof b, "%zu", r->failed);
    fleet_td(h, false, b);
    snprintf(b, sizeof b, "%zu of %zu", r->input_bound, r->known);
    fleet_td(h, false, b);
    snprintf(b, sizeof b, "%.1f", r->cpu_seconds);
    fleet_td(h, false, b);
    fleet_td(h, false, r->throughput > 0 ? sl__fmt_si(b, sizeof b, r->throughput) : "-");
    if (r->headroom > 0) snprintf(b, sizeof b, "%.2fx", r->headroom);
    fleet_td(h, false, r->headroom > 0 ? b : "-");
    if (r->nops) snprintf(b, sizeof b, "%.80s (%zu)", r->ops[0].op, r->ops[0].count);
    fleet_td(h, true, r->nops ? b : "-");
    sl__h_raw(h, "</tr>\n");
  }
  sl__h_raw(h, "</table>\n");
  size_t n = a->nops < 10 ? a->nops : 10;
  if (!n) return;
  sl__hbar bars[10];
  char notes[10][32];
  for (size_t i = 0; i < n; i++) {
    snprintf(notes[i], sizeof notes[i], "%zu runs", a->ops[i].count);
    bars[i] = (sl__hbar){a->ops[i].op, (double)a->ops[i].count, -1, "#6b8fc7", NULL, notes[i], "bar fleet", NULL};
  }
  sl__hbar_chart ch = {1140, 300, 120, 24, "runs where the op was the busiest", "Busiest ops of the recorded runs",
                       NULL, 0};
  sl__svg_hbars(h, &ch, bars, n);
}

/* The simulation: for each threshold, the share of the window's wasted compute saved (x) against freshness:
 * cadence and push recall (y); fresh thresholds in green. */
static void sim_chart(pctx *c) {
  sl__html *h = &c->h;
  const sl_prov_sim *s = c->sim;
  const double W = 1140, H = 400, x0 = 70, x1 = 900, y0 = 20, y1 = 340;
  char b[160], p1[32], p2[32];
  sl__h_raw(h, "<h2>Pruning: compute saved against freshness</h2>\n<p class=\"note\">");
  sl__h_textf(h, "Test window: %zu graphlets, %zu pushes; wasted compute %s (%s), of which pruning can reach %s (%s). "
                 "Each point is a threshold on the predicted P(push) (0.00 to 0.99): graphlets below it are pruned. "
                 "Fresh: cadence at least 99%% and staleness within 5%%.",
              s->ngraphlets, s->npushes, sl__fmt_si(p1, sizeof p1, s->window_waste), c->basis,
              sl__fmt_si(p2, sizeof p2, s->prunable_waste),
              pct_s(b, sizeof b, s->window_waste > 0 ? s->prunable_waste / s->window_waste : 0));
  sl__h_raw(h, "</p>\n");
  sl__svg_begin(h, W, H, "chart sim", "Share of wasted compute saved against cadence and push recall, per threshold");
#define SX(v) (x0 + (x1 - x0) * (v))
#define SY(v) (y1 - (y1 - y0) * (v))
  for (int t = 0; t <= 10; t++) {
    snprintf(b, sizeof b, "%d%%", 10 * t);
    sl__svg_line(h, SX(t / 10.0), y0, SX(t / 10.0), y1, "#eef1f5", 1, false);
    sl__svg_line(h, x0, SY(t / 10.0), x1, SY(t / 10.0), "#eef1f5", 1, false);
    sl__svg_text(h, SX(t / 10.0), y1 + 15, "middle", "small", b);
    sl__svg_text(h, x0 - 8, SY(t / 10.0) + 4, "end", "small", b);
  }
  sl__svg_line(h, x0, y1, x1, y1, "#9aa3b2", 1, false);
  sl__svg_line(h, x0, y0, x0, y1, "#9aa3b2", 1, false);
  sl__svg_text(h, (x0 + x1) / 2, y1 + 36, "middle", "small", "share of the window's wasted compute saved");
  sl__h_raw(h, "<text x=\"16\" y=\"%.1f\" class=\"small\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">"
               "cadence / push recall</text>\n", (y0 + y1) / 2, (y0 + y1) / 2);
  struct { const sl_prov_sim_row *rows; size_t n; const char *stroke, *cls; bool dashed; bool recall; } L[3] = {
      {s->rows, s->nrows, "#2b6cb0", "curve cadence", false, false},
      {s->rows, s->nrows, "#805ad5", "curve recall", true, true},
      {s->truth_rows, s->has_truth ? s->ntruth : 0, "#9aa3b2", "curve ceiling", true, false}};
  for (int l = 0; l < 3; l++) {
    if (!L[l].n) continue;
    sl__h_raw(h, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", L[l].cls,
              L[l].stroke, L[l].dashed ? " stroke-dasharray=\"5 4\"" : "");
    for (size_t i = 0; i < L[l].n; i++)
      sl__h_raw(h, "%s%.1f,%.1f", i ? " " : "", SX(L[l].rows[i].saved_share),
                SY(L[l].recall ? L[l].rows[i].push_recall : L[l].rows[i].cadence));
    sl__h_raw(h, "\"/>\n");
  }
  /* The predictor's thresholds on the cadence curve, green when fresh. */
  for (size_t i = 0; i < s->nrows; i++) {
    const sl_prov_sim_row *r = &s->rows[i];
    snprintf(b, sizeof b, "threshold %.2f: %.1f%% of waste saved, %zu pruned; cadence %.2f%%, push recall %.2f%%, "
                          "staleness %.3fx (%s)", r->threshold, 100 * r->saved_share, r->pruned, 100 * r->cadence,
             100 * r->push_recall, r->staleness_ratio, r->fresh ? "fresh" : "stale");
    sl__h_raw(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>", SX(r->saved_share), SY(r->cadence),
              r->fresh ? "#2f855a" : "#dd6b20");
    sl__h_text(h, b);
    sl__h_raw(h, "</title></circle>\n");
  }
  int bests[2] = {s->best, s->best_recall99};
  for (int k = 0; k < 2; k++) {
    if (bests[k] < 0 || (k == 1 && bests[1] == bests[0])) continue;
    const sl_prov_sim_row *r = &s->rows[bests[k]];
    sl__h_raw(h, "<circle class=\"best\" cx=\"%.1f\" cy=\"%.1f\" r=\"8\" fill=\"none\" stroke=\"#1d2430\" "
                 "stroke-width=\"2\"/>\n", SX(r->saved_share), SY(r->cadence));
    snprintf(b, sizeof b, "%s: threshold %.2f saves %.1f%%", k ? "fresh, 99% recall" : "largest fresh saving",
             r->threshold, 100 * r->saved_share);
    sl__svg_text(h, SX(r->saved_share) - 10, SY(r->cadence) + 22 + 14 * k, "end", "title", b);
  }
  /* Legend on the right. */
  const double lx = 920;
  struct { const char *label, *stroke; bool dashed; bool show; } G[3] = {
      {"cadence (predictor)", "#2b6cb0", false, true}, {"push recall (predictor)", "#805ad5", true, true},
      {"cadence (true P(push): ceiling)", "#9aa3b2", true, s->has_truth}};
  double ly = 40;
  for (int k = 0; k < 3; k++) {
    if (!G[k].show) continue;
    sl__svg_line(h, lx, ly - 4, lx + 24, ly - 4, G[k].stroke, 2, G[k].dashed);
    sl__svg_text(h, lx + 30, ly, "start", "small", G[k].label);
    ly += 18;
  }
  sl__h_raw(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#2f855a\"/>\n", lx + 12, ly - 4);
  sl__svg_text(h, lx + 30, ly, "start", "small", "fresh threshold");
  ly += 18;
  sl__h_raw(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#dd6b20\"/>\n", lx + 12, ly - 4);
  sl__svg_text(h, lx + 30, ly, "start", "small", "stale threshold");
#undef SX
#undef SY
  sl__svg_end(h);
  sl__h_raw(h, "<p id=\"sim-best\">");
  if (s->best >= 0) {
    const sl_prov_sim_row *r = &s->rows[s->best];
    sl__h_textf(h, "Keeping freshness: threshold %.2f prunes %.1f%% of wasted compute; push recall %.2f%%, cadence "
                   "%.2f%%, staleness %.3fx.", r->threshold, 100 * r->saved_share, 100 * r->push_recall,
                100 * r->cadence, r->staleness_ratio);
  } else {
    sl__h_text(h, "No threshold above 0 keeps freshness.");
  }
  if (s->has_truth && s->truth_best >= 0)
    sl__h_textf(h, " The ceiling (pruning by the corpus's true push probability) prunes %.1f%% at threshold %.2f.",
                100 * s->truth_rows[s->truth_best].saved_share, s->truth_rows[s->truth_best].threshold);
  sl__h_raw(h, "</p>\n");
}

static int page(pctx *c, const sl_report_prov_opts *o) {
  sl__html *h = &c->h;
  char title[300], a[32], b[96], x[32], y[32];
  char src[256];
  sl_redact(src, sizeof src, o->source ? o->source : "provenance store"); /* the page is shared: no password */
  snprintf(title, sizeof title, "sluice prov report: %s", src);
  sl__h_begin(h, title);
  const sl_prov_stats *s = c->st;
  sl__h_raw(h, "<p class=\"sub\">");
  sl__h_textf(h, "%zu pipelines, %zu graphlets (models), %zu executions, %zu artifacts over %s; cost basis %s.",
              s->pipelines, s->graphlets, s->executions, s->artifacts, sl__fmt_days(x, sizeof x, s->days), c->basis);
  sl__h_raw(h, "</p>\n<div class=\"cards\">\n");
  snprintf(a, sizeof a, "%zu", s->pipelines);
  snprintf(b, sizeof b, "%zu graphlets", s->graphlets);
  sl__h_card(h, "pipelines", "pipelines", a, b);
  if (isnan(s->graphlets_per_day))
    snprintf(b, sizeof b, "%zu graphlets in %s", s->graphlets, sl__fmt_days(x, sizeof x, s->days));
  else
    snprintf(b, sizeof b, "%.0f graphlets per day", s->graphlets_per_day);
  sl__h_card(h, "push rate", "push-rate", pct_s(a, sizeof a, s->push_rate), b);
  snprintf(b, sizeof b, "%s of %s %s", sl__fmt_si(x, sizeof x, c->w->wasted), sl__fmt_si(y, sizeof y, c->w->total),
           c->basis);
  sl__h_card(h, "wasted compute", "wasted", pct_s(a, sizeof a, c->w->total > 0 ? c->w->wasted / c->w->total : 0), b);
  if (c->sim && c->sim->best >= 0) {
    const sl_prov_sim_row *r = &c->sim->rows[c->sim->best];
    snprintf(b, sizeof b, "of the test window's waste, at threshold %.2f", r->threshold);
    sl__h_card(h, "pruning saves", "sim-saved", pct_s(a, sizeof a, r->saved_share), b);
  }
  sl__h_raw(h, "</div>\n");
  graphlets_chart(c);
  push_chart(c);
  compute_chart(c);
  int rc = waste_chart(c, o->top ? o->top : 20);
  if (rc) return rc;
  if (c->sim) sim_chart(c);
  else
    sl__h_raw(h, "<h2>Pruning: compute saved against freshness</h2>\n<p class=\"note\" id=\"no-model\">Give a model "
                 "(<span class=\"mono\">sluice prov train DB -o MODEL.json</span>, then <span class=\"mono\">--model "
                 "MODEL.json</span>) for the pruning simulation's curve.</p>\n");
  /* After the simulation, so the page's first screens stay as they were. */
  rc = overlap_chart(c);
  if (!rc) fleet_section(c);
  return rc;
}

int sl_report_prov_html(char **out, const sl_prov_graphlets *g, const sl_report_prov_opts *opts) {
  *out = NULL;
  sl_report_prov_opts def = SL_REPORT_PROV_OPTS_INIT;
  if (!opts) opts = &def;
  if (opts->version != SL_REPORT_PROV_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_report_prov_opts version %d, expected %d", opts->version,
                   SL_REPORT_PROV_OPTS_VERSION);
  pctx c = {.g = g, .basis = sl_prov_graphlets_cost_basis(g)};
  int rc = sl_prov_stats_compute(&c.st, g);
  if (!rc) rc = sl_prov_waste_compute(&c.w, g);
  if (!rc) rc = sl_prov_overlap_compute(&c.ov, g);
  if (!rc && opts->store) rc = sl_prov_fleet_compute(&c.fleet, opts->store);
  if (!rc && opts->model) rc = sl_prov_simulate(&c.sim, g, opts->model);
  if (!rc) rc = per_pipeline(&c);
  if (!rc) rc = page(&c, opts);
  if (!rc) rc = sl__h_end(&c.h, out);
  else sl__str_dispose(&c.h.s);
  sl_prov_stats_free(c.st);
  sl_prov_waste_free(c.w);
  sl_prov_sim_free(c.sim);
  sl_prov_overlap_free(c.ov);
  sl_prov_fleet_free(c.fleet);
  sl__free(c.per_count);
  sl__free(c.per_rate);
  return rc;
}

/* sluice/report.h: reports people look at: one self-contained HTML page each (inline SVG and CSS; no script,
 * nothing loaded from the network), for a trace (`sluice report`) and for a provenance store (`sluice prov
 * report`). They draw the figures of the analyzer (sl_plan_report) and of the provenance analytics
 * (sl_prov_stats_compute, sl_prov_waste_compute, sl_prov_simulate); see docs/reports.md.
 * Thread rules: the functions read their inputs only and may run on any thread (one call per input at a time for
 * the provenance report, whose model the simulation updates). */
#ifndef SLUICE_REPORT_H
#define SLUICE_REPORT_H

#include "common.h"
#include "plan.h"
#include "prov.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of sl_report_trace_html. Every field left 0 takes its default. */
typedef struct sl_report_trace_opts {
  int version;                 /* SL_REPORT_TRACE_OPTS_VERSION */
  sl_plan_opts plan;           /* the planner's budget and choices, as for sluice analyze (its version may stay 0;
                                * every field 0: the defaults) */
  const char *source;          /* where the trace came from, shown under the title (NULL: not shown) */
  const char *tuned_spec;      /* a tuned spec of the traced pipeline (what sluice optimize -o wrote), normalised
                                * as sl_pipeline_to_json writes it: the page shows its changes knob by knob.
                                * NULL: the changes the plan of this trace would make */
  const sl_trace *tuned_trace; /* a trace of the tuned spec (overrides tuned_spec): the page also shows its
                                * measured throughput against the plan's prediction. NULL: none */
} sl_report_trace_opts;
#define SL_REPORT_TRACE_OPTS_VERSION 1
#define SL_REPORT_TRACE_OPTS_INIT {SL_REPORT_TRACE_OPTS_VERSION}

/* The report of trace `t` as an HTML page in *out (free with sl_free): the pipeline as a graph, each op coloured
 * by its share of CPU and the bottleneck marked; each op's rate at its parallelism against the traced throughput;
 * traced, predicted and (with a tuned trace) measured throughput; the LP bound and the what-ifs; the analyzer's
 * table and sentences; the spec's changes. opts may be NULL for the defaults. Errors: those of sl_plan_solve
 * (e.g. SL_EINVAL for a trace without output elements or an infeasible budget), SL_EINVAL naming the first
 * difference when the tuned spec or trace is of another pipeline or is not JSON, SL_ENOMEM. */
SL_EXTERN int sl_report_trace_html(char **out, const sl_trace *t, const sl_report_trace_opts *opts);

typedef struct sl_report_prov_opts {
  int version;         /* SL_REPORT_PROV_OPTS_VERSION */
  const char *source;  /* the store's name, shown in the title (NULL: "provenance store") */
  sl_prov_model *model; /* the predictor (sl_prov_model_load): adds the pruning simulation's curve; NULL: none.
                        * The simulation sets the model's threshold, as sl_prov_simulate does. */
  size_t top;          /* pipelines in the wasted-compute chart (0: 20) */
  sl_prov *store;      /* the store g was loaded from: adds the runs sluice recorded there (sl_prov_fleet_compute);
                          NULL: none. Borrowed for the call. */
} sl_report_prov_opts;
#define SL_REPORT_PROV_OPTS_VERSION 1
#define SL_REPORT_PROV_OPTS_INIT {SL_REPORT_PROV_OPTS_VERSION}

/* The characterization of the store whose graphlets `g` holds (sl_prov_graphlets_load) as an HTML page in *out
 * (free with sl_free): graphlets per pipeline, push rate, compute by component type, wasted compute by pipeline,
 * re-processed input by execution type (sl_prov_overlap_compute), with a store the recorded sluice runs, and with a model the simulation's curve of compute saved against freshness. opts may be NULL. Errors: those of
 * the analytics (e.g. the simulation's SL_EINVAL when the model's test window holds no graphlet), SL_ENOMEM. */
SL_EXTERN int sl_report_prov_html(char **out, const sl_prov_graphlets *g, const sl_report_prov_opts *opts);

#ifdef __cplusplus
}
#endif
#endif

/* cli/cmd_prov_rq.c: `sluice prov overlap`, `prov ablation` and `prov fleet`: the production-pipeline questions beyond
 * waste (re-processed input, which feature groups predict deployment, how the recorded runs used the machine). Each
 * loads the store once through the library and prints a table or, with --json, one JSON document. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_prov_int.h"

/* ---- overlap ---- */
static json_t *overlap_row_json(const sl_prov_overlap_row *r, const char *key) {
  json_t *x = json_object();
  if (key) json_object_set_new(x, key, json_string(r->name));
  json_object_set_new(x, "executions", json_integer((json_int_t)r->executions));
  json_object_set_new(x, "with_overlap", json_integer((json_int_t)r->with_overlap));
  json_object_set_new(x, "mean_overlap", cli_prov_num(r->mean_overlap));
  json_object_set_new(x, "cost", cli_prov_num(r->cost));
  json_object_set_new(x, "recomputed_cost", cli_prov_num(r->recomputed_cost));
  json_object_set_new(x, "recomputed_share", cli_prov_num(r->cost > 0 ? r->recomputed_cost / r->cost : 0));
  json_object_set_new(x, "reusable_cost", cli_prov_num(r->reusable_cost));
  return x;
}

static void overlap_row_print(const sl_prov_overlap_row *r) {
  printf("  %-28.28s %9zu %9zu %7.1f%% %14.0f %14.0f %6.1f%% %14.0f\n", r->name, r->executions, r->with_overlap,
         100 * r->mean_overlap, r->cost, r->recomputed_cost, r->cost > 0 ? 100 * r->recomputed_cost / r->cost : 0,
         r->reusable_cost);
}

int cmd_prov_overlap(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov overlap", argc, argv, &o,
                    "usage: sluice prov overlap DB [--pipeline P] [--top N] [--json]\n\nRe-processed input: an Examples "
                    "input of a COMPLETE execution is re-processed when an earlier COMPLETE\nexecution of the same type "
                    "in the same pipeline read that same artifact as INPUT. Recomputed cost =\ncost x re-processed / all "
                    "Examples inputs (cost assumed linear in spans). Per execution type, for the\nN pipelines with the "
                    "most recomputed cost (default 20), and in total; 'reuse would save' is the\npart of it whose earlier "
                    "reader wrote Examples (a Transform whose output per span could have been kept).\n",
                    "--pipeline --top");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov overlap", o.db, o.pipeline, &p, &g)) return CLI_FAIL;
  sl_prov_overlap *ov;
  if (sl_prov_overlap_compute(&ov, g)) {
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov overlap");
  }
  size_t top = o.top > 0 && (size_t)o.top < ov->npipelines ? (size_t)o.top : ov->npipelines;
  const char *basis = sl_prov_graphlets_cost_basis(g);
  if (o.json) {
    json_t *j = json_object(), *tt = json_array(), *pp = json_array();
    for (size_t i = 0; i < ov->ntypes; i++) json_array_append_new(tt, overlap_row_json(&ov->types[i], "type"));
    for (size_t i = 0; i < top; i++) json_array_append_new(pp, overlap_row_json(&ov->pipelines[i], "pipeline"));
    json_t *tot = overlap_row_json(&ov->total, NULL);
    json_object_set_new(tot, "all_compute", cli_prov_num(ov->all_compute));
    json_object_set_new(tot, "share_of_all_compute", cli_prov_num(ov->all_compute > 0 ? ov->total.recomputed_cost / ov->all_compute : 0));
    json_object_set_new(tot, "reusable_share_of_all_compute",
                        cli_prov_num(ov->all_compute > 0 ? ov->total.reusable_cost / ov->all_compute : 0));
    json_object_set_new(j, "cost_basis", json_string(basis));
    json_object_set_new(j, "types", tt);
    json_object_set_new(j, "pipelines", pp);
    json_object_set_new(j, "total", tot);
    cli_prov_dump(j);
  } else {
    const sl_prov_overlap_row *t = &ov->total;
    printf("re-processed input: %zu of %zu executions with Examples inputs re-read spans (mean overlap %.1f%%)\n",
           t->with_overlap, t->executions, 100 * t->mean_overlap);
    printf("recomputed cost: %.0f of %.0f (%.1f%% of their cost, %.1f%% of all compute %.0f), cost basis %s\n",
           t->recomputed_cost, t->cost, t->cost > 0 ? 100 * t->recomputed_cost / t->cost : 0,
           ov->all_compute > 0 ? 100 * t->recomputed_cost / ov->all_compute : 0, ov->all_compute, basis);
    printf("reuse would save (kept per-span output of an earlier reader that wrote Examples): %.0f (%.1f%% of all "
           "compute)\n",
           t->reusable_cost, ov->all_compute > 0 ? 100 * t->reusable_cost / ov->all_compute : 0);
    const char *hdr = "  %-28s %9s %9s %8s %14s %14s %7s %14s\n";
    printf("\nby execution type\n");
    printf(hdr, "TYPE", "EXECS", "OVERLAP", "MEAN", "COST", "RECOMPUTED", "SHARE", "REUSE SAVES");
    for (size_t i = 0; i < ov->ntypes; i++) overlap_row_print(&ov->types[i]);
    printf("\ntop %zu pipelines by recomputed cost\n", top);
    printf(hdr, "PIPELINE", "EXECS", "OVERLAP", "MEAN", "COST", "RECOMPUTED", "SHARE", "REUSE SAVES");
    for (size_t i = 0; i < top; i++) overlap_row_print(&ov->pipelines[i]);
  }
  sl_prov_overlap_free(ov);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- ablation ---- */
int cmd_prov_ablation(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov ablation", argc, argv, &o,
                    "usage: sluice prov ablation DB [--seeds K] [--trees N] [--json]\n\nThe deployment predictor trained "
                    "and tested (the time-ordered split of 'prov train') on feature groups:\ninput (spans, new spans, "
                    "overlap, anomalies, schema change), history (past outcomes, push rate,\ntimes since, counts), code "
                    "(code and structure change, component count), input+history, all.\nFor each: ROC-AUC, PR-AUC and "
                    "the wasted compute saved at the largest freshness-keeping threshold,\nas mean and standard "
                    "deviation over K seeds (default 5). --trees sets the forest's size (default 100).\n",
                    "--seeds --trees");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov ablation", o.db, NULL, &p, &g)) return CLI_FAIL;
  sl_prov_ablation_opts ao = SL_PROV_ABLATION_OPTS_INIT;
  ao.seeds = (int)(o.seeds > 1000 ? 1000 : o.seeds);
  ao.train.trees = (int)(o.trees > 100000 ? 100000 : o.trees);
  sl_prov_ablation *a;
  cli_stop_on_signal("prov ablation", "nothing was written");
  rc = sl_prov_ablation_run(&a, g, &ao);
  cli_stop_on_signal(NULL, NULL);
  if (rc) {
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov ablation");
  }
  if (o.json) {
    json_t *j = json_object(), *gg = json_array();
    json_object_set_new(j, "seeds", json_integer(a->seeds));
    json_object_set_new(j, "train_graphlets", json_integer((json_int_t)a->ntrain));
    json_object_set_new(j, "test_graphlets", json_integer((json_int_t)a->ntest));
    for (size_t i = 0; i < a->ngroups; i++) {
      const sl_prov_ablation_group *r = &a->groups[i];
      json_t *x = json_object();
      json_object_set_new(x, "name", json_string(r->name));
      json_object_set_new(x, "features", json_integer((json_int_t)r->nfeatures));
      json_object_set_new(x, "roc_auc", cli_prov_num(r->roc_auc));
      json_object_set_new(x, "roc_auc_sd", cli_prov_num(r->roc_auc_sd));
      json_object_set_new(x, "pr_auc", cli_prov_num(r->pr_auc));
      json_object_set_new(x, "pr_auc_sd", cli_prov_num(r->pr_auc_sd));
      json_object_set_new(x, "saved_share", cli_prov_num(r->saved_share));
      json_object_set_new(x, "saved_share_sd", cli_prov_num(r->saved_share_sd));
      json_array_append_new(gg, x);
    }
    json_object_set_new(j, "groups", gg);
    cli_prov_dump(j);
  } else {
    printf("feature-group ablation: %zu graphlets train, %zu test (time-ordered split), %d seeds; mean +- sd\n",
           a->ntrain, a->ntest, a->seeds);
    printf("  %-14s %5s %17s %17s %22s\n", "GROUP", "FEATS", "ROC-AUC", "PR-AUC", "WASTE SAVED (FRESH)");
    for (size_t i = 0; i < a->ngroups; i++) {
      const sl_prov_ablation_group *r = &a->groups[i];
      printf("  %-14s %5zu %8.3f +- %5.3f %8.3f +- %5.3f %12.1f%% +- %5.1f\n", r->name, r->nfeatures, r->roc_auc,
             r->roc_auc_sd, r->pr_auc, r->pr_auc_sd, 100 * r->saved_share, 100 * r->saved_share_sd);
    }
    printf("features by group:");
    for (unsigned gbit = SL_PROV_FG_INPUT; gbit <= SL_PROV_FG_CODE; gbit <<= 1) {
      printf("\n  %-8s", gbit == SL_PROV_FG_INPUT ? "input" : gbit == SL_PROV_FG_HISTORY ? "history" : "code");
      for (size_t f = 0; f < sl_prov_feature_count(); f++)
        if (sl_prov_feature_group(f) == gbit) printf(" %s", sl_prov_feature_name(f));
    }
    printf("\n");
  }
  sl_prov_ablation_free(a);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- fleet ---- */
static json_t *fleet_row_json(const sl_prov_fleet_row *r) {
  json_t *x = json_object(), *ops = json_array();
  json_object_set_new(x, "pipeline", json_string(r->pipeline));
  json_object_set_new(x, "runs", json_integer((json_int_t)r->runs));
  json_object_set_new(x, "failed", json_integer((json_int_t)r->failed));
  json_object_set_new(x, "load_known", json_integer((json_int_t)r->known));
  json_object_set_new(x, "input_bound", json_integer((json_int_t)r->input_bound));
  json_object_set_new(x, "cpu_seconds", cli_prov_num(r->cpu_seconds));
  json_object_set_new(x, "elapsed", cli_prov_num(r->elapsed));
  json_object_set_new(x, "throughput", cli_prov_num(r->throughput));
  json_object_set_new(x, "bound", r->bound > 0 ? cli_prov_num(r->bound) : json_null());
  json_object_set_new(x, "headroom", r->headroom > 0 ? cli_prov_num(r->headroom) : json_null());
  for (size_t i = 0; i < r->nops; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(r->ops[i].op));
    json_object_set_new(o, "count", json_integer((json_int_t)r->ops[i].count));
    json_array_append_new(ops, o);
  }
  json_object_set_new(x, "bottlenecks", ops);
  return x;
}

static void fleet_row_print(const sl_prov_fleet_row *r) {
  char hr[32] = "-";
  if (r->headroom > 0) snprintf(hr, sizeof hr, "%.2fx", r->headroom);
  printf("  %-24.24s %6zu %6zu %5zu/%-5zu %10.1f %12.1f %9s  %s (%zu)\n", r->pipeline, r->runs, r->failed,
         r->input_bound, r->known, r->cpu_seconds, r->throughput, hr, r->nops ? r->ops[0].op : "-",
         r->nops ? r->ops[0].count : 0);
}

int cmd_prov_fleet(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov fleet", argc, argv, &o,
                    "usage: sluice prov fleet DB [--top N] [--json]\n\nThe runs sluice recorded (run/trace --record, "
                    "SLUICE_PROV) per pipeline spec and overall: runs,\nfailures, how many were input-bound (the busiest "
                    "op used >= 80% of the cores it may use), CPU spent,\nthe median throughput, the headroom (the best "
                    "throughput a recorded 'sluice optimize' of the spec\nreached, over the median run) and which ops "
                    "were the busiest how often.\n",
                    "--top");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  if (sl_prov_open(&p, o.db, 0)) return cli_fail(true, "prov fleet: cannot open %s", o.db);
  sl_prov_fleet *f;
  if (sl_prov_fleet_compute(&f, p)) {
    sl_prov_close(p);
    return cli_fail(true, "prov fleet");
  }
  size_t top = o.top > 0 && (size_t)o.top < f->npipelines ? (size_t)o.top : f->npipelines;
  if (o.json) {
    json_t *j = json_object(), *pp = json_array();
    for (size_t i = 0; i < top; i++) json_array_append_new(pp, fleet_row_json(&f->pipelines[i]));
    json_object_set_new(j, "pipelines", pp);
    json_object_set_new(j, "total", fleet_row_json(&f->all));
    cli_prov_dump(j);
  } else if (!f->all.runs && !f->all.failed && !f->npipelines) {
    printf("no recorded sluice runs in %s (record with 'sluice run SPEC --record DB')\n", cli_safe(o.db));
  } else {
    const sl_prov_fleet_row *a = &f->all;
    printf("recorded runs: %zu complete, %zu failed, over %zu pipeline specs; CPU %.1f s over %.1f s of runs\n",
           a->runs, a->failed, f->npipelines, a->cpu_seconds, a->elapsed);
    printf("input-bound (the busiest op at >= 80%% of its cores): %zu of the %zu runs that recorded its load\n",
           a->input_bound, a->known);
    if (a->headroom > 0) printf("headroom where a recorded optimize shows it (weighted by runs): %.2fx\n", a->headroom);
    printf("\n  %-24s %6s %6s %11s %10s %12s %9s  %s\n", "PIPELINE", "RUNS", "FAILED", "INPUT-BOUND", "CPU S",
           "MEDIAN EL/S", "HEADROOM", "BUSIEST OP (RUNS)");
    for (size_t i = 0; i < top; i++) fleet_row_print(&f->pipelines[i]);
    printf("\nbusiest ops over all runs\n");
    for (size_t i = 0; i < a->nops && i < 10; i++) printf("  %6zu  %s\n", a->ops[i].count, a->ops[i].op);
  }
  sl_prov_fleet_free(f);
  sl_prov_close(p);
  return CLI_OK;
}

/* cli/cmd_prov_an.c: the analytics subcommands of `sluice prov`: gen, graphlets, stats, waste, train, simulate,
 * should-train. Each loads the store once through the library and prints a terminal table or, with --json, one
 * JSON document. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_prov_int.h"


/* True when `name` is one of the space-separated words of `allowed`. */
static bool allowed_word(const char *allowed, const char *name) {
  size_t n = strlen(name);
  for (const char *w = allowed; (w = strstr(w, name)) != NULL; w += n)
    if ((w == allowed || w[-1] == ' ') && (w[n] == 0 || w[n] == ' ')) return true;
  return false;
}

int cli_prov_parse(const char *cmd, int argc, char **argv, cli_prov_opts *o, const char *usage, const char *allowed) {
  o->top = 20;
  o->threshold = -1;
#define MILLION .lo = 1, .hi = 1000000, .must = "in 1..1000000"
  const cli_opt all[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &o->json},
      {.name = "--append", .type = CLI_FLAG, .dst = &o->append},
      {.name = "--pipeline", .type = CLI_STR, .dst = &o->pipeline},
      {.name = "--model", .type = CLI_STR, .dst = &o->model},
      {.name = "-o", .type = CLI_STR, .dst = &o->out},
      {.name = "--top", .type = CLI_INT, .dst = &o->top, .lo = 0, .hi = (double)INT64_MAX, .must = "0 (all) or more",
       .given = &o->top_given},
      /* the generator states its own ranges (sl_prov_gen); these keep a value from wrapping in its int */
      {.name = "--pipelines", .type = CLI_INT, .dst = &o->pipelines, .lo = 1, .hi = INT_MAX, .must = "a positive int"},
      {.name = "--days", .type = CLI_INT, .dst = &o->days, .lo = 1, .hi = INT_MAX, .must = "a positive int"},
      {.name = "--seed", .type = CLI_INT, .dst = &o->seed},
      {.name = "--at", .type = CLI_INT, .dst = &o->at},
      {.name = "--seeds", .type = CLI_INT, .dst = &o->seeds, MILLION},
      {.name = "--trees", .type = CLI_INT, .dst = &o->trees, MILLION},
      {.name = "--depth", .type = CLI_INT, .dst = &o->depth, MILLION},
      {.name = "--threshold", .type = CLI_NUM, .dst = &o->threshold, .lo = 0, .hi = 1, .must = "a probability in 0..1"},
      {.name = "--train-share", .type = CLI_NUM, .dst = &o->share},
  };
#undef MILLION
  enum { NALL = sizeof all / sizeof all[0] };
  cli_opt opts[NALL + 1];
  size_t n = 0;
  for (size_t i = 0; i < NALL; i++) /* --json everywhere; the rest as the subcommand allows */
    if (i == 0 || allowed_word(allowed, all[i].name)) opts[n++] = all[i];
  opts[n] = (cli_opt){.name = NULL};
  const cli_args args = {.cmd = cmd, .opts = opts, .usage = usage, .pos = &o->db, .npos = 1, .noun = "DB"};
  int rc = cli_parse(&args, argc, argv);
  if (rc) return rc;
  if (!o->db) return cli_usage(cmd, "DB is required");
  return 0;
}

void cli_prov_dump(json_t *j) {
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
  if (s) {
    puts(s);
    free(s);
  }
  json_decref(j);
}

json_t *cli_prov_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int cli_prov_load(const char *cmd, const char *db, const char *pipeline, sl_prov **p, sl_prov_graphlets **g) {
  if (sl_prov_open(p, db, 0)) return cli_fail(true, "%s: cannot open %s", cmd, db);
  double t0 = cli_now();
  if (sl_prov_graphlets_load(g, *p, pipeline)) {
    sl_prov_close(*p);
    return cli_fail(true, "%s", cmd);
  }
  if (getenv("SLUICE_PROV_TIMING"))
    fprintf(stderr, "%s: loaded %zu graphlets in %.2f s\n", cmd, sl_prov_graphlets_count(*g), cli_now() - t0);
  return 0;
}

static void fmt_day(int64_t ms, char *b, size_t n) {
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(b, n, "%Y-%m-%d %H:%M", &tm);
}

/* ---- gen ---- */
static void gen_progress(int done, int total, void *payload) {
  cli_progress *pr = payload;
  cli_progress_update(pr, done, "pipelines");
  (void)total;
}

int cmd_prov_gen(int argc, char **argv) {
  cli_prov_opts o = {0};
  o.pipelines = 50;
  o.days = 120;
  o.seed = 1;
  int rc = cli_prov_parse("prov gen", argc, argv, &o,
                 "usage: sluice prov gen DB [--pipelines N] [--days D] [--seed S] [--append] [--json]\n\nWrites a "
                 "synthetic corpus of TFX production pipelines into an MLMD store (created when missing),\ncalibrated to "
                 "the published characterization (docs/corpus.md lists every assumption). Deterministic for a seed.\n"
                 "Defaults: 50 pipelines, 120 days, seed 1. The paper's scale is --pipelines 3000 --days 120.\n"
                 "A store that has data is refused unless --append (which adds a second corpus beside it, named\n"
                 "pNNNN-DOMAIN.sSEED where the plain names are taken; refused when those are taken too).\n"
                 "One transaction per pipeline: Ctrl-C (SIGTERM) stops before the next one, keeps the pipelines\n"
                 "written and exits with 130 (143).\n",
                 "--pipelines --days --seed --append");
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (o.pipelines < 0 || o.pipelines > INT_MAX || o.days < 0 || o.days > INT_MAX) /* never truncated to int */
    return cli_usage("prov gen", "--pipelines must be in 1..1000000 and --days in 1..3650, not %lld and %lld",
                     (long long)o.pipelines, (long long)o.days);
  sl_prov *p;
  if (sl_prov_open(&p, o.db, SL_PROV_CREATE)) return cli_fail(true, "prov gen: cannot open %s", o.db);
  if (!o.append) { /* a second corpus under the same names is seldom what was meant */
    sl_prov_query q = {.limit = 1};
    sl_prov_list *l = NULL;
    size_t have = 0;
    for (int k = 0; k < 2 && !have; k++) {
      if (sl_prov_find(&l, p, k ? SL_PROV_ARTIFACT : SL_PROV_EXECUTION, &q)) {
        sl_prov_close(p);
        return cli_fail(true, "prov gen: cannot read %s", o.db);
      }
      have = l->n;
      sl_prov_list_free(l);
    }
    if (have) {
      sl_prov_close(p);
      return cli_fail(false, "prov gen: the store %s already has data; --append adds the corpus to it", o.db);
    }
  }
  sl_prov_gen_opts go = SL_PROV_GEN_OPTS_INIT;
  go.pipelines = (int)o.pipelines;
  go.days = (int)o.days;
  go.seed = (uint64_t)o.seed;
  cli_progress pr;
  cli_progress_start(&pr, "generating", o.pipelines);
  go.progress = gen_progress;
  go.payload = &pr;
  cli_signals_install(); /* the generator stops between pipelines, each written whole */
  go.cancel = cli_signal_flag();
  sl_prov_gen_report rep;
  double t0 = cli_now();
  rc = sl_prov_gen(&rep, p, &go);
  cli_progress_end(&pr);
  sl_prov_close(p);
  int sig = cli_signal_seen();
  if (rc == SL_ECANCELED && sig) {
    fprintf(stderr, "sluice prov gen: %s; %s in %s\n", sig == SIGTERM ? "terminated" : "interrupted", cli_safe(sl_error_last()),
            cli_safe(o.db));
    return 128 + sig;
  }
  if (rc) return cli_fail(true, "prov gen");
  double el = cli_now() - t0;
  static const char *CAUSE[6] = {"trainer failure", "no new data", "data drift", "structure change", "code change",
                                 "other (propensity, infra, push)"};
  int64_t np = rep.runs - rep.pushed;
  if (o.json) {
    json_t *j = json_object(), *c = json_object();
    json_object_set_new(j, "pipelines", json_integer(rep.pipelines));
    json_object_set_new(j, "runs", json_integer(rep.runs));
    json_object_set_new(j, "executions", json_integer(rep.executions));
    json_object_set_new(j, "artifacts", json_integer(rep.artifacts));
    json_object_set_new(j, "events", json_integer(rep.events));
    json_object_set_new(j, "pushed", json_integer(rep.pushed));
    for (int i = 0; i < 6; i++) json_object_set_new(c, CAUSE[i], json_integer(rep.cause[i]));
    json_object_set_new(j, "non_push_causes", c);
    json_object_set_new(j, "seconds", json_real(el));
    cli_prov_dump(j);
  } else {
    printf("generated %lld pipelines, %lld runs (models), %lld executions, %lld artifacts, %lld events in %.1f s\n",
           (long long)rep.pipelines, (long long)rep.runs, (long long)rep.executions, (long long)rep.artifacts,
           (long long)rep.events, el);
    printf("pushed %lld (%.1f%%); not pushed %lld (%.1f%%), by cause:\n", (long long)rep.pushed,
           rep.runs ? 100.0 * (double)rep.pushed / (double)rep.runs : 0, (long long)np,
           rep.runs ? 100.0 * (double)np / (double)rep.runs : 0);
    for (int i = 0; i < 6; i++)
      printf("  %-34s %8lld  %5.1f%%\n", CAUSE[i], (long long)rep.cause[i],
             np ? 100.0 * (double)rep.cause[i] / (double)np : 0);
  }
  return CLI_OK;
}

/* ---- graphlets ---- */
int cmd_prov_graphlets(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov graphlets", argc, argv, &o,
                 "usage: sluice prov graphlets DB [--pipeline P] [--top N] [--json]\n\nThe model graphlets: one per "
                 "trainer execution, with its upstream and downstream executions, input spans,\noutcome (pushed or "
                 "not) and cost. The table shows the first N (--top, default 20, 0 for all); --json lists every one,\n"
                 "or the first N when --top N is given.\n",
                 "--pipeline --top");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov graphlets", o.db, o.pipeline, &p, &g)) return CLI_FAIL;
  size_t n = sl_prov_graphlets_count(g), pushed = 0;
  double cost = 0;
  for (size_t i = 0; i < n; i++) pushed += sl_prov_graphlets_at(g, i)->pushed, cost += sl_prov_graphlets_at(g, i)->cost;
  const char *basis = sl_prov_graphlets_cost_basis(g);
  if (o.json) {
    json_t *j = json_object(), *a = json_array();
    json_object_set_new(j, "graphlets", a);
    json_object_set_new(j, "count", json_integer((json_int_t)n));
    json_object_set_new(j, "pushed", json_integer((json_int_t)pushed));
    json_object_set_new(j, "cost_basis", json_string(basis));
    /* every graphlet, or the first N when --top N is given ("count" stays the total) */
    size_t lim = o.top_given && o.top > 0 && (size_t)o.top < n ? (size_t)o.top : n;
    for (size_t i = 0; i < lim; i++) {
      const sl_prov_graphlet *x = sl_prov_graphlets_at(g, i);
      json_t *o1 = json_object(), *up = json_array(), *down = json_array(), *sp = json_array();
      json_object_set_new(o1, "trainer", json_integer(x->trainer_id));
      json_object_set_new(o1, "pipeline", json_string(x->pipeline));
      json_object_set_new(o1, "start_ms", json_integer(x->start_ms));
      json_object_set_new(o1, "outcome_ms", json_integer(x->outcome_ms));
      json_object_set_new(o1, "trainer_state", json_string(sl_prov_state_name(SL_PROV_EXECUTION, x->trainer_state)));
      json_object_set_new(o1, "pushed", json_boolean(x->pushed));
      json_object_set_new(o1, "has_pusher", json_boolean(x->has_pusher));
      json_object_set_new(o1, "cost", cli_prov_num(x->cost));
      json_object_set_new(o1, "prunable_cost", cli_prov_num(x->prunable));
      for (size_t k = 0; k < x->nupstream; k++) json_array_append_new(up, json_integer(x->upstream[k]));
      for (size_t k = 0; k < x->ndownstream; k++) json_array_append_new(down, json_integer(x->downstream[k]));
      for (size_t k = 0; k < x->nspans; k++) json_array_append_new(sp, json_integer(x->spans[k]));
      json_object_set_new(o1, "upstream", up);
      json_object_set_new(o1, "downstream", down);
      json_object_set_new(o1, "spans", sp);
      json_array_append_new(a, o1);
    }
    cli_prov_dump(j);
  } else {
    printf("%-9s %-22s %-16s %-9s %4s %5s %-12s %-7s %12s\n", "TRAINER", "PIPELINE", "START (UTC)", "STATE", "UP",
           "DOWN", "SPANS", "PUSHED", "COST");
    size_t lim = o.top > 0 && (size_t)o.top < n ? (size_t)o.top : n;
    for (size_t i = 0; i < lim; i++) {
      const sl_prov_graphlet *x = sl_prov_graphlets_at(g, i);
      char t[32], spans[32];
      fmt_day(x->start_ms, t, sizeof t);
      if (x->nspans)
        snprintf(spans, sizeof spans, x->nspans > 1 ? "%lld..%lld" : "%lld", (long long)x->spans[0],
                 (long long)x->spans[x->nspans - 1]);
      else
        snprintf(spans, sizeof spans, "-");
      printf("%-9lld %-22.22s %-16s %-9s %4zu %5zu %-12s %-7s %12.0f\n", (long long)x->trainer_id, x->pipeline, t,
             sl_prov_state_name(SL_PROV_EXECUTION, x->trainer_state), x->nupstream, x->ndownstream, spans,
             x->pushed ? "yes" : x->has_pusher ? "no" : "no (none)", x->cost);
    }
    if (lim < n) printf("... %zu more (--top 0 shows all)\n", n - lim);
    printf("%zu graphlets, %zu pushed (%.1f%%); cost basis: %s; total graphlet cost %.0f\n", n, pushed,
           n ? 100.0 * (double)pushed / (double)n : 0, basis, cost);
  }
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- stats ---- */
/* The store's span, given in days, in the unit that reads best. */
static const char *span_text(char *b, size_t n, double days) {
  double sec = days * 86400.0;
  if (!(sec >= 0)) snprintf(b, n, "?");
  else if (sec < 120) snprintf(b, n, "%.0f seconds", sec);
  else if (days < 2.0 / 24) snprintf(b, n, "%.1f minutes", sec / 60);
  else if (days < 2) snprintf(b, n, "%.1f hours", sec / 3600);
  else snprintf(b, n, "%.1f days", days);
  return b;
}

int cmd_prov_stats(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov stats", argc, argv, &o,
                 "usage: sluice prov stats DB [--json]\n\nCharacterizes the store's pipelines: lifespans, graphlets per "
                 "pipeline, runs per day, push rate,\ncompute by component type and the common topologies "
                 "(component sets of graphlets).\n",
                 "");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov stats", o.db, NULL, &p, &g)) return CLI_FAIL;
  sl_prov_stats *s;
  if (sl_prov_stats_compute(&s, g)) {
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov stats");
  }
  const char *basis = sl_prov_graphlets_cost_basis(g);
  if (o.json) {
    json_t *j = json_object(), *life = json_object(), *gpp = json_object(), *comp = json_array(), *top = json_array();
    json_object_set_new(j, "pipelines", json_integer((json_int_t)s->pipelines));
    json_object_set_new(j, "graphlets", json_integer((json_int_t)s->graphlets));
    json_object_set_new(j, "executions", json_integer((json_int_t)s->executions));
    json_object_set_new(j, "artifacts", json_integer((json_int_t)s->artifacts));
    json_object_set_new(j, "days", cli_prov_num(s->days));
    const char *lq[5] = {"min", "p25", "median", "p75", "max"};
    for (int i = 0; i < 5; i++) json_object_set_new(life, lq[i], cli_prov_num(s->lifespan_days[i]));
    json_object_set_new(j, "lifespan_days", life);
    const char *gq[7] = {"min", "p25", "median", "p75", "p90", "max", "mean"};
    for (int i = 0; i < 7; i++) json_object_set_new(gpp, gq[i], cli_prov_num(s->graphlets_per_pipeline[i]));
    json_object_set_new(j, "graphlets_per_pipeline", gpp);
    json_object_set_new(j, "runs_per_day", cli_prov_num(s->runs_per_day));
    json_object_set_new(j, "graphlets_per_day", cli_prov_num(s->graphlets_per_day));
    json_object_set_new(j, "push_rate", cli_prov_num(s->push_rate));
    json_object_set_new(j, "failed_trainers", cli_prov_num(s->failed_trainers));
    json_object_set_new(j, "cost_basis", json_string(basis));
    json_object_set_new(j, "total_compute", cli_prov_num(s->total_compute));
    for (size_t i = 0; i < s->ncompute; i++) {
      json_t *c = json_object();
      json_object_set_new(c, "component", json_string(s->compute[i].name));
      json_object_set_new(c, "compute", cli_prov_num(s->compute[i].total));
      json_object_set_new(c, "share", cli_prov_num(s->total_compute > 0 ? s->compute[i].total / s->total_compute : 0));
      json_array_append_new(comp, c);
    }
    json_object_set_new(j, "compute_by_component", comp);
    for (size_t i = 0; i < s->ntopologies; i++) {
      json_t *c = json_object();
      json_object_set_new(c, "components", json_string(s->topologies[i].components));
      json_object_set_new(c, "graphlets", json_integer((json_int_t)s->topologies[i].count));
      json_array_append_new(top, c);
    }
    json_object_set_new(j, "topologies", top);
    cli_prov_dump(j);
  } else {
    char span[32];
    printf("pipelines             %zu\ngraphlets (models)    %zu\nexecutions            %zu\nartifacts             "
           "%zu\nspan of the store     %s\n",
           s->pipelines, s->graphlets, s->executions, s->artifacts, span_text(span, sizeof span, s->days));
    /* Lifespans in the unit of the store's span: minutes read as minutes, not as 0.0 days. */
    double unit = s->days >= 2 ? 1 : s->days >= 2.0 / 24 ? 1.0 / 24 : 1.0 / 1440;
    const char *uname = unit == 1 ? "days" : unit > 1.0 / 1440 ? "hours" : "minutes";
    printf("lifespan (%s)%*s min %.1f  p25 %.1f  median %.1f  p75 %.1f  max %.1f\n", uname, (int)(10 - strlen(uname)),
           "", s->lifespan_days[0] / unit, s->lifespan_days[1] / unit, s->lifespan_days[2] / unit,
           s->lifespan_days[3] / unit, s->lifespan_days[4] / unit);
    printf("graphlets / pipeline  min %.0f  p25 %.0f  median %.0f  p75 %.0f  p90 %.0f  max %.0f  mean %.1f\n",
           s->graphlets_per_pipeline[0], s->graphlets_per_pipeline[1], s->graphlets_per_pipeline[2],
           s->graphlets_per_pipeline[3], s->graphlets_per_pipeline[4], s->graphlets_per_pipeline[5],
           s->graphlets_per_pipeline[6]);
    if (isnan(s->runs_per_day))
      printf("runs / pipeline       %.1f (mean) in %s; %zu graphlets over all pipelines (under a day: no daily rate)\n",
             s->graphlets_per_pipeline[6], span, s->graphlets);
    else
      printf("runs / pipeline / day %.2f (mean over pipelines); %.0f graphlets / day over all pipelines\n",
             s->runs_per_day, s->graphlets_per_day);
    printf("push rate             %.1f%% (%.1f%% of graphlets do not push)\nfailed trainers       %.1f%%\n",
           100 * s->push_rate, 100 * (1 - s->push_rate), 100 * s->failed_trainers);
    printf("\ncompute by component (%s)\n  %-22s %14s %7s\n", basis, "COMPONENT", "COMPUTE", "SHARE");
    for (size_t i = 0; i < s->ncompute; i++)
      printf("  %-22s %14.0f %6.1f%%\n", s->compute[i].name, s->compute[i].total,
             s->total_compute > 0 ? 100 * s->compute[i].total / s->total_compute : 0);
    printf("\ncommon topologies (component sets of graphlets)\n  %8s %7s  %s\n", "GRAPHLETS", "SHARE", "COMPONENTS");
    for (size_t i = 0; i < s->ntopologies && i < 10; i++)
      printf("  %8zu %6.1f%%  %s\n", s->topologies[i].count,
             s->graphlets ? 100.0 * (double)s->topologies[i].count / (double)s->graphlets : 0,
             s->topologies[i].components);
  }
  sl_prov_stats_free(s);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- waste ---- */
/* A cost for the tables: whole units when large, three significant digits when small (sluice's own runs cost
 * milliseconds of CPU: "0 of 0 (100.0%)" said nothing). */
static const char *cost_s(char buf[32], double v) {
  snprintf(buf, 32, fabs(v) >= 100 || v == 0 ? "%.0f" : "%.3g", v);
  return buf;
}

int cmd_prov_waste(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov waste", argc, argv, &o,
                 "usage: sluice prov waste DB [--top N] [--json]\n\nWasted computation: the cost of every execution "
                 "none of whose graphlets pushed a model,\noverall, for the N most wasteful pipelines, and per "
                 "component type.\n",
                 "--top");
  if (rc) return rc < 0 ? CLI_OK : rc;
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov waste", o.db, NULL, &p, &g)) return CLI_FAIL;
  sl_prov_waste *w;
  if (sl_prov_waste_compute(&w, g)) {
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov waste");
  }
  const char *basis = sl_prov_graphlets_cost_basis(g);
  size_t top = o.top > 0 && (size_t)o.top < w->npipelines ? (size_t)o.top : w->npipelines;
  if (o.json) {
    json_t *j = json_object(), *pp = json_array(), *cc = json_array();
    json_object_set_new(j, "cost_basis", json_string(basis));
    json_object_set_new(j, "total", cli_prov_num(w->total));
    json_object_set_new(j, "wasted", cli_prov_num(w->wasted));
    json_object_set_new(j, "wasted_share", cli_prov_num(w->total > 0 ? w->wasted / w->total : 0));
    json_object_set_new(j, "in_no_graphlet", cli_prov_num(w->unattributed));
    for (size_t i = 0; i < top; i++) {
      json_t *x = json_object();
      json_object_set_new(x, "pipeline", json_string(w->pipelines[i].name));
      json_object_set_new(x, "total", cli_prov_num(w->pipelines[i].total));
      json_object_set_new(x, "wasted", cli_prov_num(w->pipelines[i].wasted));
      json_array_append_new(pp, x);
    }
    for (size_t i = 0; i < w->ncomponents; i++) {
      json_t *x = json_object();
      json_object_set_new(x, "component", json_string(w->components[i].name));
      json_object_set_new(x, "total", cli_prov_num(w->components[i].total));
      json_object_set_new(x, "wasted", cli_prov_num(w->components[i].wasted));
      json_array_append_new(cc, x);
    }
    json_object_set_new(j, "pipelines", pp);
    json_object_set_new(j, "components", cc);
    cli_prov_dump(j);
  } else {
    char a[32], b[32];
    printf("wasted compute: %s of %s (%.1f%%), cost basis %s\n", cost_s(a, w->wasted), cost_s(b, w->total),
           w->total > 0 ? 100 * w->wasted / w->total : 0, basis);
    printf("  of which in no graphlet: %s (%.1f%% of all compute)\n", cost_s(a, w->unattributed),
           w->total > 0 ? 100 * w->unattributed / w->total : 0);
    printf("\ntop %zu pipelines by wasted compute\n  %-28s %14s %14s %7s\n", top, "PIPELINE", "WASTED", "TOTAL",
           "SHARE");
    for (size_t i = 0; i < top; i++)
      printf("  %-28.28s %14s %14s %6.1f%%\n", w->pipelines[i].name, cost_s(a, w->pipelines[i].wasted),
             cost_s(b, w->pipelines[i].total),
             w->pipelines[i].total > 0 ? 100 * w->pipelines[i].wasted / w->pipelines[i].total : 0);
    printf("\nby component type\n  %-28s %14s %14s %7s\n", "COMPONENT", "WASTED", "TOTAL", "SHARE");
    for (size_t i = 0; i < w->ncomponents; i++)
      printf("  %-28.28s %14s %14s %6.1f%%\n", w->components[i].name, cost_s(a, w->components[i].wasted),
             cost_s(b, w->components[i].total),
             w->components[i].total > 0 ? 100 * w->components[i].wasted / w->components[i].total : 0);
  }
  sl_prov_waste_free(w);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- train ---- */
int cmd_prov_train(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov train", argc, argv, &o,
                 "usage: sluice prov train DB -o MODEL.json [--train-share F] [--trees N] [--depth D] [--seed S] "
                 "[--json]\n\nTrains the deployment predictor: an XGBoost random forest (one round of N parallel "
                 "trees, row subsample 0.63,\ncolumn subsample 0.6 per node) on features from before each decision "
                 "point. The earliest share of\ngraphlets (default 0.7) trains, the later ones test: never shuffled "
                 "across time. Prints ROC-AUC, PR-AUC\nand feature importances; the model file records the features and "
                 "the training window.\n",
                 "-o --train-share --trees --depth --seed");
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!o.out) return cli_usage("prov train", "-o MODEL.json is required");
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov train", o.db, NULL, &p, &g)) return CLI_FAIL;
  sl_prov_train_opts to = SL_PROV_TRAIN_OPTS_INIT;
  if (o.share > 0) to.train_share = o.share;
  if (o.trees > 0) to.trees = (int)o.trees;
  if (o.depth > 0) to.max_depth = (int)o.depth;
  if (o.seed) to.seed = (uint64_t)o.seed;
  sl_prov_model *m;
  sl_prov_train_report r;
  double t0 = cli_now();
  if (sl_prov_train(&m, &r, g, &to)) {
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov train");
  }
  double el = cli_now() - t0;
  /* The model's default threshold: the simulation's best on the test window. */
  sl_prov_sim *sim = NULL;
  if (sl_prov_simulate(&sim, g, m) == 0) sl_prov_sim_free(sim);
  rc = sl_prov_model_save(m, o.out);
  if (rc) {
    cli_fail(true, "prov train");
  } else if (o.json) {
    json_t *j = json_object(), *imp = json_object();
    json_object_set_new(j, "model", json_string(o.out));
    json_object_set_new(j, "train_graphlets", json_integer((json_int_t)r.ntrain));
    json_object_set_new(j, "test_graphlets", json_integer((json_int_t)r.ntest));
    json_object_set_new(j, "train_from_ms", json_integer(r.train_from_ms));
    json_object_set_new(j, "train_to_ms", json_integer(r.train_to_ms));
    json_object_set_new(j, "test_from_ms", json_integer(r.test_from_ms));
    json_object_set_new(j, "test_to_ms", json_integer(r.test_to_ms));
    json_object_set_new(j, "train_push_rate", cli_prov_num(r.train_push_rate));
    json_object_set_new(j, "test_push_rate", cli_prov_num(r.test_push_rate));
    json_object_set_new(j, "roc_auc", cli_prov_num(r.roc_auc));
    json_object_set_new(j, "pr_auc", cli_prov_num(r.pr_auc));
    json_object_set_new(j, "threshold", cli_prov_num(sl_prov_model_threshold(m)));
    json_object_set_new(j, "seconds", cli_prov_num(el));
    for (size_t i = 0; i < sl_prov_feature_count(); i++)
      json_object_set_new(imp, sl_prov_feature_name(i), cli_prov_num(r.importance[i]));
    json_object_set_new(j, "importance", imp);
    cli_prov_dump(j);
  } else {
    char a[32], b[32], c[32], d[32];
    fmt_day(r.train_from_ms, a, sizeof a);
    fmt_day(r.train_to_ms, b, sizeof b);
    fmt_day(r.test_from_ms, c, sizeof c);
    fmt_day(r.test_to_ms, d, sizeof d);
    printf("train: %zu graphlets, %s .. %s, push rate %.1f%%\n", r.ntrain, a, b, 100 * r.train_push_rate);
    printf("test:  %zu graphlets, %s .. %s, push rate %.1f%%\n", r.ntest, c, d, 100 * r.test_push_rate);
    printf("ROC-AUC %.4f   PR-AUC %.4f   (%.1f s)\n", r.roc_auc, r.pr_auc, el);
    printf("\nfeature importance (total gain)\n");
    for (size_t i = 0; i < sl_prov_feature_count(); i++)
      printf("  %-20s %6.1f%%\n", sl_prov_feature_name(i), 100 * r.importance[i]);
    printf("\nmodel written to %s (threshold %.2f)\n", o.out, sl_prov_model_threshold(m));
  }
  sl_prov_train_report_dispose(&r);
  sl_prov_model_free(m);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return rc ? CLI_FAIL : CLI_OK;
}

/* ---- simulate ---- */
static json_t *row_json(const sl_prov_sim_row *r) {
  json_t *x = json_object();
  json_object_set_new(x, "threshold", cli_prov_num(r->threshold));
  json_object_set_new(x, "pruned", json_integer((json_int_t)r->pruned));
  json_object_set_new(x, "saved_waste", cli_prov_num(r->saved_waste));
  json_object_set_new(x, "saved_share", cli_prov_num(r->saved_share));
  json_object_set_new(x, "lost_compute", cli_prov_num(r->lost_compute));
  json_object_set_new(x, "push_recall", cli_prov_num(r->push_recall));
  json_object_set_new(x, "cadence", cli_prov_num(r->cadence));
  json_object_set_new(x, "staleness_ratio", cli_prov_num(r->staleness_ratio));
  json_object_set_new(x, "fresh", json_boolean(r->fresh));
  return x;
}

static void print_rows(const sl_prov_sim_row *rows, size_t n, int best, int best99) {
  printf("  %5s %8s %14s %7s %8s %8s %9s %s\n", "THRESH", "PRUNED", "WASTE SAVED", "SHARE", "RECALL", "CADENCE",
         "STALENESS", "");
  for (size_t i = 0; i < n; i++) {
    const sl_prov_sim_row *r = &rows[i];
    bool show = (i % 5 == 0) || (int)i == best || (int)i == best99;
    if (!show) continue;
    printf("  %5.2f %8zu %14.0f %6.1f%% %7.2f%% %7.2f%% %8.3fx %s%s\n", r->threshold, r->pruned, r->saved_waste,
           100 * r->saved_share, 100 * r->push_recall, 100 * r->cadence, r->staleness_ratio,
           r->fresh ? "fresh" : "STALE",
           (int)i == best ? "  <== largest saving that keeps freshness"
           : (int)i == best99 ? "  <== largest saving keeping freshness and 99% push recall" : "");
  }
}

int cmd_prov_simulate(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov simulate", argc, argv, &o,
                 "usage: sluice prov simulate DB --model MODEL.json [--json]\n\nReplays the model's test window: for "
                 "thresholds 0.00..0.99 on P(push), prunes graphlets below it\n(skipping the trainer and everything "
                 "downstream) and reports the wasted compute saved and freshness:\npush recall, cadence (pipeline-days "
                 "with a push kept) and staleness (age of the newest pushed model\nrelative to the baseline). Fresh = "
                 "cadence >= 99% and staleness within 5%. Where the corpus\nrecords true push probabilities, the same "
                 "sweep by the truth is the ceiling.\n",
                 "--model");
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!o.model) return cli_usage("prov simulate", "--model MODEL.json is required");
  sl_prov_model *m;
  if (sl_prov_model_load(&m, o.model)) return cli_fail(true, "prov simulate");
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov simulate", o.db, NULL, &p, &g)) {
    sl_prov_model_free(m);
    return CLI_FAIL;
  }
  sl_prov_sim *s;
  if (sl_prov_simulate(&s, g, m)) {
    sl_prov_model_free(m);
    sl_prov_graphlets_free(g);
    sl_prov_close(p);
    return cli_fail(true, "prov simulate");
  }
  if (o.json) {
    json_t *j = json_object(), *rows = json_array();
    json_object_set_new(j, "graphlets", json_integer((json_int_t)s->ngraphlets));
    json_object_set_new(j, "pushes", json_integer((json_int_t)s->npushes));
    json_object_set_new(j, "window_waste", cli_prov_num(s->window_waste));
    json_object_set_new(j, "prunable_waste", cli_prov_num(s->prunable_waste));
    json_object_set_new(j, "cost_basis", json_string(sl_prov_graphlets_cost_basis(g)));
    for (size_t i = 0; i < s->nrows; i++) json_array_append_new(rows, row_json(&s->rows[i]));
    json_object_set_new(j, "rows", rows);
    json_object_set_new(j, "best", s->best >= 0 ? row_json(&s->rows[s->best]) : json_null());
    json_object_set_new(j, "best_recall99", s->best_recall99 >= 0 ? row_json(&s->rows[s->best_recall99]) : json_null());
    if (s->has_truth) {
      json_t *t = json_array();
      for (size_t i = 0; i < s->ntruth; i++) json_array_append_new(t, row_json(&s->truth_rows[i]));
      json_object_set_new(j, "ceiling_rows", t);
      json_object_set_new(j, "ceiling_best", s->truth_best >= 0 ? row_json(&s->truth_rows[s->truth_best]) : json_null());
      json_object_set_new(j, "ceiling_best_recall99",
                          s->truth_best_recall99 >= 0 ? row_json(&s->truth_rows[s->truth_best_recall99]) : json_null());
    }
    cli_prov_dump(j);
  } else {
    printf("test window: %zu graphlets, %zu pushes; wasted compute %.0f (%s), of which pruning can reach %.0f "
           "(%.1f%%)\n\npredictor:\n",
           s->ngraphlets, s->npushes, s->window_waste, sl_prov_graphlets_cost_basis(g), s->prunable_waste,
           s->window_waste > 0 ? 100 * s->prunable_waste / s->window_waste : 0);
    print_rows(s->rows, s->nrows, s->best, s->best_recall99);
    const int bests[2] = {s->best, s->best_recall99};
    for (int b = 0; b < 2; b++) {
      if (bests[b] < 0) {
        printf("=> no threshold above 0 keeps freshness%s\n", b ? " and 99%% push recall" : "");
        continue;
      }
      const sl_prov_sim_row *r = &s->rows[bests[b]];
      printf("=> %s: threshold %.2f prunes %.1f%% of wasted compute; push recall %.2f%%, cadence %.2f%%, staleness "
             "%.3fx\n",
             b ? "keeping freshness and 99% push recall" : "keeping freshness", r->threshold, 100 * r->saved_share,
             100 * r->push_recall, 100 * r->cadence, r->staleness_ratio);
    }
    /* Where freshness collapses: the first threshold past which cadence falls under 95%. */
    for (size_t i = 0; i < s->nrows; i++)
      if (s->rows[i].cadence < 0.95) {
        printf("=> freshness collapses from threshold %.2f (%.1f%% of waste pruned): cadence %.1f%%, recall %.1f%%\n",
               s->rows[i].threshold, 100 * s->rows[i].saved_share, 100 * s->rows[i].cadence,
               100 * s->rows[i].push_recall);
        break;
      }
    if (s->has_truth) {
      printf("\nceiling (pruning by the corpus's true push probability):\n");
      print_rows(s->truth_rows, s->ntruth, s->truth_best, s->truth_best_recall99);
      if (s->truth_best >= 0)
        printf("=> the ceiling prunes %.1f%% of wasted compute at threshold %.2f keeping freshness\n",
               100 * s->truth_rows[s->truth_best].saved_share, s->truth_rows[s->truth_best].threshold);
    }
  }
  sl_prov_sim_free(s);
  sl_prov_model_free(m);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- should-train ---- */
int cmd_prov_should_train(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov should-train", argc, argv, &o,
                 "usage: sluice prov should-train DB --pipeline P [--model MODEL.json] [--threshold T] [--at MS] "
                 "[--json]\n\nFor the pipeline's next run: P(push) from the model (or, without one, the pipeline's "
                 "smoothed push\nrate among runs alike in having new data) and the decision. Exit code 0: train; 10: "
                 "skip.\nThe threshold defaults to the model's (the simulation's best), or 0.1 without a model. A pipeline that "
                 "has\nrun but never trained yet trains (P(push) unknown: null in --json).\n",
                 "--pipeline --model --threshold --at");
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!o.pipeline) return cli_usage("prov should-train", "--pipeline P is required");
  sl_prov_model *m = NULL;
  if (o.model && sl_prov_model_load(&m, o.model)) return cli_fail(true, "prov should-train");
  sl_prov *p;
  if (sl_prov_open(&p, o.db, 0)) {
    sl_prov_model_free(m);
    return cli_fail(true, "prov should-train: cannot open %s", o.db);
  }
  sl_prov_decision d;
  rc = sl_prov_should_train(&d, p, o.pipeline, m, o.threshold, o.at);
  sl_prov_close(p);
  sl_prov_model_free(m);
  if (rc) return cli_fail(true, "prov should-train");
  if (o.json) {
    json_t *j = json_object(), *f = json_object();
    json_object_set_new(j, "pipeline", json_string(o.pipeline));
    json_object_set_new(j, "p_push", cli_prov_num(d.p_push));
    json_object_set_new(j, "threshold", cli_prov_num(d.threshold));
    json_object_set_new(j, "decision", json_string(d.train ? "train" : "skip"));
    json_object_set_new(j, "predictor", json_string(o.model ? "model" : "push-rate"));
    for (size_t i = 0; i < sl_prov_feature_count(); i++) json_object_set_new(f, sl_prov_feature_name(i), cli_prov_num(d.features[i]));
    json_object_set_new(j, "features", f);
    cli_prov_dump(j);
  } else {
    if (isnan(d.p_push))
      printf("%s: no graphlet yet (the pipeline has never trained) => TRAIN\n", o.pipeline);
    else
      printf("%s: P(push) = %.3f, threshold %.3f => %s\n", o.pipeline, d.p_push, d.threshold,
             d.train ? "TRAIN" : "SKIP");
  }
  bool train = d.train;
  sl_free(d.features);
  return train ? CLI_OK : 10;
}

/* ---- report ---- */
int cmd_prov_report(int argc, char **argv) {
  cli_prov_opts o = {0};
  int rc = cli_prov_parse("prov report", argc, argv, &o,
                 "usage: sluice prov report DB [-o REPORT.html] [--model MODEL.json] [--top N]\n\nWrites the store's "
                 "characterization as one self-contained HTML page (inline SVG and CSS; no script,\nnothing loaded "
                 "from the network): graphlets per pipeline, push rate, compute by component type, wasted\ncompute by "
                 "pipeline (the N that wasted most, default 20) and, with a model from 'sluice prov train',\nthe "
                 "pruning simulation's curve of compute saved against freshness. The figures are those of\n'sluice "
                 "prov stats', 'waste' and 'simulate'. Without -o the page goes to stdout.\n",
                 "-o --model --top");
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (o.top <= 0) return cli_usage("prov report", "--top must be positive");
  if (o.json)
    return cli_usage("prov report", "--json: the report is HTML; 'sluice prov stats|waste|simulate --json' give its "
                                    "figures as JSON");
  sl_report_prov_opts ro = SL_REPORT_PROV_OPTS_INIT;
  if (o.model && sl_prov_model_load(&ro.model, o.model)) return cli_fail(true, "prov report");
  sl_prov *p;
  sl_prov_graphlets *g;
  if (cli_prov_load("prov report", o.db, NULL, &p, &g)) {
    sl_prov_model_free(ro.model);
    return CLI_FAIL;
  }
  ro.source = o.db;
  ro.top = (size_t)o.top;
  ro.store = p; /* the recorded sluice runs (prov fleet) */
  char *html = NULL;
  if (sl_report_prov_html(&html, g, &ro)) rc = cli_fail(true, "prov report: %s", o.db);
  else rc = cli_write_text("prov report", o.out, html);
  if (rc == CLI_OK && o.out) fprintf(stderr, "wrote %s\n", o.out);
  sl_free(html);
  sl_prov_model_free(ro.model);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  return rc;
}

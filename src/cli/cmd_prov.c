/* cli/cmd_prov.c: `sluice prov`, the provenance store from the command line: init, ls, show, lineage, export,
 * and dispatch to the analytics subcommands (cmd_prov_an.c: gen, graphlets, stats, waste, train, simulate,
 * should-train). Every subcommand has --help and --json. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_prov_int.h"

static const char *short_type(const char *t) {
  if (!t) return "";
  const char *d = strrchr(t, '.');
  /* tfx.components.trainer.component.Trainer -> Trainer; keep names like sluice.Run whole. */
  return d && !strncmp(t, "tfx.", 4) ? d + 1 : t;
}

static void fmt_time(int64_t ms, char *buf, size_t n) {
  if (ms <= 0) {
    snprintf(buf, n, "-");
    return;
  }
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static int open_store(sl_prov **p, const char *cmd, const char *uri, unsigned flags) {
  if (sl_prov_open(p, uri, flags)) return cli_fail(true, "prov %s: cannot open %s", cmd, uri);
  return 0;
}

static void print_json_string(const char *s) {
  fputs(s, stdout);
  fputc('\n', stdout);
}

/* ---- init ---- */
static int prov_init(int argc, char **argv) {
  bool json = false, widen = false, widened = false;
  const char *db = NULL;
  const cli_opt opts[] = {{.name = "--json", .type = CLI_FLAG, .dst = &json},
                          {.name = "--widen-ints", .type = CLI_FLAG, .dst = &widen},
                          {.name = NULL}};
  const cli_args args = {.cmd = "prov init", .opts = opts, .pos = &db, .npos = 1, .noun = "DB",
                         .usage = "usage: sluice prov init DB [--widen-ints] [--json]\n\nCreates an ML Metadata "
                                  "(schema v10) store. DB is a file path, sqlite:PATH or "
                                  "postgresql://user@host:port/dbname.\nAn existing MLMD v10 store is left as it is, "
                                  "but for --widen-ints: a PostgreSQL store the ml-metadata\nlibrary created has "
                                  "INTEGER int_value columns, too narrow for the sizes and times sluice records;\n"
                                  "--widen-ints makes them BIGINT, as sluice creates them (the library reads "
                                  "either).\n"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!db) return cli_usage("prov init", "DB is required");
  sl_prov *p;
  if (open_store(&p, "init", db, SL_PROV_CREATE)) return CLI_FAIL;
  if (widen && sl_prov_widen_ints(&widened, p)) {
    fprintf(stderr, "sluice: prov init: %s\n", cli_safe(sl_error_last()));
    sl_prov_close(p);
    return CLI_FAIL;
  }
  if (json) {
    printf("{\"store\": ");
    cli_json_string(stdout, cli_safe(db));
    printf(", \"backend\": \"%s\", \"schema_version\": 10, \"widened_ints\": %s}\n", sl_prov_backend(p),
           widened ? "true" : "false");
  } else {
    printf("MLMD schema v10 store ready at %s (%s)%s\n", cli_safe(db), sl_prov_backend(p),
           widened ? "; int_value columns widened to BIGINT" : "");
  }
  sl_prov_close(p);
  return CLI_OK;
}

/* ---- ls ---- */
static void print_nodes(const sl_prov_list *l, sl_prov_kind kind, bool depth) {
  if (depth) printf("%-6s ", "DEPTH");
  if (kind == SL_PROV_CONTEXT)
    printf("%-8s %-10s %-20s %-40s\n", "ID", "KIND", "TYPE", "NAME");
  else
    printf("%-8s %-10s %-22s %-10s %-19s %s\n", "ID", "KIND", "TYPE", "STATE", "CREATED", "URI/NAME");
  for (size_t i = 0; i < l->n; i++) {
    const sl_prov_node *n = &l->nodes[i];
    char t[32];
    fmt_time(n->create_ms, t, sizeof t);
    if (depth) printf("%-6d ", n->depth);
    const char *k = n->kind == SL_PROV_ARTIFACT ? "artifact" : n->kind == SL_PROV_EXECUTION ? "execution" : "context";
    if (kind == SL_PROV_CONTEXT)
      printf("%-8lld %-10s %-20s %-40s\n", (long long)n->id, k, short_type(n->type_name), n->name ? n->name : "");
    else
      printf("%-8lld %-10s %-22s %-10s %-19s %s\n", (long long)n->id, k, short_type(n->type_name),
             sl_prov_state_name(n->kind, n->state), t, n->uri ? n->uri : n->name ? n->name : "");
  }
}

static int prov_ls(int argc, char **argv) {
  bool json = false;
  const char *db = NULL, *what = "executions";
  sl_prov_query q = {0};
  bool limit_set = false;
  q.limit = 1000; /* a terminal's worth by default; --limit 0 lists all */
  int64_t context = 0, limit = -1;
  const cli_opt opts[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "--type", .type = CLI_STR, .dst = &q.type_name},
      {.name = "--name", .type = CLI_STR, .dst = &q.name},
      {.name = "--context", .type = CLI_INT, .dst = &context, .lo = 0, .hi = (double)INT64_MAX, .must = "a context id"},
      {.name = "--limit", .type = CLI_INT, .dst = &limit, .lo = 0, .hi = (double)INT64_MAX, .must = "0 (all) or more"},
      {.name = NULL},
  };
  const char *pos[2] = {NULL, what};
  const cli_args args = {.cmd = "prov ls", .opts = opts, .pos = pos, .npos = 2,
                         .usage = "usage: sluice prov ls DB [artifacts|executions|contexts|types] [--type NAME] "
                                  "[--context ID] [--name NAME] [--limit N] [--json]\n\nLists the store's nodes "
                                  "(executions by default) in id order, filtered by type name, context (its members; "
                                  "for contexts, its children) or name.\nAt most 1000 unless --limit says otherwise "
                                  "(--limit 0: all).\n"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  db = pos[0];
  what = pos[1];
  q.context_id = context;
  if (limit >= 0) {
    q.limit = (size_t)limit;
    limit_set = true;
  }
  if (!db) return cli_usage("prov ls", "DB is required");
  sl_prov_kind kind;
  bool types = false;
  if (!strncmp(what, "artifact", 8)) kind = SL_PROV_ARTIFACT;
  else if (!strncmp(what, "execution", 9)) kind = SL_PROV_EXECUTION;
  else if (!strncmp(what, "context", 7)) kind = SL_PROV_CONTEXT;
  else if (!strncmp(what, "type", 4)) kind = SL_PROV_CONTEXT, types = true;
  else return cli_usage("prov ls", "'%s': expected artifacts, executions, contexts or types", what);
  sl_prov *p;
  if (open_store(&p, "ls", db, 0)) return CLI_FAIL;
  sl_prov_list *l;
  int rc = types ? sl_prov_types(&l, p) : sl_prov_find(&l, p, kind, &q);
  sl_prov_close(p);
  if (rc) return cli_fail(true, "prov ls");
  if (types) {
    if (json) {
      json_t *a = json_array();
      static const char *K[] = {"execution", "artifact", "context"};
      for (size_t i = 0; i < l->n; i++) {
        json_t *o = json_object(), *pr = json_object();
        json_object_set_new(o, "id", json_integer(l->nodes[i].id));
        json_object_set_new(o, "kind", json_string(K[l->nodes[i].kind % 3]));
        json_object_set_new(o, "name", json_string(l->nodes[i].type_name));
        json_object_set_new(o, "base_type", l->nodes[i].name ? json_string(l->nodes[i].name) : json_null());
        for (size_t j = 0; j < l->nodes[i].nprops; j++)
          json_object_set_new(pr, l->nodes[i].props[j].name, json_integer(l->nodes[i].props[j].type));
        json_object_set_new(o, "properties", pr);
        json_array_append_new(a, o);
      }
      char *s = json_dumps(a, JSON_INDENT(2));
      print_json_string(s);
      free(s);
      json_decref(a);
    } else {
      printf("%-6s %-10s %-14s %s\n", "ID", "KIND", "BASE", "NAME");
      static const char *K[] = {"execution", "artifact", "context"};
      for (size_t i = 0; i < l->n; i++)
        printf("%-6lld %-10s %-14s %s\n", (long long)l->nodes[i].id, K[l->nodes[i].kind % 3],
               l->nodes[i].name ? l->nodes[i].name : "-", l->nodes[i].type_name);
    }
  } else if (json) {
    char *s;
    if (sl_prov_list_to_json(&s, l)) {
      sl_prov_list_free(l);
      return cli_fail(true, "prov ls");
    }
    print_json_string(s);
    sl_free(s);
  } else {
    print_nodes(l, kind, false);
    printf("(%zu %s%s)\n", l->n, what, !limit_set && l->n == q.limit ? "; the first 1000, --limit 0 for all" : "");
  }
  sl_prov_list_free(l);
  return CLI_OK;
}

/* "12", "a:12", "artifact:12", "e:12", "execution:12", "c:12", "context:12". */
static bool parse_ref(const char *s, sl_prov_kind *kind, int64_t *id) {
  const char *c = strchr(s, ':');
  if (c) {
    size_t n = (size_t)(c - s);
    if (!strncmp(s, "artifact", n) && n) *kind = SL_PROV_ARTIFACT;
    else if (!strncmp(s, "execution", n) && n) *kind = SL_PROV_EXECUTION;
    else if (!strncmp(s, "context", n) && n) *kind = SL_PROV_CONTEXT;
    else return false;
    s = c + 1;
  }
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || v <= 0 || errno == ERANGE) return false; /* refused, not clamped to INT64_MAX */
  *id = v;
  return true;
}

static void print_props(const sl_prov_node *n) {
  for (size_t i = 0; i < n->nprops; i++) {
    const sl_prov_prop *pr = &n->props[i];
    printf("  %-24s %-7s ", pr->name, pr->custom ? "custom" : "");
    switch (pr->type) {
    case SL_PROV_T_INT: printf("%lld\n", (long long)pr->i); break;
    case SL_PROV_T_BOOL: printf("%s\n", pr->i ? "true" : "false"); break;
    case SL_PROV_T_DOUBLE: printf("%g\n", pr->d); break;
    case SL_PROV_T_STRING:
    case SL_PROV_T_STRUCT: printf("%s\n", pr->s ? pr->s : ""); break;
    case SL_PROV_T_PROTO: printf("<%zu bytes>\n", pr->len); break;
    default: printf("?\n");
    }
  }
}

/* Parses `DB ID [options]` for show and lineage (a->pos holds two): the node's kind is ID's prefix (a:, e:, c:), else
 * the last of --artifact/--execution/--context (*k_opt, -1: none), else artifact. 0, -1 after --help, or CLI_USAGE
 * after a message. */
static int parse_node(const cli_args *a, int argc, char **argv, const int *k_opt, bool contexts, const char **db,
                      sl_prov_kind *kind, int64_t *id) {
  int parsed = cli_parse(a, argc, argv);
  if (parsed) return parsed;
  const char *ref = a->pos[1];
  if (!a->pos[0] || !ref) return cli_usage(a->cmd, "DB and ID are required");
  *db = a->pos[0];
  *kind = *k_opt >= 0 ? (sl_prov_kind)*k_opt : SL_PROV_ARTIFACT;
  if (!parse_ref(ref, kind, id) || (!contexts && *kind == SL_PROV_CONTEXT))
    return cli_usage(a->cmd, contexts ? "'%s' is not an id (12, a:12, e:12, c:12)"
                                      : "'%s' is not an artifact or execution id (12, a:12, e:12)", ref);
  return 0;
}

static int prov_show(int argc, char **argv) {
  bool json = false;
  const char *db = NULL;
  sl_prov_kind kind;
  int k_opt = -1; /* --artifact, --execution, --context: the last one given */
  const cli_opt opts[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "--artifact", .type = CLI_SET, .dst = &k_opt, .set = SL_PROV_ARTIFACT},
      {.name = "--execution", .type = CLI_SET, .dst = &k_opt, .set = SL_PROV_EXECUTION},
      {.name = "--context", .type = CLI_SET, .dst = &k_opt, .set = SL_PROV_CONTEXT},
      {.name = NULL},
  };
  const char *pos[2] = {NULL, NULL};
  const cli_args args = {.cmd = "prov show", .opts = opts, .pos = pos, .npos = 2,
                         .usage = "usage: sluice prov show DB ID [--artifact|--execution|--context] [--json]\n\nShows "
                                  "one node with its properties, contexts and events. ID may carry its kind: a:12, e:12, "
                                  "c:12 (artifact by default).\n"};
  int64_t id;
  int parsed = parse_node(&args, argc, argv, &k_opt, true, &db, &kind, &id);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  sl_prov *p;
  if (open_store(&p, "show", db, 0)) return CLI_FAIL;
  sl_prov_query q = {0};
  q.id = id;
  sl_prov_list *l = NULL, *nb = NULL;
  int rc = sl_prov_find(&l, p, kind, &q);
  if (!rc && l->n) rc = sl_prov_neighbours(&nb, p, kind, id);
  sl_prov_close(p);
  if (rc) {
    sl_prov_list_free(l);
    return cli_fail(true, "prov show");
  }
  const char *kn = kind == SL_PROV_ARTIFACT ? "artifact" : kind == SL_PROV_EXECUTION ? "execution" : "context";
  if (!l->n) {
    sl_prov_list_free(l);
    return cli_fail(false, "prov show: no %s with id %lld", kn, (long long)id);
  }
  if (json) {
    /* The node, then its neighbours (contexts, or child contexts) and events, as one document. */
    sl_prov_list all = {0};
    size_t n = l->n + (nb ? nb->n : 0);
    all.nodes = calloc(n, sizeof *all.nodes);
    if (!all.nodes) {
      sl_prov_list_free(l);
      sl_prov_list_free(nb);
      return cli_fail(false, "out of memory");
    }
    all.nodes[0] = l->nodes[0];
    for (size_t i = 0; nb && i < nb->n; i++) {
      all.nodes[1 + i] = nb->nodes[i];
      all.nodes[1 + i].depth = 1;
    }
    all.n = n;
    all.events = nb ? nb->events : NULL;
    all.nevents = nb ? nb->nevents : 0;
    char *s;
    rc = sl_prov_list_to_json(&s, &all);
    free(all.nodes);
    if (!rc) {
      print_json_string(s);
      sl_free(s);
    }
  } else {
    const sl_prov_node *x = &l->nodes[0];
    char t1[32], t2[32];
    fmt_time(x->create_ms, t1, sizeof t1);
    fmt_time(x->update_ms, t2, sizeof t2);
    printf("%s %lld\n  type      %s\n", kn, (long long)x->id, x->type_name);
    if (x->name) printf("  name      %s\n", x->name);
    if (x->uri) printf("  uri       %s\n", x->uri);
    if (kind != SL_PROV_CONTEXT) printf("  state     %s\n", sl_prov_state_name(kind, x->state));
    printf("  created   %s\n  updated   %s\n", t1, t2);
    if (x->nprops) {
      printf("properties:\n");
      print_props(x);
    }
    if (nb && nb->n) {
      printf("%s:\n", kind == SL_PROV_CONTEXT ? "child contexts" : "contexts");
      for (size_t i = 0; i < nb->n; i++)
        printf("  %-8lld %-14s %s\n", (long long)nb->nodes[i].id, nb->nodes[i].type_name,
               nb->nodes[i].name ? nb->nodes[i].name : "");
    }
    if (nb && nb->nevents) {
      printf("events:\n  %-8s %-8s %-10s %-16s %s\n", "EVENT", kind == SL_PROV_ARTIFACT ? "EXEC" : "ARTIFACT", "TYPE",
             "PATH", "TIME");
      for (size_t i = 0; i < nb->nevents; i++) {
        const sl_prov_event *e = &nb->events[i];
        fmt_time(e->ms, t1, sizeof t1);
        printf("  %-8lld %-8lld %-10s %-16s %s\n", (long long)e->id,
               (long long)(kind == SL_PROV_ARTIFACT ? e->execution_id : e->artifact_id), sl_prov_event_name(e->type),
               e->path ? e->path : "", t1);
      }
    }
  }
  sl_prov_list_free(l);
  sl_prov_list_free(nb);
  return rc ? cli_fail(true, "prov show") : CLI_OK;
}

static int prov_lineage(int argc, char **argv) {
  bool json = false;
  const char *db = NULL;
  int dir = SL_PROV_BOTH;
  int64_t depth = 0;
  sl_prov_kind kind;
  int k_opt = -1; /* --artifact or --execution: the last one given */
  const cli_opt opts[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "--up", .type = CLI_SET, .dst = &dir, .set = SL_PROV_UP},
      {.name = "--down", .type = CLI_SET, .dst = &dir, .set = SL_PROV_DOWN},
      {.name = "--artifact", .type = CLI_SET, .dst = &k_opt, .set = SL_PROV_ARTIFACT},
      {.name = "--execution", .type = CLI_SET, .dst = &k_opt, .set = SL_PROV_EXECUTION},
      {.name = "--depth", .type = CLI_INT, .dst = &depth, .lo = 0, .hi = INT_MAX,
       .must = "in 0..2147483647 (0: unlimited)"},
      {.name = NULL},
  };
  const char *pos[2] = {NULL, NULL};
  const cli_args args = {.cmd = "prov lineage", .opts = opts, .pos = pos, .npos = 2,
                         .usage = "usage: sluice prov lineage DB ID [--up|--down] [--depth N] [--artifact|--execution] "
                                  "[--json]\n\nWalks the lineage of an artifact or execution: --up lists what it was "
                                  "made from, --down what was made from it (both by default). DEPTH is negative "
                                  "upstream, positive downstream. ID may be a:12 or e:12.\n"};
  int64_t id;
  int parsed = parse_node(&args, argc, argv, &k_opt, false, &db, &kind, &id);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  sl_prov *p;
  if (open_store(&p, "lineage", db, 0)) return CLI_FAIL;
  sl_prov_list *l;
  int rc = sl_prov_lineage(&l, p, kind, id, dir, (int)depth);
  sl_prov_close(p);
  if (rc) return cli_fail(true, "prov lineage");
  if (json) {
    char *s;
    if (sl_prov_list_to_json(&s, l)) {
      sl_prov_list_free(l);
      return cli_fail(true, "prov lineage");
    }
    print_json_string(s);
    sl_free(s);
  } else {
    print_nodes(l, SL_PROV_ARTIFACT, true);
    printf("(%zu nodes, %zu events)\n", l->n, l->nevents);
  }
  sl_prov_list_free(l);
  return CLI_OK;
}

static int prov_export(int argc, char **argv) {
  const char *db = NULL, *out = NULL;
  bool json = true; /* the only format: --json is accepted and changes nothing */
  const cli_opt opts[] = {
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = "-o", .type = CLI_STR, .dst = &out},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "prov export", .opts = opts, .pos = &db, .npos = 1, .noun = "DB",
                         .usage = "usage: sluice prov export DB --json [-o FILE]\n\nWrites the whole store as one JSON "
                                  "document: types, artifacts, executions, contexts (with properties), events with "
                                  "paths, attributions, associations and parent contexts.\n"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!db) return cli_usage("prov export", "DB is required");
  sl_prov *p;
  if (open_store(&p, "export", db, 0)) return CLI_FAIL;
  char *s;
  int rc = sl_prov_export_json(&s, p);
  sl_prov_close(p);
  if (rc) return cli_fail(true, "prov export");
  size_t len = strlen(s);
  s[len] = '\n'; /* the document ends its line (the NUL is not written) */
  int wr = out ? sl_file_write(out, s, len + 1) : (fwrite(s, 1, len + 1, stdout) == len + 1 ? 0 : -1);
  sl_free(s);
  if (wr) return cli_fail(false, "prov export: %s", out ? sl_error_last() : "cannot write to stdout");
  return CLI_OK;
}

static const cli_cmd SUB[] = {
    {"init", "create an MLMD v10 store (SQLite file or PostgreSQL)", prov_init},
    {"ls", "list artifacts, executions, contexts or types", prov_ls},
    {"show", "one node with its properties, contexts and events", prov_show},
    {"lineage", "what an artifact or execution came from / led to", prov_lineage},
    {"export", "the whole store as JSON", prov_export},
    {"gen", "generate a synthetic TFX production corpus", cmd_prov_gen},
    {"graphlets", "model graphlets: trainer, upstream, downstream, outcome, cost", cmd_prov_graphlets},
    {"stats", "characterize the pipelines (lifespans, cadence, push rate, compute, topologies)", cmd_prov_stats},
    {"waste", "wasted compute overall, per pipeline and per component", cmd_prov_waste},
    {"train", "train the deployment predictor (XGBoost random forest)", cmd_prov_train},
    {"simulate", "replay the test window pruning below thresholds", cmd_prov_simulate},
    {"should-train", "decide whether a pipeline's next run should train (exit 0) or skip (10)", cmd_prov_should_train},
    {"overlap", "re-processed input: executions re-reading spans an earlier run read", cmd_prov_overlap},
    {"ablation", "the predictor on feature groups (input, history, code): ROC-AUC, PR-AUC, waste saved", cmd_prov_ablation},
    {"fleet", "the recorded sluice runs: input-bound, headroom, CPU, bottleneck ops", cmd_prov_fleet},
    {"report", "the store's characterization as one HTML page (charts)", cmd_prov_report},
};
#define NSUB (sizeof SUB / sizeof SUB[0])

int cmd_prov(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    FILE *f = argc < 2 ? stderr : stdout;
    fprintf(f, "usage: sluice prov <subcommand> DB [options]\n\nThe provenance store (ML Metadata schema v10) and "
               "production-pipeline analytics.\nDB is a file path, sqlite:PATH or postgresql://user@host:port/db.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < NSUB; i++) fprintf(f, "  %-13s %s\n", SUB[i].name, SUB[i].summary);
    fprintf(f, "\nRun 'sluice prov <subcommand> --help' for its options.\n");
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  for (size_t i = 0; i < NSUB; i++)
    if (!strcmp(argv[1], SUB[i].name)) return SUB[i].run(argc - 1, argv + 1);
  return cli_usage("prov", "unknown subcommand '%s'", argv[1]);
}

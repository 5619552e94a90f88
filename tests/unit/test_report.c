/* test_report.c: the HTML reports (sl_report_trace_html, sl_report_prov_html) checked structurally: well-formed
 * markup (a small tag-balance and entity checker), nothing loaded from outside, every op present, the bottleneck
 * marked, numbers equal to the planner's and the analytics' figures formatted as the terminal reports format
 * them, names escaped; the spec's changes; bad input as errors; allocation failures as SL_ENOMEM. The traced
 * pipelines are synchronous (no worker threads), so the file is not run under TSan. */
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "ops/pipeline_int.h"
#include "plan/plan_fuse_int.h"
#include "report/html_int.h"
#include "trace/trace_int.h"
#include "testutil.h"

/* ---- a checker of the markup: XML-style well-formedness of the whole page ---- */
static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == ':' ||
         c == '_';
}

/* Checks an entity at p ('&'); returns its length or 0. */
static size_t entity(const char *p) {
  static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
  for (size_t i = 0; i < 5; i++)
    if (!strncmp(p, named[i], strlen(named[i]))) return strlen(named[i]);
  if (p[1] == '#') {
    size_t n = 2;
    while (p[n] >= '0' && p[n] <= '9') n++;
    if (n > 2 && p[n] == ';') return n + 1;
  }
  return 0;
}

/* Returns NULL when `html` is well-formed, else a static message saying where it is not. */
static const char *malformed(const char *html) {
  static char msg[256];
  char stack[64][32];
  int depth = 0;
  const char *p = html;
  if (strncmp(p, "<!DOCTYPE html>", 15)) return "no doctype";
  p += 15;
  while (*p) {
    if (*p == '&') {
      if (!entity(p)) return snprintf(msg, sizeof msg, "bare '&' at byte %td: %.30s", p - html, p), msg;
      p++;
      continue;
    }
    if (*p != '<') {
      p++;
      continue;
    }
    if (!strncmp(p, "<!--", 4)) {
      const char *e = strstr(p, "-->");
      if (!e) return "unterminated comment";
      p = e + 3;
      continue;
    }
    bool close = p[1] == '/';
    const char *n = p + 1 + close;
    size_t len = 0;
    while (name_char(n[len])) len++;
    if (!len || len >= 32) return snprintf(msg, sizeof msg, "bad tag at byte %td: %.30s", p - html, p), msg;
    p = n + len;
    /* Attributes: name="value" with no '<' and only well-formed entities inside. */
    while (*p && *p != '>' && !(p[0] == '/' && p[1] == '>')) {
      if (*p == ' ' || *p == '\n') {
        p++;
        continue;
      }
      if (close) return snprintf(msg, sizeof msg, "attribute in a closing tag at byte %td", p - html), msg;
      while (name_char(*p)) p++;
      if (p[0] != '=' || p[1] != '"')
        return snprintf(msg, sizeof msg, "unquoted attribute at byte %td: %.30s", p - html, p), msg;
      p += 2;
      while (*p && *p != '"') {
        if (*p == '<') return snprintf(msg, sizeof msg, "'<' in an attribute at byte %td", p - html), msg;
        if (*p == '&' && !entity(p)) return snprintf(msg, sizeof msg, "bare '&' in an attribute at %td", p - html), msg;
        p++;
      }
      if (!*p) return "unterminated attribute";
      p++;
    }
    if (!*p) return "unterminated tag";
    bool self = *p == '/';
    p += self ? 2 : 1;
    if (close) {
      if (!depth || strncmp(stack[depth - 1], n, len) || stack[depth - 1][len])
        return snprintf(msg, sizeof msg, "</%.*s> closes <%s> at byte %td", (int)len, n, depth ? stack[depth - 1] : "",
                        n - html), msg;
      depth--;
    } else if (!self) {
      if (depth == 64) return "nested too deep";
      snprintf(stack[depth++], sizeof stack[0], "%.*s", (int)len, n);
    }
  }
  if (depth) return snprintf(msg, sizeof msg, "<%s> never closed", stack[depth - 1]), msg;
  return NULL;
}

/* Well-formed, self-contained: no script, nothing fetched. */
static void assert_page(const char *html) {
  const char *why = malformed(html);
  if (why) fprintf(stderr, "malformed: %s\n", why);
  assert_null(why);
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "http:"));
  assert_null(strstr(html, "https:"));
  assert_null(strstr(html, "src="));
  assert_null(strstr(html, "@import"));
  for (const char *u = html; (u = strstr(u, "url(")); u++) assert_true(u[4] == '#'); /* in-page references only */
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* The text between `id="ID">` and the next '<'. */
static void text_of(const char *html, const char *id, char *out, size_t n) {
  char key[64];
  snprintf(key, sizeof key, "id=\"%s\">", id);
  const char *p = strstr(html, key);
  assert_non_null(p);
  p += strlen(key);
  size_t len = strcspn(p, "<");
  snprintf(out, n, "%.*s", (int)len, p);
}

static void assert_rate(const char *html, const char *id, double v) {
  char want[64], got[64], b[32];
  snprintf(want, sizeof want, "%s elem/s", sl__fmt_si(b, sizeof b, v));
  text_of(html, id, got, sizeof got);
  assert_string_equal(got, want);
}

/* ---- traces: real runs of spin pipelines (CPU costs known up to the machine's speed) ---- */
static sl_trace *trace_of(sl_pipeline *p, int64_t take) {
  static sl_machine m;
  static bool probed;
  if (!probed) sl_machine_probe(&m, NULL, 0), probed = true;
  sl_trace_opts to = SL_TRACE_OPTS_INIT;
  to.take = take;
  to.seconds = 10;
  to.machine = &m;
  sl_trace *t = NULL;
  assert_int_equal(sl_trace_run(&t, p, &to), 0);
  return t;
}

#define SPIN_SPEC(name)                                                                                               \
  "{\"name\": \"" name "\", \"ops\": [{\"op\": \"range\", \"stop\": 100000}, "                                        \
  "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 20}}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": "       \
  "{\"us\": 200}}, {\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 20}}, {\"op\": \"batch\", \"size\": 2}]}"

static sl_report_trace_opts ropts(void) {
  sl_report_trace_opts o = SL_REPORT_TRACE_OPTS_INIT;
  o.plan = (sl_plan_opts)SL_PLAN_OPTS_INIT; /* versioned: the test hands it to sl_plan_solve too */
  o.plan.cores = 2;
  o.plan.handoff = SL_PLAN_HANDOFF_NONE; /* the same plan in the report and in the test */
  return o;
}

static void test_trace_report(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN_SPEC("spin <&> \\\"q\\\" 'a'"));
  sl_trace *t = trace_of(p, 500); /* 1000 elements: the light stages are timed 1 call in 64-128 */
  sl_report_trace_opts o = ropts();
  o.source = "t<1>.json";
  char *html = NULL;
  int rc = sl_report_trace_html(&html, t, &o);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  assert_page(html);
  /* The names, escaped. */
  assert_non_null(strstr(html, "<title>sluice report: spin &lt;&amp;&gt; &quot;q&quot; &#39;a&#39;</title>"));
  assert_non_null(strstr(html, "t&lt;1&gt;.json"));
  /* Every op in the graph and in the table; the edges between them. */
  int n = sl_trace_op_count(t);
  for (int i = 0; i < n; i++) {
    sl_op_stats s;
    assert_int_equal(sl_trace_op(&s, t, i), 0);
    char key[64];
    snprintf(key, sizeof key, "data-path=\"%s\"", s.path);
    assert_int_equal(count(html, key), 1);
    snprintf(key, sizeof key, "<td class=\"l\">%s</td>", s.path);
    assert_int_equal(count(strstr(html, "<table class=\"ops\">"), key), 1);
  }
  assert_int_equal(count(html, "marker-end=\"url(#arrow)\""), n - 1);
  /* The bottleneck: the planner's, marked once, the heavy stage. */
  sl_plan *pl = NULL;
  assert_int_equal(sl_plan_solve(&pl, t, &o.plan), 0);
  assert_int_equal(sl_plan_bottleneck(pl), 2);
  assert_int_equal(count(html, "class=\"op bottleneck\""), 1);
  assert_non_null(strstr(html, "class=\"op bottleneck\" data-path=\"ops[2]\""));
  char got[128];
  text_of(html, "bottleneck", got, sizeof got);
  assert_string_equal(got, "ops[2] map spin");
  /* Numbers: the trace's and the plan's, formatted as the analyzer formats them. */
  assert_rate(html, "traced-rate", sl_trace_throughput(t));
  assert_rate(html, "bound", sl_plan_bound(pl));
  assert_rate(html, "predicted", sl_plan_predicted(pl));
  char b[32], want[160];
  snprintf(want, sizeof want, "%s elem/s at parallelism 1 (the smallest)", sl__fmt_si(b, sizeof b, sl_plan_op_rate(pl, 2)));
  assert_non_null(strstr(html, want));
  /* The analyzer's sentences, as sluice analyze prints them (before wrapping). */
  char *js = NULL;
  assert_int_equal(sl_plan_report(&js, pl, true), 0);
  json_t *rep = json_loads(js, 0, NULL);
  assert_non_null(rep);
  json_t *text = json_object_get(rep, "text");
  assert_true(json_array_size(text) >= 4);
  const char *bound_line = json_string_value(json_array_get(text, 1));
  assert_true(!strncmp(bound_line, "Bound: ", 7));
  assert_non_null(strstr(html, bound_line + 7));
  /* The changes the plan makes: the heavy stage's parallelism. */
  assert_non_null(strstr(html, "<h2>Changes the plan makes</h2>"));
  snprintf(want, sizeof want, "<td class=\"l\">map spin</td><td class=\"l\">parallelism</td><td class=\"l mono\"><del>1"
                              "</del></td><td class=\"l mono\"><ins>%lld</ins>", (long long)sl_plan_parallelism(pl, 2));
  assert_non_null(strstr(html, want));
  assert_null(strstr(html, "id=\"measured\""));
  json_decref(rep);
  sl_free(js);
  sl_free(html);
  sl_plan_free(pl);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* A pipeline with an interleave: nested ops drawn indented, the source chain's edge back into the interleave. */
static void test_trace_report_nested(void **st) {
  char *dir = tu_tmpdir("report-il");
  char lines[2000];
  size_t len = 0;
  for (int i = 0; i < 300; i++) len += (size_t)snprintf(lines + len, sizeof lines - len, "%d\n", i);
  free(tu_write_file(dir, "a.txt", lines, len));
  free(tu_write_file(dir, "b.txt", lines, len));
  sl_pipeline *p = tu_pipelinef("{\"name\": \"il\", \"ops\": [{\"op\": \"files\", \"glob\": \"%s/*.txt\"}, "
                                "{\"op\": \"interleave\", \"cycle_length\": 2, \"source\": [{\"op\": \"lines\"}, "
                                "{\"op\": \"map\", \"fn\": \"spin\", \"args\": {\"us\": 5}}]}, {\"op\": \"map\", "
                                "\"fn\": \"spin\", \"args\": {\"us\": 50}}]}", dir);
  sl_trace *t = trace_of(p, 200);
  sl_report_trace_opts o = ropts();
  char *html = NULL;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_int_equal(sl_trace_op_count(t), 5);
  for (const char *path = "ops[0]\0ops[1]\0ops[1].source[0]\0ops[1].source[1]\0ops[2]\0"; *path;
       path += strlen(path) + 1) {
    char key[64];
    snprintf(key, sizeof key, "data-path=\"%s\"", path);
    assert_int_equal(count(html, key), 1);
  }
  assert_int_equal(count(html, "marker-end=\"url(#arrow)\""), 4);
  assert_int_equal(count(html, "class=\"op bottleneck\""), 1);
  sl_free(html);
  sl_trace_free(t);
  sl_pipeline_free(p);
  tu_rmtree(dir);
  free(dir);
}

/* --tuned: a tuned spec's changes knob by knob, a trace of it with its measured throughput, and specs of other
 * pipelines refused. */
static void test_trace_report_tuned(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN_SPEC("spin"));
  sl_trace *t = trace_of(p, 100);
  sl_report_trace_opts o = ropts();
  sl_plan *pl = NULL;
  assert_int_equal(sl_plan_solve(&pl, t, &o.plan), 0);
  char *planned = NULL, *html = NULL;
  assert_int_equal(sl_plan_spec_json(&planned, pl), 0);
  /* The plan's own spec: the same changes, said to be the plan's. */
  o.tuned_spec = planned;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_non_null(strstr(html, "<h2>Changes in the tuned spec</h2>"));
  assert_non_null(strstr(html, "(the same as this trace's plan)"));
  assert_non_null(strstr(html, "(inserted)"));
  sl_free(html);
  /* Edited: a cache inserted at the end and the first stage's parallelism changed. */
  json_t *j = json_loads(planned, 0, NULL);
  json_t *ops = json_object_get(j, "ops");
  json_object_set_new(json_array_get(ops, 1), "parallelism", json_integer(3));
  json_array_append_new(ops, json_pack("{s:s}", "op", "cache"));
  char *edited = json_dumps(j, 0);
  o.tuned_spec = edited;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_non_null(strstr(html, "not the plan of this trace"));
  assert_non_null(strstr(html, "<td class=\"l\">ops[1]</td><td class=\"l\">ops[1]</td><td class=\"l\">map spin</td>"
                               "<td class=\"l\">parallelism</td><td class=\"l mono\"><del>1</del></td>"
                               "<td class=\"l mono\"><ins>3</ins>"));
  assert_non_null(strstr(html, "<td class=\"l\">cache</td><td class=\"l\">(inserted)</td>"));
  sl_free(html);
  /* Of another pipeline: another function argument, or an op less. */
  json_object_set_new(json_object_get(json_array_get(ops, 2), "args"), "us", json_integer(7));
  free(edited);
  edited = json_dumps(j, 0);
  o.tuned_spec = edited;
  assert_int_equal(sl_report_trace_html(&html, t, &o), SL_EINVAL);
  assert_null(html);
  assert_non_null(strstr(sl_error_last(), "different pipeline: ops[2].args"));
  json_object_set_new(json_object_get(json_array_get(ops, 2), "args"), "us", json_integer(200));
  json_array_remove(ops, 3);
  free(edited);
  edited = json_dumps(j, 0);
  o.tuned_spec = edited;
  assert_int_equal(sl_report_trace_html(&html, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "different pipeline"));
  o.tuned_spec = "{\"ops\": [";
  assert_int_equal(sl_report_trace_html(&html, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "the tuned spec: line 1"));
  /* A trace of the tuned spec: measured against predicted. */
  sl_pipeline *q = NULL;
  assert_int_equal(sl_pipeline_from_json(&q, planned, strlen(planned), "planned"), 0);
  sl_trace *tt = trace_of(q, 100);
  o.tuned_spec = NULL;
  o.tuned_trace = tt;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_rate(html, "measured", sl_trace_throughput(tt));
  sl_free(html);
  sl_trace_free(tt);
  sl_pipeline_free(q);
  free(edited);
  json_decref(j);
  sl_free(planned);
  sl_plan_free(pl);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* A trace from planted counters of pipeline p (n elements through every op, 100 us of CPU each). */
static sl_trace *planted_trace(sl_pipeline *p, uint64_t n) {
  int nops = sl_pipeline_op_count(p);
  sl_op_stats st[16];
  assert_true(nops <= 16);
  for (int i = 0; i < nops; i++) {
    assert_int_equal(sl_pipeline_op_stats(&st[i], p, i), 0);
    st[i].elements_out = n;
    st[i].elements_in = i ? n : 0;
    st[i].cpu_seconds = st[i].wall_seconds = (double)n * 100e-6;
    st[i].runq_seconds = 0;
  }
  sl_machine m;
  memset(&m, 0, sizeof m);
  m.cores = 2;
  m.cpus_online = 2;
  m.mem_available = 1 << 30;
  sl_trace *t = NULL;
  assert_int_equal(sl__trace_from_counters(&t, sl__pipeline_spec(p), "planted", &m, st, NULL, nops,
                                           (double)n * 100e-6 * nops, (double)n * 100e-6 * nops, 0),
                   0);
  return t;
}

/* --tuned with the plan sluice optimize writes when it fused ops (the traced spec fused, then planned): accepted,
 * the fusion the first of the changes; a spec that is neither the traced one nor it fused is still refused. */
static void test_trace_report_tuned_fused(void **st) {
  char *dir = tu_tmpdir("report-fuse");
  free(tu_write_file(dir, "a.jpg", "x", 1)); /* the files op lists it; nothing is run */
  sl_pipeline *p = tu_pipelinef(
      "{\"name\": \"fz\", \"seed\": 1, \"ops\": [{\"op\": \"files\", \"glob\": \"%s/*.jpg\"}, "
      "{\"op\": \"interleave\", \"cycle_length\": 1, \"source\": [{\"op\": \"tfrecord\"}]}, "
      "{\"op\": \"map\", \"fn\": \"parse_example\", \"args\": {\"features\": {\"image/encoded\": "
      "{\"dtype\": \"bytes\"}}}}, {\"op\": \"map\", \"fn\": \"decode_jpeg\", \"parallelism\": \"autotune\", "
      "\"args\": {\"channels\": 3}}, {\"op\": \"map\", \"fn\": \"random_resized_crop\", "
      "\"parallelism\": \"autotune\", \"args\": {\"size\": [32, 32]}}, {\"op\": \"batch\", \"size\": 4}]}",
      dir);
  sl_trace *t = planted_trace(p, 400);
  sl_report_trace_opts o = ropts();
  sl_plan *pl = NULL;
  assert_int_equal(sl_plan_solve(&pl, t, &o.plan), 0);
  char *planned = NULL, *html = NULL;
  assert_int_equal(sl_plan_spec_json(&planned, pl), 0);
  json_t *j = json_loads(planned, 0, NULL);
  assert_non_null(j);
  assert_true(sl__plan_fuse_spec(j) > 0);
  char *fused = json_dumps(j, 0);
  o.tuned_spec = fused;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_non_null(strstr(html, "<td class=\"l\">fusion</td><td class=\"l\">(fused)</td>"));
  assert_non_null(strstr(html, "ops[3] decode_jpeg + ops[4] random_resized_crop"));
  sl_free(html);
  /* The fused spec with another function argument: neither spec, refused naming both differences. */
  json_t *ops = json_object_get(j, "ops");
  json_t *dec = NULL;
  size_t i;
  json_t *x;
  json_array_foreach(ops, i, x) if (!strcmp(json_string_value(json_object_get(x, "op")), "map") &&
                                    !strcmp(json_string_value(json_object_get(x, "fn")), "decode_and_crop_jpeg")) dec = x;
  assert_non_null(dec);
  json_object_set_new(json_object_get(dec, "args"), "channels", json_integer(1));
  free(fused);
  fused = json_dumps(j, 0);
  o.tuned_spec = fused;
  assert_int_equal(sl_report_trace_html(&html, t, &o), SL_EINVAL);
  assert_null(html);
  assert_non_null(strstr(sl_error_last(), "different pipeline"));
  assert_non_null(strstr(sl_error_last(), "nor is it the traced spec fused"));
  free(fused);
  json_decref(j);
  sl_free(planned);
  sl_plan_free(pl);
  sl_trace_free(t);
  sl_pipeline_free(p);
  tu_rmtree(dir);
  free(dir);
}

/* A trace too short to name a bottleneck: the page says so and how long to trace, and marks none. */
static void test_trace_report_too_short(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN_SPEC("short"));
  sl_trace *t = planted_trace(p, 4);
  sl_report_trace_opts o = ropts();
  char *html = NULL;
  assert_int_equal(sl_report_trace_html(&html, t, &o), 0);
  assert_page(html);
  assert_non_null(strstr(html, "id=\"too-short\">Too short to name a bottleneck: the trace saw 4 output elements"));
  assert_null(strstr(html, "id=\"bottleneck\""));
  assert_null(strstr(html, "class=\"op bottleneck\""));
  sl_free(html);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* Bad input: a trace the planner refuses, options of another version. */
static void test_trace_report_errors(void **st) {
  sl_pipeline *p = tu_pipeline("{\"name\": \"empty\", \"ops\": [{\"op\": \"range\", \"stop\": 0}]}");
  sl_trace *t = trace_of(p, 0);
  char *html = (char *)"x";
  sl_report_trace_opts o = ropts();
  int rc = sl_report_trace_html(&html, t, &o);
  assert_true(rc < 0);
  assert_null(html);
  assert_true(sl_error_last()[0] != 0);
  o.version = 99;
  assert_int_equal(sl_report_trace_html(&html, t, &o), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "version 99"));
  sl_trace_free(t);
  sl_pipeline_free(p);
}

/* The writer's escaping: markup characters, control characters and invalid UTF-8. */
static void test_escape(void **st) {
  sl__html h = {0};
  sl__h_text(&h, "a<b>&\"c\" 'd'\x01\tx \xc3\xa9 \xff \xc0\xaf \xed\xa0\x80 \xe2\x82");
  assert_int_equal(h.rc, 0);
  assert_string_equal(h.s.s, "a&lt;b&gt;&amp;&quot;c&quot; &#39;d&#39;\xef\xbf\xbd x \xc3\xa9 \xef\xbf\xbd "
                             "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd");
  sl__str_dispose(&h.s);
  char b[64];
  assert_string_equal(sl__fit(b, sizeof b, "short", 10), "short");
  assert_string_equal(sl__fit(b, sizeof b, "exactly-10", 10), "exactly-10");
  assert_string_equal(sl__fit(b, sizeof b, "a-longer-name", 10), "a-longe...");
  assert_string_equal(sl__fit(b, sizeof b, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4), "\xc3\xa9...");
}

/* ---- the provenance report on a small generated store ---- */
static char *g_dir;
static char g_db[1024];

static void make_store(void) {
  if (g_dir) return;
  g_dir = tu_tmpdir("report-prov");
  snprintf(g_db, sizeof g_db, "%s/mlmd.sqlite", g_dir);
  sl_prov *p = NULL;
  assert_int_equal(sl_prov_open(&p, g_db, SL_PROV_CREATE), 0);
  sl_prov_gen_opts go = SL_PROV_GEN_OPTS_INIT;
  go.pipelines = 5;
  go.days = 40;
  go.seed = 3;
  assert_int_equal(sl_prov_gen(NULL, p, &go), 0);
  sl_prov_close(p);
  /* A pipeline whose name needs escaping. */
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(g_db, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "UPDATE Context SET name = '<evil & \"co''s\">' WHERE id = (SELECT min(c.id) FROM "
                                    "Context c JOIN Type t ON t.id = c.type_id WHERE t.name = 'pipeline')",
                                NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_changes(db), 1);
  sqlite3_close(db);
}

static void test_prov_report(void **st) {
  make_store();
  sl_prov *p = NULL;
  sl_prov_graphlets *g = NULL;
  assert_int_equal(sl_prov_open(&p, g_db, 0), 0);
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  sl_prov_stats *s = NULL;
  sl_prov_waste *w = NULL;
  assert_int_equal(sl_prov_stats_compute(&s, g), 0);
  assert_int_equal(sl_prov_waste_compute(&w, g), 0);
  /* Without a model. */
  sl_report_prov_opts o = SL_REPORT_PROV_OPTS_INIT;
  o.source = "a<b>.db";
  char *html = NULL;
  assert_int_equal(sl_report_prov_html(&html, g, &o), 0);
  assert_page(html);
  assert_non_null(strstr(html, "<title>sluice prov report: a&lt;b&gt;.db</title>"));
  assert_non_null(strstr(html, "&lt;evil &amp; &quot;co&#39;s&quot;&gt;"));
  char got[64], want[64];
  snprintf(want, sizeof want, "%zu", s->pipelines);
  text_of(html, "pipelines", got, sizeof got);
  assert_string_equal(got, want);
  snprintf(want, sizeof want, "%.1f%%", 100 * s->push_rate);
  text_of(html, "push-rate", got, sizeof got);
  assert_string_equal(got, want);
  snprintf(want, sizeof want, "%.1f%%", 100 * w->wasted / w->total);
  text_of(html, "wasted", got, sizeof got);
  assert_string_equal(got, want);
  /* Every pipeline in the waste chart, every component type in the compute chart. */
  assert_int_equal(count(html, "<g class=\"bar waste\">"), (int)w->npipelines);
  for (size_t i = 0; i < s->ncompute; i++) {
    char key[128];
    snprintf(key, sizeof key, ">%s</text>", s->compute[i].name);
    assert_non_null(strstr(html, key));
  }
  /* Graphlets per pipeline: the histogram's bins hold every pipeline with graphlets. */
  const char *gp = strstr(html, "class=\"chart graphlets\"");
  assert_non_null(gp);
  int pipes = 0;
  for (const char *b = gp; (b = strstr(b, "<g class=\"bin\">")) && b < strstr(gp, "</svg>"); b++) {
    const char *tip = strstr(b, "<title>");
    pipes += atoi(strstr(tip, ": ") + 2);
  }
  assert_int_equal(pipes, (int)s->pipelines);
  assert_non_null(strstr(html, "id=\"no-model\""));
  assert_null(strstr(html, "<polyline"));
  sl_free(html);
  /* With a model: the simulation's curve, one point per threshold, and its best. */
  sl_prov_train_opts to = SL_PROV_TRAIN_OPTS_INIT;
  to.trees = 10;
  sl_prov_model *m = NULL;
  sl_prov_train_report tr;
  assert_int_equal(sl_prov_train(&m, &tr, g, &to), 0);
  sl_prov_train_report_dispose(&tr);
  sl_prov_sim *sim = NULL;
  assert_int_equal(sl_prov_simulate(&sim, g, m), 0);
  o.model = m;
  o.top = 2;
  assert_int_equal(sl_report_prov_html(&html, g, &o), 0);
  assert_page(html);
  assert_int_equal(count(html, "<g class=\"bar waste\">"), 2);
  assert_non_null(strstr(html, "class=\"curve cadence\""));
  assert_int_equal(count(html, "<circle cx="), (int)sim->nrows + 2); /* + the legend's two */
  if (sim->best >= 0) {
    snprintf(want, sizeof want, "%.1f%%", 100 * sim->rows[sim->best].saved_share);
    text_of(html, "sim-saved", got, sizeof got);
    assert_string_equal(got, want);
  }
  sl_free(html);
  sl_prov_sim_free(sim);
  sl_prov_model_free(m);
  sl_prov_stats_free(s);
  sl_prov_waste_free(w);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
}

/* The x of the mean's marker in the graphlets-per-pipeline chart, and the x where the axis puts value v: bin i's
 * label is centred on it and stands for its middle count, i*step + (step-1)/2. */
static void marker_and_axis(const char *html, double v, double *marker, double *at_v) {
  const char *gp = strstr(html, "class=\"chart graphlets\""), *end = strstr(gp, "</svg>");
  const char *m = strstr(gp, "stroke=\"#bd0026\"");
  assert_true(m && m < end);
  while (strncmp(m, "<line x1=\"", 10)) m--;
  *marker = atof(m + 10);
  double lx[2], step = 1;
  const char *b = gp;
  for (int i = 0; i < 2; i++) {
    b = strstr(b, "<g class=\"bin\">");
    assert_true(b && b < end);
    const char *close = strstr(b, "</g>"), *t = NULL;
    for (const char *q = b; (q = strstr(q, "<text x=\"")) && q < close; q++) t = q; /* the last: the label */
    assert_non_null(t);
    lx[i] = atof(t + 9);
    const char *txt = strchr(t, '>') + 1, *dash = strchr(txt, '-');
    if (i == 0 && dash && dash < strchr(txt, '<')) step = atof(dash + 1) + 1; /* "0-4": step 5 */
    b = close;
  }
  *at_v = lx[0] + (lx[1] - lx[0]) * (v - (step - 1) / 2) / step;
}

/* A store spanning minutes (the generated one with every time divided by 1440: 40 days become 40 minutes) has no
 * daily rates: stats says NaN, the report gives the span and the counts. The mean marker stands at the mean. */
static void test_prov_report_minutes(void **st) {
  make_store();
  char db2[1100];
  snprintf(db2, sizeof db2, "%s/minutes.sqlite", g_dir);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(g_db, &db), SQLITE_OK);
  char sql[1300];
  snprintf(sql, sizeof sql, "VACUUM INTO '%s'", db2);
  assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  assert_int_equal(sqlite3_open(db2, &db), SQLITE_OK);
  const char *squeeze =
      "UPDATE Execution SET create_time_since_epoch = create_time_since_epoch / 1440, "
      "last_update_time_since_epoch = last_update_time_since_epoch / 1440;"
      "UPDATE Artifact SET create_time_since_epoch = create_time_since_epoch / 1440, "
      "last_update_time_since_epoch = last_update_time_since_epoch / 1440;"
      "UPDATE Event SET milliseconds_since_epoch = milliseconds_since_epoch / 1440;"
      "UPDATE Context SET create_time_since_epoch = create_time_since_epoch / 1440, "
      "last_update_time_since_epoch = last_update_time_since_epoch / 1440;";
  assert_int_equal(sqlite3_exec(db, squeeze, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  sl_prov *p = NULL;
  sl_prov_graphlets *g = NULL;
  sl_prov_stats *s = NULL;
  assert_int_equal(sl_prov_open(&p, db2, 0), 0);
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_stats_compute(&s, g), 0);
  assert_true(s->days > 10.0 / 1440 && s->days < 1);
  assert_true(isnan(s->runs_per_day));
  assert_true(isnan(s->graphlets_per_day));
  char *html = NULL;
  assert_int_equal(sl_report_prov_html(&html, g, NULL), 0);
  assert_page(html);
  assert_null(strstr(html, "per day"));
  char want[96], span[32];
  snprintf(want, sizeof want, "%zu graphlets in %s", s->graphlets, sl__fmt_days(span, sizeof span, s->days));
  assert_non_null(strstr(html, want));
  assert_non_null(strstr(span, "minutes"));
  double marker, at_mean;
  marker_and_axis(html, s->graphlets_per_pipeline[6], &marker, &at_mean);
  assert_float_equal(marker, at_mean, 0.11); /* both printed with one decimal */
  sl_free(html);
  sl_prov_stats_free(s);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
  /* The 40-day store keeps its daily rates, and its marker too stands at its mean. */
  assert_int_equal(sl_prov_open(&p, g_db, 0), 0);
  assert_int_equal(sl_prov_graphlets_load(&g, p, NULL), 0);
  assert_int_equal(sl_prov_stats_compute(&s, g), 0);
  assert_true(s->runs_per_day > 0 && s->graphlets_per_day > 0);
  assert_int_equal(sl_report_prov_html(&html, g, NULL), 0);
  assert_non_null(strstr(html, "graphlets per day"));
  marker_and_axis(html, s->graphlets_per_pipeline[6], &marker, &at_mean);
  assert_float_equal(marker, at_mean, 0.11);
  sl_free(html);
  sl_prov_stats_free(s);
  sl_prov_graphlets_free(g);
  sl_prov_close(p);
}

/* ---- allocation failures: every one surfaces as SL_ENOMEM, never a crash or a leak ---- */
static void test_allocation_failures(void **st) {
  sl_pipeline *p = tu_pipeline(SPIN_SPEC("f"));
  sl_trace *t = trace_of(p, 40);
  make_store();
  sl_prov *db = NULL;
  sl_prov_graphlets *g = NULL;
  assert_int_equal(sl_prov_open(&db, g_db, 0), 0);
  assert_int_equal(sl_prov_graphlets_load(&g, db, NULL), 0);
  sl_report_trace_opts o = ropts();
  tu_faultsim_install();
  for (int which = 0; which < 2; which++) {
    int failures = 0;
    for (long n = 0; n < 1000000; n++) {
      tu_faultsim_fail(n, true);
      char *html = NULL;
      int rc = which ? sl_report_prov_html(&html, g, NULL) : sl_report_trace_html(&html, t, &o);
      tu_faultsim_reset();
      if (rc == 0) {
        assert_non_null(html);
        sl_free(html);
        break;
      }
      if (rc != SL_ENOMEM) fprintf(stderr, "report %d, failing allocation %ld: %d %s\n", which, n, rc, sl_error_last());
      assert_int_equal(rc, SL_ENOMEM);
      assert_null(html);
      failures++;
    }
    assert_true(failures > 10);
  }
  tu_faultsim_uninstall();
  sl_prov_graphlets_free(g);
  sl_prov_close(db);
  sl_trace_free(t);
  sl_pipeline_free(p);
}

static int teardown(void **st) {
  (void)st;
  if (g_dir) tu_rmtree(g_dir);
  free(g_dir);
  g_dir = NULL;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape),
      cmocka_unit_test(test_trace_report),
      cmocka_unit_test(test_trace_report_nested),
      cmocka_unit_test(test_trace_report_tuned),
      cmocka_unit_test(test_trace_report_tuned_fused),
      cmocka_unit_test(test_trace_report_too_short),
      cmocka_unit_test(test_trace_report_errors),
      cmocka_unit_test(test_prov_report),
      cmocka_unit_test(test_prov_report_minutes),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, teardown);
}

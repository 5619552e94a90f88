/* test_schema.c: the ops' and functions' schemas. Every registered op and function has one; a test generated from
 * each table catches every unknown name with a suggestion, applies every default and enforces every range and type;
 * the structure check follows every example and suite pipeline (and agrees with the elements they make); the issue's
 * failing specs; and docs/spec.md and docs/functions.md hold exactly what the schemas say (SL_UPDATE_DOCS=1
 * rewrites their generated blocks). SL_TEST_TIMEOUT(300) */
#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fns/fns_int.h"
#include "ops/pipeline_int.h"
#include "sluice/gen.h"
#include "testutil.h"


/* ---- every op and function has a schema ---- */
static void check_table(const char *owner, const sl__arg *t) {
  assert_non_null(t);
  for (const sl__arg *a = t; a->name; a++) {
    if (!a->doc || !a->doc[0]) fail_msg("%s: %s has no doc", owner, a->name);
    for (const sl__arg *b = a + 1; b->name; b++)
      if (!strcmp(a->name, b->name)) fail_msg("%s: %s listed twice", owner, a->name);
    if (a->type == SL__ARG_ENUM && !a->values) fail_msg("%s: enum %s has no values", owner, a->name);
    if ((a->flags & SL__ARGF_REQUIRED) && a->def) fail_msg("%s: %s is required and has a default", owner, a->name);
    /* A tunable knob is a performance knob: the planner may change it without changing the data. */
    if ((a->flags & SL__ARGF_TUNABLE) && !(a->flags & SL__ARGF_KNOB)) fail_msg("%s: %s tunable but not a knob", owner, a->name);
  }
}

static void test_every_op_has_a_schema(void **s) {
  (void)s;
  size_t n = 0;
  for (const sl__op_vt *vt; (vt = sl__op_at(n)); n++) {
    if (!vt->schema) fail_msg("op '%s' has no schema: add one beside its implementation", vt->kind);
    assert_true(vt->schema->model < SL__MK_COUNT);
    assert_non_null(vt->schema->doc);
    check_table(vt->kind, vt->schema->knobs);
    assert_ptr_equal(sl__op_lookup(vt->kind), vt);
    assert_non_null(strstr(sl__op_names(), vt->kind));
  }
  assert_true(n >= 17);
}

static void test_every_function_has_a_schema(void **s) {
  (void)s;
  size_t n = sl__fn_builtin_count();
  assert_true(n >= 19);
  for (size_t i = 0; i < n; i++) {
    const sl__fn_entry *e = sl__fn_builtin(i);
    if (!e->schema) fail_msg("function '%s' has no schema: add one beside its implementation", e->name);
    assert_non_null(e->schema->doc);
    check_table(e->name, e->schema->args);
    sl__fn f;
    assert_int_equal(sl__fn_lookup(e->name, &f), 0);
    assert_ptr_equal(f.schema, e->schema);
  }
}

/* ---- generated from the tables: unknown names, types, ranges, defaults ---- */
typedef struct {
  const char *owner;
  const sl__arg *t;
  char what[128]; /* "op 'batch'", "function 'parse_csv'", "an entry of 'columns'" */
  const char *word;
  const sl__op_vt *vt; /* ops: for the knob readers */
  bool nested;         /* the table of the entries of another arg */
} table;

/* Every op's and function's table, and the tables of their args' entries (parse_csv's columns, ...). */
static int add_table(table *out, int n, int max, const char *owner, const sl__arg *t, const char *kind, const char *word,
                     const sl__op_vt *vt) {
  if (n >= max) return n;
  out[n] = (table){owner, t, "", word, vt, kind == NULL};
  if (kind) snprintf(out[n].what, sizeof out[n].what, "%s '%s'", kind, owner);
  else snprintf(out[n].what, sizeof out[n].what, "an entry of '%s'", owner);
  n++;
  for (const sl__arg *a = t; a->name; a++)
    if (a->items) n = add_table(out, n, max, a->name, a->items, NULL, "key", NULL);
  return n;
}

static int ntables(table *out, int max) {
  int n = 0;
  for (size_t i = 0; sl__op_at(i); i++) {
    const sl__op_vt *vt = sl__op_at(i);
    n = add_table(out, n, max, vt->kind, vt->schema->knobs, "op", "knob", vt);
  }
  for (size_t i = 0; i < sl__fn_builtin_count(); i++) {
    const sl__fn_entry *e = sl__fn_builtin(i);
    n = add_table(out, n, max, e->name, e->schema->args, "function", "arg", NULL);
  }
  return n;
}

static int check(const table *t, json_t *obj) {
  static const char *const skip[] = {"op", NULL};
  return sl__args_check(t->t, obj, "x[1]", skip, t->what, t->word);
}

/* Checks {key: v} (v consumed) fails naming x[1].key and containing `needle`. */
static void expect_bad(const table *t, const char *key, json_t *v, const char *needle) {
  json_t *o = json_object();
  json_object_set_new(o, key, v);
  int rc = check(t, o);
  char path[128];
  snprintf(path, sizeof path, "x[1].%s", key);
  if (rc != SL_EINVAL || !strstr(sl_error_last(), path) || !strstr(sl_error_last(), needle))
    fail_msg("%s.%s: expected an error with '%s', got %d '%s'", t->owner, key, needle, rc, sl_error_last());
  json_decref(o);
}

/* A typo: two neighbouring letters swapped (one edit), or a letter doubled when that changes nothing. */
static void typo_of(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s", name);
  size_t len = strlen(out), k = len / 2;
  if (len >= 2 && out[k - 1] != out[k]) {
    char c = out[k - 1];
    out[k - 1] = out[k];
    out[k] = c;
  } else {
    snprintf(out, n, "%sx", name);
  }
}

static void test_unknown_names_suggest_the_nearest(void **s) {
  (void)s;
  table ts[128];
  int n = ntables(ts, 128), checked = 0;
  for (int i = 0; i < n; i++)
    for (const sl__arg *a = ts[i].t; a->name; a++) {
      char typo[96], needle[160];
      typo_of(typo, sizeof typo, a->name);
      if (sl__arg_find(ts[i].t, typo)) continue; /* the typo is another valid name */
      snprintf(needle, sizeof needle, "unknown %s for %s; did you mean '%s'?", ts[i].word, ts[i].what, a->name);
      expect_bad(&ts[i], typo, json_integer(1), needle);
      checked++;
    }
  assert_true(checked > 100);
  /* A name far from every valid one: no suggestion, the list of valid names. */
  expect_bad(&ts[0], "zzzzzzzzzzzz", json_integer(1), "(known: ");
}

static json_t *wrong_type_value(const sl__arg *a) {
  switch (a->type) {
  case SL__ARG_INT:
  case SL__ARG_NUM: return json_string("seven");
  case SL__ARG_BOOL: return json_integer(1);
  case SL__ARG_STR:
  case SL__ARG_ENUM:
  case SL__ARG_COMP:
  case SL__ARG_GLOB: return json_integer(3);
  case SL__ARG_NUMS:
  case SL__ARG_INTS:
  case SL__ARG_STRS:
  case SL__ARG_ARRAY:
  case SL__ARG_CHAIN:
  case SL__ARG_OBJECT:
  case SL__ARG_SCALAR:
  case SL__ARG_COMP_ALT: return json_true();
  }
  return NULL;
}

static json_t *array_of(const sl__arg *a, size_t len) {
  json_t *arr = json_array();
  for (size_t i = 0; i < len; i++)
    json_array_append_new(arr, a->type == SL__ARG_STRS ? json_string("c") : json_integer(1));
  return arr;
}

static void test_types_and_ranges_are_enforced(void **s) {
  (void)s;
  table ts[128];
  int n = ntables(ts, 128), ranges = 0;
  for (int i = 0; i < n; i++)
    for (const sl__arg *a = ts[i].t; a->name; a++) {
      expect_bad(&ts[i], a->name, wrong_type_value(a), "expected");
      bool arr = a->type == SL__ARG_NUMS || a->type == SL__ARG_INTS || a->type == SL__ARG_STRS || a->type == SL__ARG_ARRAY;
      char r[80], needle[120];
      sl__arg_range(r, sizeof r, a);
      if (a->flags & SL__ARGF_LO) {
        if (arr && a->lo >= 1) expect_bad(&ts[i], a->name, array_of(a, (size_t)a->lo - 1), r);
        else if (!arr) {
          snprintf(needle, sizeof needle, "is out of range (valid: %s)", r);
          expect_bad(&ts[i], a->name, a->type == SL__ARG_NUM ? json_real(a->lo - 0.5) : json_integer((json_int_t)a->lo - 1), needle);
        }
        ranges++;
      }
      if (a->flags & SL__ARGF_HI) {
        if (arr) expect_bad(&ts[i], a->name, array_of(a, (size_t)a->hi + 1), r);
        else {
          snprintf(needle, sizeof needle, "is out of range (valid: %s)", r);
          expect_bad(&ts[i], a->name, a->type == SL__ARG_NUM ? json_real(a->hi + 0.5) : json_integer((json_int_t)a->hi + 1), needle);
        }
        ranges++;
      }
      if (a->type == SL__ARG_ENUM) {
        char bad[64];
        snprintf(bad, sizeof bad, "%.*sq", (int)(strchr(a->values, '|') - a->values), a->values);
        expect_bad(&ts[i], a->name, json_string(bad), "did you mean");
      }
      /* "autotune" only where the knob is tunable. */
      if (a->type == SL__ARG_INT && !(a->flags & SL__ARGF_TUNABLE)) expect_bad(&ts[i], a->name, json_string("autotune"), "expected");
      if (a->flags & SL__ARGF_REQUIRED) {
        json_t *o = json_object();
        char need[128];
        snprintf(need, sizeof need, "x[1].%s: required", a->name);
        assert_int_equal(check(&ts[i], o), SL_EINVAL);
        json_decref(o);
        /* The first required arg is the one named. */
        const sl__arg *first = a;
        for (const sl__arg *b = ts[i].t; b < a; b++)
          if (b->flags & SL__ARGF_REQUIRED) first = b;
        if (first == a && !strstr(sl_error_last(), need)) fail_msg("%s: %s", ts[i].owner, sl_error_last());
      }
    }
  assert_true(ranges > 30);
}

/* Each default is valid for its own arg, and is the value in force when the arg is absent: the knob readers (ops)
 * and sl_args getters (functions) take it from the schema, not from the caller's fallback. */
static void test_defaults_are_applied(void **s) {
  (void)s;
  table ts[128];
  int n = ntables(ts, 128), applied = 0;
  json_t *empty = json_object();
  for (int i = 0; i < n; i++)
    for (const sl__arg *a = ts[i].t; a->name; a++) {
      if (!a->def) continue;
      json_t *dv = sl__arg_default(ts[i].t, a->name);
      if (!dv) fail_msg("%s.%s: default '%s' does not parse", ts[i].owner, a->name, a->def);
      json_t *o = json_object();
      json_object_set(o, a->name, dv);
      /* Valid: the only complaint may be another arg that is required. */
      if (check(&ts[i], o) && !strstr(sl_error_last(), ": required"))
        fail_msg("%s.%s: default '%s' is not valid: %s", ts[i].owner, a->name, a->def, sl_error_last());
      json_decref(o);
      if (ts[i].nested) {
        /* Entries' defaults are read by their function from the entry itself. */
      } else {
        /* Ops and functions read through the same getters, over their own table. */
        json_t *e = json_object();
        sl_args args = {e, "x[1]", ts[i].t, NULL};
        int64_t iv = -12345;
        double dvl = -12345;
        bool bv = !json_is_true(dv), at;
        const char *sv = "fallback";
        switch (a->type) {
        case SL__ARG_INT:
          if (a->flags & SL__ARGF_TUNABLE) assert_int_equal(sl__get_tunable(&iv, &at, &args, a->name), 0);
          else assert_int_equal(sl__get_int(&iv, &args, a->name), 0);
          assert_int_equal(iv, json_integer_value(dv));
          break;
        case SL__ARG_NUM:
          assert_int_equal(sl__get_num(&dvl, &args, a->name), 0);
          assert_true(dvl == json_number_value(dv));
          break;
        case SL__ARG_BOOL:
          assert_int_equal(sl__get_bool(&bv, &args, a->name), 0);
          assert_int_equal(bv, json_is_true(dv));
          break;
        case SL__ARG_STR:
        case SL__ARG_ENUM:
        case SL__ARG_COMP:
          assert_int_equal(sl__get_str(&sv, &args, a->name), 0);
          assert_string_equal(sv, json_string_value(dv));
          break;
        case SL__ARG_COMP_ALT: {
          sl__alts al;
          assert_int_equal(sl__get_alts(&al, &args, a->name), 0);
          assert_int_equal(al.n, 1);
          assert_string_equal(al.name[0], json_string_value(dv));
          break;
        }
        default: break;
        }
        json_decref(e);
      }
      json_decref(dv);
      applied++;
    }
  json_decref(empty);
  assert_true(applied > 40);
}


/* ---- what a pipeline built without a key uses is the table's default ----
 * Every op and built-in function is built in a pipeline from a spec that gives only its required keys, with the
 * getters' read hook on: each entry of its table that has a default must have been read through the getters,
 * absent from the spec, with the default's value. An op or function that read a key another way (its own JSON
 * lookup and fallback) or never read it would fail here. */
typedef struct {
  char path[64], key[64];
  json_t *value; /* a copy */
  bool given;
} read_rec;
typedef struct {
  read_rec r[512];
  int n;
} read_log;

static void log_read(const char *path, const char *key, json_t *value, bool given, void *payload) {
  read_log *l = payload;
  if (l->n >= 512) return;
  read_rec *r = &l->r[l->n++];
  snprintf(r->path, sizeof r->path, "%s", path);
  snprintf(r->key, sizeof r->key, "%s", key);
  r->value = value ? json_deep_copy(value) : NULL;
  r->given = given;
}

static void log_clear(read_log *l) {
  for (int i = 0; i < l->n; i++) json_decref(l->r[i].value);
  l->n = 0;
}

static json_t *synth(const sl__arg *a);
/* A value of the entry's type within its range, for a required key. */
static json_t *synth(const sl__arg *a) {
  double lo = (a->flags & SL__ARGF_LO) ? a->lo : 1;
  size_t len = (a->flags & SL__ARGF_LO) && a->lo > 0 ? (size_t)a->lo : 1;
  json_t *arr;
  switch (a->type) {
  case SL__ARG_INT: return json_integer(lo > 1 ? (json_int_t)lo : 1 > lo && (a->flags & SL__ARGF_HI) && a->hi < 1 ? (json_int_t)lo : 1);
  case SL__ARG_NUM: return json_real(lo > 1 ? lo : 1);
  case SL__ARG_BOOL: return json_false();
  case SL__ARG_ENUM: {
    char first[64];
    snprintf(first, sizeof first, "%s", a->values);
    *strchrnul(first, '|') = 0;
    return json_string(first);
  }
  case SL__ARG_NUMS:
  case SL__ARG_INTS:
    arr = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(arr, json_integer((json_int_t)(i + 2)));
    return arr;
  case SL__ARG_STRS: return json_pack("[s]", "x");
  case SL__ARG_OBJECT:
  case SL__ARG_ARRAY: {
    /* one entry holding its own required keys */
    json_t *entry = json_object();
    for (const sl__arg *b = a->items; b && b->name; b++)
      if (b->flags & SL__ARGF_REQUIRED) json_object_set_new(entry, b->name, synth(b));
    if (a->type == SL__ARG_OBJECT) return a->items ? json_pack("{s:o}", "x", entry) : (json_decref(entry), json_object());
    return a->items ? json_pack("[o]", entry) : (json_decref(entry), json_array());
  }
  case SL__ARG_CHAIN: return json_pack("[{s:s, s:i}]", "op", "range", "stop", 1);
  default: return json_string("x");
  }
}

/* Checks the log for `path`: every defaulted entry of `t` read, not given, at its default; `skip` lists entries read
 * only in some configurations (documented in their table's doc). */
static void expect_defaults_read(const read_log *l, const char *owner, const char *path, const sl__arg *t,
                                 const char *const *skip, int *checked) {
  for (const sl__arg *a = t; a->name; a++) {
    if (!a->def) continue;
    bool skipped = false;
    for (const char *const *k = skip; k && *k; k++) skipped |= !strcmp(*k, a->name);
    if (skipped) continue;
    const read_rec *hit = NULL;
    for (int i = 0; i < l->n && !hit; i++)
      if (!strcmp(l->r[i].path, path) && !strcmp(l->r[i].key, a->name)) hit = &l->r[i];
    if (!hit) fail_msg("%s: %s.%s has a default in its table but the built pipeline never read it through the getters "
                       "(the build said: %s)", owner, path, a->name, sl_error_last());
    json_t *dv = sl__arg_default(t, a->name);
    assert_non_null(dv);
    if (hit->given || !hit->value || !json_equal(hit->value, dv)) {
      char *got = hit->value ? json_dumps(hit->value, JSON_ENCODE_ANY) : NULL;
      fail_msg("%s: %s.%s: the pipeline used %s, the table's default is %s", owner, path, a->name, got ? got : "nothing",
               a->def);
    }
    json_decref(dv);
    (*checked)++;
  }
}

static void build_quietly(json_t *spec) {
  char *text = json_dumps(spec, 0);
  assert_non_null(text);
  sl_pipeline *p = NULL;
  sl_error_clear();
  (void)sl_pipeline_from_json(&p, text, strlen(text), "<test>");
  sl_pipeline_free(p);
  free(text);
}

/* Entries read only in some configurations (their docs say when). */
static const char *const *conditional(const char *owner) {
  static const char *const shard[] = {"index", NULL};
  static const char *const none[] = {NULL};
  if (!strcmp(owner, "shard")) return shard; /* read unless "auto" */
  return none;
}

static void test_pipelines_use_the_schema_defaults(void **s) {
  (void)s;
  static read_log l;
  int checked = 0;
  sl__args_read_hook(log_read, &l);
  /* ops: after a range (or first, for a source) */
  for (size_t i = 0; sl__op_at(i); i++) {
    const sl__op_vt *vt = sl__op_at(i);
    json_t *op = json_pack("{s:s}", "op", vt->kind);
    for (const sl__arg *a = vt->schema->knobs; a->name; a++)
      if (a->flags & SL__ARGF_REQUIRED) json_object_set_new(op, a->name, synth(a));
    if (!strcmp(vt->kind, "map") || !strcmp(vt->kind, "filter"))
      json_object_set_new(op, "fn", json_string(!strcmp(vt->kind, "map") ? "spin" : "length"));
    bool source = vt->flags & SL__OPF_SOURCE;
    json_t *spec = source ? json_pack("{s:[o]}", "ops", op) : json_pack("{s:[{s:s, s:i}, o]}", "ops", "op", "range",
                                                                       "stop", 2, op);
    build_quietly(spec); /* a structure error after parse is no matter here */
    expect_defaults_read(&l, vt->kind, source ? "ops[0]" : "ops[1]", vt->schema->knobs, conditional(vt->kind), &checked);
    log_clear(&l);
    json_decref(spec);
  }
  /* functions: in a map (or filter) after a range */
  for (size_t i = 0; i < sl__fn_builtin_count(); i++) {
    const sl__fn_entry *e = sl__fn_builtin(i);
    json_t *args = json_object();
    for (const sl__arg *a = e->schema->args; a->name; a++)
      if (a->flags & SL__ARGF_REQUIRED) json_object_set_new(args, a->name, synth(a));
    json_t *spec = json_pack("{s:[{s:s, s:i}, {s:s, s:s, s:o}]}", "ops", "op", "range", "stop", 2, "op",
                             (e->def.flags & SL_FN_FILTER) ? "filter" : "map", "fn", e->name, "args", args);
    build_quietly(spec);
    expect_defaults_read(&l, e->name, "ops[1].args", e->schema->args, conditional(e->name), &checked);
    log_clear(&l);
    json_decref(spec);
  }
  sl__args_read_hook(NULL, NULL);
  assert_true(checked > 60);
}

/* ---- the issue's specs, through a whole pipeline ---- */
static char g_dir[256];

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void expect_specf(const char *needle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect_specf(const char *needle, const char *fmt, ...) {
  char *js;
  va_list ap;
  va_start(ap, fmt);
  assert_true(vasprintf(&js, fmt, ap) > 0);
  va_end(ap);
  tu_expect_spec_error(js, SL_EINVAL, needle);
  free(js);
}

static void test_the_issue_specs(void **s) {
  (void)s;
  write_file("a.csv", "1,2\n3,4\n");
  write_file("vocab.txt", "[PAD]\n[UNK]\nhello\nworld\n");
  write_file("a.txt", "hello world\nhello\n");
  expect_specf("ops[3].args.chanels: unknown arg for function 'decode_jpeg'; did you mean 'channels'?",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.csv\"]}, {\"op\": \"tfrecord\"}, {\"op\": \"map\", \"fn\": "
               "\"parse_example\", \"args\": {\"features\": {\"image/encoded\": {\"dtype\": \"bytes\"}}}}, {\"op\": \"map\", "
               "\"fn\": \"decode_jpeg\", \"args\": {\"chanels\": 1}}]}", g_dir);
  expect_specf("ops[2].args.delimeter: unknown arg for function 'parse_csv'; did you mean 'delimiter'?",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.csv\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"parse_csv\", \"args\": {\"delimeter\": \";\", \"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}]}}]}", g_dir);
  expect_specf("ops[3].args.clip_negatve: unknown arg for function 'log1p'; did you mean 'clip_negative'?",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.csv\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"parse_csv\", \"args\": {\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}, {\"name\": \"b\", \"dtype\": "
               "\"float32\"}]}}, {\"op\": \"map\", \"fn\": \"log1p\", \"args\": {\"component\": \"b\", \"clip_negatve\": true}}]}",
               g_dir);
  expect_specf("ops[3] (padded_batch): padded_shapes.tokns: no component 'tokns' reaches this op; did you mean 'tokens'? "
               "(the element has: 'tokens')",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.txt\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"tokenize\", \"args\": {\"vocab\": \"%s/vocab.txt\"}}, {\"op\": \"padded_batch\", \"size\": 2, "
               "\"padded_shapes\": {\"tokns\": [128]}}]}", g_dir, g_dir);
  /* A batch of token lists (lengths vary): mismatched shapes, known before running. */
  expect_specf("ops[3] (batch): component 'tokens' (made by ops[2]) has a dimension 0 that varies",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.txt\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"tokenize\", \"args\": {\"vocab\": \"%s/vocab.txt\"}}, {\"op\": \"batch\", \"size\": 2}]}", g_dir, g_dir);
  /* padded_shapes of the wrong rank. */
  expect_specf("padded_shapes.tokens: 2 dims, but 'tokens' (made by ops[2]) has rank 1",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.txt\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"tokenize\", \"args\": {\"vocab\": \"%s/vocab.txt\"}}, {\"op\": \"padded_batch\", \"size\": 2, "
               "\"padded_shapes\": {\"tokens\": [4, 4]}}]}", g_dir, g_dir);
  /* Inside an arg's entries: parse_csv's columns. */
  expect_specf("ops[2].args.columns[1].cout: unknown key for an entry of 'columns'; did you mean 'count'?",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.csv\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"parse_csv\", \"args\": {\"columns\": [{\"name\": \"a\", \"dtype\": \"int64\"}, {\"name\": \"b\", "
               "\"dtype\": \"float32\", \"cout\": 2}]}}]}", g_dir);
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"parse_example\", \"args\": "
                       "{\"component\": \"value\", \"features\": {\"x\": {\"dtype\": \"int46\"}}}}]}",
                       SL_EINVAL, "ops[1].args.features.x.dtype: \"int46\" is not valid; did you mean \"int64\"?");
  /* A map reading a component no earlier op makes. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"log1p\", \"args\": "
                       "{\"component\": \"x\"}}]}",
                       SL_EINVAL, "ops[1] (map log1p): reads component 'x' (ops[1].args.component), which no earlier op "
                                  "makes (the element has: 'value')");
  /* A default component name that is not there (decode_jpeg reads image/encoded). */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"decode_jpeg\"}]}",
                       SL_EINVAL, "reads component 'image/encoded'");
  /* The right name, the wrong dtype. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"decode_jpeg\", \"args\": "
                       "{\"component\": \"value\"}}]}",
                       SL_EINVAL, "component 'value' is int64 (made by ops[0]); the function reads bytes");
  /* Components consumed by an earlier function are gone. */
  expect_specf("reads component 'line'",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.txt\"]}, {\"op\": \"lines\"}, {\"op\": \"map\", \"fn\": "
               "\"tokenize\", \"args\": {\"vocab\": \"%s/vocab.txt\"}}, {\"op\": \"filter\", \"fn\": \"length\", \"args\": "
               "{\"component\": \"line\"}}]}", g_dir, g_dir);
  /* Inside an interleave's source, the seed element's structure. */
  expect_specf("ops[1].source[0] (lines): component: no component 'path' reaches this op",
               "{\"ops\": [{\"op\": \"files\", \"list\": [\"%s/a.txt\"]}, {\"op\": \"interleave\", \"source\": [{\"op\": "
               "\"lines\", \"component\": \"path\"}]}]}", g_dir);
  /* select of a component that is not there. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"select\", \"args\": "
                       "{\"keep\": [\"value\", \"label\"]}}]}",
                       SL_EINVAL, "ops[1].args.keep[1]: no component 'label' reaches this op");
  /* Op names and op knobs: the nearest valid name. */
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"mapp\", \"fn\": \"identity\"}]}", SL_EINVAL,
                       "ops[1].op: unknown op 'mapp'; did you mean 'map'?");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"decode_jpg\"}]}", SL_EINVAL,
                       "ops[1].fn: unknown function 'decode_jpg'; did you mean 'decode_jpeg'?");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"prefetch\", \"bufer\": 2}]}", SL_EINVAL,
                       "ops[1].bufer: unknown knob for op 'prefetch'; did you mean 'buffer'? (known: buffer)");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"resize\", \"args\": {\"component\": "
                       "\"value\", \"method\": \"bilinar\"}}]}",
                       SL_EINVAL, "ops[1].args.method: \"bilinar\" is not valid; did you mean \"bilinear\"?");
}

/* A function registered at run time has no schema: what follows it is not checked (the structure is open). */
static int noop_call(void *st, sl_elem *e, sl_fn_call *c) {
  (void)st;
  (void)c;
  return sl_elem_set_i64(e, "made", 1);
}

static void test_structure(void **s) {
  (void)s;
  sl_fn_def def = {SL_FN_DEF_VERSION, 0, NULL, noop_call, NULL};
  assert_int_equal(sl_fn_register("test_schema_user_fn", &def, NULL), 0);
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 5}, {\"op\": \"map\", \"fn\": "
                               "\"test_schema_user_fn\"}, {\"op\": \"map\", \"fn\": \"log1p\", \"args\": {\"component\": "
                               "\"made\"}}]}");
  char *d = NULL;
  assert_int_equal(sl_pipeline_structure(&d, p, 1), 0);
  assert_string_equal(d, "value int64 [], ...");
  sl_free(d);
  sl_pipeline_free(p);

  p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"map\", \"fn\": \"cast\", \"args\": "
                  "{\"component\": \"value\", \"output\": \"f\", \"dtype\": \"float32\"}}, {\"op\": \"map\", \"fn\": "
                  "\"hash_bucket\", \"args\": {\"component\": \"value\", \"buckets\": 7}}, {\"op\": \"batch\", \"size\": 4, "
                  "\"drop_remainder\": true}, {\"op\": \"prefetch\"}]}");
  const char *want[] = {"value int64 []", "value int64 [], f float32 []", "value int64 [], f float32 []",
                        "value int64 [4], f float32 [4]", "value int64 [4], f float32 [4]"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(sl_pipeline_structure(&d, p, i), 0);
    assert_string_equal(d, want[i]);
    sl_free(d);
  }
  assert_int_equal(sl_pipeline_structure(&d, p, 5), SL_EINVAL);
  assert_null(d);
  sl_pipeline_free(p);
}

/* ---- every example and suite pipeline: the structure check passes, and agrees with what the pipeline makes ---- */
static void gen(sl_gen_kind kind, const char *dir, int64_t n) {
  sl_gen_opts o = SL_GEN_OPTS_INIT;
  o.kind = kind;
  o.out_dir = dir;
  o.n = n;
  o.shards = 2;
  o.vocab_size = 200;
  o.threads = 1;
  if (sl_gen_run(NULL, &o)) fail_msg("gen %s: %s", dir, sl_error_last());
}

/* The first element of `p` (if any) has the components its root's structure lists, of that dtype, rank and dims. */
static int agree(sl_pipeline *p, const char *what) {
  const sl__struct *st = sl__pipeline_root(p)->shape;
  assert_non_null(st);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  sl_elem e;
  sl_elem_init(&e);
  int rc = sl_iter_next(&e, it);
  if (rc == 0) {
    if (!st->open && e.n != st->n) fail_msg("%s: %d components, the structure says %d", what, e.n, st->n);
    for (int i = 0; i < st->n; i++) {
      const sl__comp_desc *c = &st->c[i];
      const sl_comp *x = sl_elem_get(&e, c->name);
      if (!x) fail_msg("%s: no component '%s'", what, c->name);
      if (c->dtype >= 0 && (int)x->dtype != c->dtype) fail_msg("%s: '%s' is %s", what, c->name, sl_dtype_name(x->dtype));
      if (c->rank >= 0 && x->rank != c->rank) fail_msg("%s: '%s' has rank %d, not %d", what, c->name, x->rank, c->rank);
      for (int d = 0; c->rank >= 0 && d < c->rank; d++)
        if (c->dims[d] >= 0 && x->shape[d] != c->dims[d])
          fail_msg("%s: '%s' dim %d is %lld, not %lld", what, c->name, d, (long long)x->shape[d], (long long)c->dims[d]);
    }
    sl_elem_clear(&e);
  } else if (rc != SL_END) {
    fail_msg("%s: %s", what, sl_error_last());
  }
  sl_iter_free(it);
  return rc == 0;
}

/* A user's function (no arg table): the names its init() asks for are its args; others are refused. */
static int asks_init(void **st, const sl_args *a, void *payload) {
  (void)payload;
  double t;
  bool flip;
  int rc = sl_args_double(&t, a, "threshold", 0.5);
  if (!rc) rc = sl_args_bool(&flip, a, "flip", false); /* asked for, absent or not */
  *st = NULL;
  return rc;
}

static void test_user_function_args(void **s) {
  (void)s;
  sl_fn_def def = {SL_FN_DEF_VERSION, 0, asks_init, noop_call, NULL};
  assert_int_equal(sl_fn_register("test_schema_asks", &def, NULL), 0);
  sl_fn_def bare = {SL_FN_DEF_VERSION, 0, NULL, noop_call, NULL};
  assert_int_equal(sl_fn_register("test_schema_bare", &bare, NULL), 0);
  const char *ok[] = {"{\"threshold\": 0.2}", "{\"threshold\": 0.2, \"flip\": true}", "{}"};
  for (int i = 0; i < 3; i++) {
    char spec[256];
    snprintf(spec, sizeof spec, "{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": "
             "\"test_schema_asks\", \"args\": %s}]}", ok[i]);
    sl_pipeline *p = tu_pipeline(spec);
    sl_pipeline_free(p);
  }
  sl_pipeline *p = NULL;
  const char *typo = "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"test_schema_asks\", \"args\": "
                     "{\"thresold\": 0.2}}]}";
  assert_int_equal(sl_pipeline_from_json(&p, typo, strlen(typo), NULL), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "ops[1].args.thresold"));
  assert_non_null(strstr(sl_error_last(), "did you mean 'threshold'"));
  assert_non_null(strstr(sl_error_last(), "flip"));
  const char *none = "{\"ops\": [{\"op\": \"range\"}, {\"op\": \"map\", \"fn\": \"test_schema_bare\", \"args\": "
                     "{\"x\": 1}}]}";
  assert_int_equal(sl_pipeline_from_json(&p, none, strlen(none), NULL), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "ops[1].args.x"));
  assert_non_null(strstr(sl_error_last(), "known: none"));
  assert_null(p);
}

/* A function registered at run time that declares its components (sl_fn_declare) is checked like a built-in: its
 * reads at build, with the nearest name; what it makes known to the ops after it. Registering it again drops that. */
static void test_user_function_components(void **s) {
  (void)s;
  sl_fn_def def = {SL_FN_DEF_VERSION, 0, NULL, noop_call, NULL};
  assert_int_equal(sl_fn_register("test_schema_decl", &def, NULL), 0);
  sl_fn_io rd[] = {{.name = "valeu", .dtype = SL_INT64, .rank = 0}};
  sl_fn_io mk[] = {{.name = "pair", .dtype = SL_FLOAT32, .rank = 1, .dims = {2}}};
  assert_int_equal(sl_fn_declare("test_schema_decl", rd, 1, mk, 1), 0);
  const char *typo = "{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"test_schema_decl\", "
                     "\"on_error\": \"skip\"}]}";
  tu_expect_spec_error(typo, SL_EINVAL, "ops[1] (map test_schema_decl): reads component 'valeu', which no earlier op "
                                        "makes (the element has: 'value'); did you mean 'value'?");
  rd[0].name = "value";
  assert_int_equal(sl_fn_declare("test_schema_decl", rd, 1, mk, 1), 0);
  const char *after = "{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"test_schema_decl\"}, "
                      "{\"op\": \"map\", \"fn\": \"cast\", \"args\": {\"component\": \"piar\", "
                      "\"dtype\": \"int32\"}}]}";
  tu_expect_spec_error(after, SL_EINVAL, "reads component 'piar' (ops[2].args.component), which no earlier op makes "
                                         "(the element has: 'value', 'pair'); did you mean 'pair'?");
  const char *good = "{\"ops\": [{\"op\": \"range\", \"stop\": 3}, {\"op\": \"map\", \"fn\": \"test_schema_decl\"}]}";
  sl_pipeline *p = tu_pipeline(good);
  char *desc = NULL;
  assert_int_equal(sl_pipeline_structure(&desc, p, 1), 0);
  assert_string_equal(desc, "value int64 [], pair float32 [2]");
  sl_free(desc);
  sl_pipeline_free(p);
  /* Registered again: nothing declared, the structure after it open again. */
  assert_int_equal(sl_fn_register("test_schema_decl", &def, NULL), 0);
  p = tu_pipeline(typo);
  sl_pipeline_free(p);
  /* Bad declarations. */
  assert_int_equal(sl_fn_declare("test_schema_nobody", rd, 1, NULL, 0), SL_ENOTFOUND);
  sl_fn_io bad = {.name = "x", .dtype = 9, .rank = -1};
  assert_int_equal(sl_fn_declare("test_schema_decl", &bad, 1, NULL, 0), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "reads[0] ('x'): dtype 9"));
  sl_fn_io dims = {.name = "x", .dtype = -1, .rank = 1, .dims = {-5}};
  assert_int_equal(sl_fn_declare("test_schema_decl", NULL, 0, &dims, 1), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "makes[0] ('x'): dim 0 is -5"));
}

static void test_examples_and_suite_pipelines(void **s) {
  (void)s;
  const char *src = getenv("SL_SRC");
  if (!src) skip();
  char cwd[1024], cmd[2048];
  assert_non_null(getcwd(cwd, sizeof cwd));
  char dir[300];
  snprintf(dir, sizeof dir, "%s/suite", g_dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/bench && cp -r %s/bench/pipelines %s/bench/ && cp -r %s/examples %s/", dir, src,
           dir, src, dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(chdir(dir), 0);
  gen(SL_GEN_IMAGENET, "bench/data/imagenet", 6);
  gen(SL_GEN_SSD, "bench/data/ssd", 6);
  gen(SL_GEN_TEXT, "bench/data/text", 40);
  gen(SL_GEN_TABULAR, "bench/data/tabular", 40);
  assert_int_equal(symlink("bench/data", "data"), 0);
  const char *specs[] = {"examples/imagenet.json",           "examples/imagenet-fused.json", "examples/imagenet-cacheable.json",
                         "examples/ssd.json",                "examples/tabular.json",        "examples/transformer.json",
                         "bench/pipelines/imagenet.json",    "bench/pipelines/imagenet-cacheable.json",
                         "bench/pipelines/ssd.json",         "bench/pipelines/tabular.json", "bench/pipelines/transformer.json"};
  int compared = 0;
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    sl_pipeline *p = NULL;
    if (sl_pipeline_from_file(&p, specs[k])) fail_msg("%s: %s", specs[k], sl_error_last());
    for (int i = 0; i < sl_pipeline_op_count(p); i++) {
      char *d = NULL;
      assert_int_equal(sl_pipeline_structure(&d, p, i), 0);
      assert_null(strstr(d, "...")); /* every op and function of the suite describes itself */
      sl_free(d);
    }
    sl_pipeline_free(p);
    /* Each top-level prefix of the spec, run to its first element: the structure agrees with it. */
    FILE *f = fopen(specs[k], "r");
    assert_non_null(f);
    json_t *spec = json_loadf(f, 0, NULL);
    fclose(f);
    assert_non_null(spec);
    json_t *ops = json_object_get(spec, "ops");
    for (size_t n = 1; n <= json_array_size(ops); n++) {
      json_t *cut = json_deep_copy(spec), *cops = json_object_get(cut, "ops");
      while (json_array_size(cops) > n) json_array_remove(cops, json_array_size(cops) - 1);
      char *js = json_dumps(cut, 0);
      sl_pipeline *q = NULL;
      if (sl_pipeline_from_json(&q, js, strlen(js), specs[k])) fail_msg("%s[..%zu]: %s", specs[k], n, sl_error_last());
      char what[300];
      snprintf(what, sizeof what, "%s, ops[0..%zu]", specs[k], n - 1);
      compared += agree(q, what);
      sl_pipeline_free(q);
      free(js);
      json_decref(cut);
    }
    json_decref(spec);
  }
  assert_true(compared > 40);
  assert_int_equal(chdir(cwd), 0);
}

/* ---- docs: generated from the schemas ---- */
static void md_default(sl__str *b, const sl__arg *a) {
  if (a->flags & SL__ARGF_REQUIRED) sl__str_printf(b, "required");
  else if (!a->def) sl__str_printf(b, "none");
  else if (a->type == SL__ARG_STR || a->type == SL__ARG_ENUM || a->type == SL__ARG_COMP || a->type == SL__ARG_COMP_ALT)
    sl__str_printf(b, "`\"%s\"`", a->def);
  else sl__str_printf(b, "`%s`", a->def);
}

static void md_rows(sl__str *b, const sl__arg *t, const char *prefix) {
  for (const sl__arg *a = t; a->name; a++) {
    sl__str_printf(b, "| `%s%s` | %s | ", prefix, a->name, sl__arg_type_name(a));
    md_default(b, a);
    char r[80];
    sl__arg_range(r, sizeof r, a);
    if (a->type == SL__ARG_ENUM) {
      sl__str_printf(b, " | ");
      const char *p = a->values;
      for (bool first = true; *p; first = false) {
        size_t l = strcspn(p, "|");
        sl__str_printf(b, "%s`\"%.*s\"`", first ? "" : ", ", (int)l, p);
        p += l + (p[l] == '|');
      }
      sl__str_printf(b, " | ");
    } else if (r[0]) {
      bool arr = a->type == SL__ARG_NUMS || a->type == SL__ARG_INTS || a->type == SL__ARG_STRS || a->type == SL__ARG_ARRAY;
      sl__str_printf(b, " | %s%s | ", arr ? "length " : "", r);
    } else {
      sl__str_printf(b, " |  | ");
    }
    sl__str_printf(b, "%s%s |\n", (a->flags & SL__ARGF_KNOB) ? "(performance knob, not part of the identity) " : "", a->doc);
    if (a->items) {
      char sub[128];
      snprintf(sub, sizeof sub, "%s%s%s", prefix, a->name, a->type == SL__ARG_ARRAY ? "[]." : ".*.");
      md_rows(b, a->items, sub);
    }
  }
}

static void md_table(sl__str *b, const sl__arg *t, const char *word) {
  sl__str_printf(b, "| %s | type | default | valid | meaning |\n| --- | --- | --- | --- | --- |\n", word);
  md_rows(b, t, "");
}

static void md_ops(sl__str *b) {
  for (size_t i = 0; sl__op_at(i); i++) {
    const sl__op_vt *vt = sl__op_at(i);
    const sl__op_schema *sc = vt->schema;
    sl__str_printf(b, "\n### `%s`\n%c%s. Model kind: %s%s.\n\n", vt->kind, toupper((unsigned char)sc->doc[0]), sc->doc + 1,
                   sl__model_kind_name(sc->model),
                   (sc->flags & SL__OPS_NO_IDENTITY) ? "; not part of the pipeline's identity (the planner adds and "
                                                        "removes it)" : "");
    if (sc->knobs[0].name) md_table(b, sc->knobs, "knob");
    else sl__str_printf(b, "No knobs.\n");
  }
}

static void md_io(sl__str *b, const char *verb, const sl__fn_io *io, const sl__arg *args) {
  bool any = false;
  for (const sl__fn_io *x = io; x && (x->arg || x->name || x->like); x++) {
    sl__str_printf(b, "%s", any ? "; " : verb);
    any = true;
    if (x->arg) sl__str_printf(b, "the component `%s` names", x->arg);
    else sl__str_printf(b, "`%s`", x->name);
    const sl__arg *a = x->arg ? sl__arg_find(args, x->arg) : NULL;
    if (x->arg && x->name) fail_msg("io entry '%s' states a name: its default belongs in the arg table", x->arg);
    if (a && a->def) sl__str_printf(b, " (default `%s`)", a->def);
    else if (x->arg && x->like) sl__str_printf(b, " (default: the one `%s` names)", x->like);
    if (x->dtype >= 0) sl__str_printf(b, ", %s", sl_dtype_name((sl_dtype)x->dtype));
    else if (x->dtype == SL__DT_SAME) sl__str_printf(b, ", of the input's dtype");
    if (x->rank >= 0) sl__str_printf(b, ", rank %d", x->rank);
    else if (x->rank == SL__RANK_SAME) sl__str_printf(b, ", of the input's shape");
    if (x->flags & SL__IO_OPTIONAL) sl__str_printf(b, ", when given");
    if (x->flags & SL__IO_CONSUMED) sl__str_printf(b, ", removed unless `keep`");
  }
  if (any) sl__str_printf(b, ".\n");
}

static void md_fns(sl__str *b) {
  for (size_t i = 0; i < sl__fn_builtin_count(); i++) {
    const sl__fn_entry *e = sl__fn_builtin(i);
    const sl__fn_schema *sc = e->schema;
    sl__str_printf(b, "\n### `%s` args\n%c%s%s.\n", e->name, toupper((unsigned char)sc->doc[0]), sc->doc + 1,
                   (e->def.flags & SL_FN_RANDOM) ? " (random)" : "");
    md_io(b, "Reads ", sc->reads, sc->args);
    md_io(b, "Writes ", sc->writes, sc->args);
    if (sc->infer && !sc->writes) sl__str_printf(b, "What it writes depends on its args (below).\n");
    sl__str_printf(b, "\n");
    if (sc->args[0].name) md_table(b, sc->args, "arg");
    else sl__str_printf(b, "No args.\n");
  }
}

#define BEGIN_MARK "<!-- BEGIN GENERATED from the schemas by tests/unit/test_schema.c (SL_UPDATE_DOCS=1 rewrites it) -->\n"
#define END_MARK "<!-- END GENERATED -->\n"

/* The block between the markers of doc `rel` must be `want`; with SL_UPDATE_DOCS=1 it is rewritten. */
static void check_doc(const char *rel, const char *want) {
  const char *src = getenv("SL_SRC");
  if (!src) skip();
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", src, rel);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  sl__str doc = {0};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) sl__str_append(&doc, buf, n);
  fclose(f);
  char *b = strstr(doc.s, BEGIN_MARK), *e = b ? strstr(b, END_MARK) : NULL;
  if (!b || !e) fail_msg("%s: no generated block (markers '%s' ... '%s')", rel, BEGIN_MARK, END_MARK);
  b += strlen(BEGIN_MARK);
  bool same = (size_t)(e - b) == strlen(want) && !memcmp(b, want, strlen(want));
  if (!same && getenv("SL_UPDATE_DOCS") && !strcmp(getenv("SL_UPDATE_DOCS"), "1")) {
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite(doc.s, 1, (size_t)(b - doc.s), f);
    fputs(want, f);
    fputs(e, f);
    fclose(f);
    fprintf(stderr, "%s: generated block rewritten\n", rel);
  } else if (!same) {
    size_t k = 0;
    while (b + k < e && want[k] && b[k] == want[k]) k++;
    fail_msg("%s disagrees with the schemas near: '%.80s' (the schemas say '%.80s'); run the test with SL_UPDATE_DOCS=1 "
             "to regenerate the block", rel, b + k, want + k);
  }
  sl__str_dispose(&doc);
}

static void test_docs_match_the_schemas(void **s) {
  (void)s;
  sl__str ops = {0}, fns = {0};
  md_ops(&ops);
  sl__str_printf(&ops, "\n");
  md_fns(&fns);
  sl__str_printf(&fns, "\n");
  check_doc("docs/spec.md", ops.s);
  check_doc("docs/functions.md", fns.s);
  sl__str_dispose(&ops);
  sl__str_dispose(&fns);
}

static int setup(void **s) {
  (void)s;
  snprintf(g_dir, sizeof g_dir, "%s/sl-schema-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  return mkdtemp(g_dir) ? 0 : -1;
}
static int teardown(void **s) {
  (void)s;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_has_a_schema),
      cmocka_unit_test(test_every_function_has_a_schema),
      cmocka_unit_test(test_unknown_names_suggest_the_nearest),
      cmocka_unit_test(test_types_and_ranges_are_enforced),
      cmocka_unit_test(test_defaults_are_applied),
      cmocka_unit_test(test_pipelines_use_the_schema_defaults),
      cmocka_unit_test(test_the_issue_specs),
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_user_function_args),
      cmocka_unit_test(test_user_function_components),
      cmocka_unit_test(test_examples_and_suite_pipelines),
      cmocka_unit_test(test_docs_match_the_schemas),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

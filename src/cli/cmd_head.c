/* cli/cmd_head.c: `sluice head SPEC [-n N] [--json]`: the first elements a pipeline yields, each component's name,
 * dtype, shape and first values (strings abbreviated), to see what a spec makes before training on it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

enum { HEAD_VALUES = 8, HEAD_STRINGS = 4, HEAD_CHARS = 40 };

static void head_help(FILE *f) {
  fprintf(f,
          "usage: sluice head SPEC [-n N] [--json]\n\n"
          "Runs the pipeline in SPEC until it has yielded N elements (default 5) and prints each one: every\n"
          "component's name, dtype and shape, with its first %d values (first %d strings, each abbreviated to %d\n"
          "characters; bytes outside printable ASCII as \\xNN).\n\n"
          "  -n N      how many elements (default 5)\n"
          "  --json    {\"spec\", \"elements\": [{\"components\": [{\"name\", \"dtype\", \"shape\", \"count\", \"values\"}]}]}\n"
          "            on stdout; on failure {\"status\": \"error\", \"error\": ...}\n",
          HEAD_VALUES, HEAD_STRINGS, HEAD_CHARS);
}

/* A string shown in at most HEAD_CHARS source bytes, printable ASCII kept, the rest escaped; "..." when cut. */
static void abbrev(const unsigned char *s, size_t len, char *out, size_t cap) {
  size_t o = 0, shown = len < HEAD_CHARS ? len : HEAD_CHARS;
  for (size_t i = 0; i < shown && o + 8 < cap; i++) {
    unsigned char c = s[i];
    if (c == '\n') o += (size_t)snprintf(out + o, cap - o, "\\n");
    else if (c == '\t') o += (size_t)snprintf(out + o, cap - o, "\\t");
    else if (c == '\\') o += (size_t)snprintf(out + o, cap - o, "\\\\");
    else if (c >= 32 && c < 127) out[o++] = (char)c;
    else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
  }
  if (shown < len && o + 4 < cap) o += (size_t)snprintf(out + o, cap - o, "...");
  out[o] = 0;
}

static double value_at(const sl_comp *c, const void *d, int64_t i) {
  const unsigned char *p = (const unsigned char *)d + (size_t)i * sl_dtype_size(c->dtype);
  switch (c->dtype) {
  case SL_UINT8: return *p;
  case SL_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
  case SL_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
  case SL_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
  default: { double v; memcpy(&v, p, 8); return v; }
  }
}

static bool is_int(sl_dtype dt) { return dt == SL_UINT8 || dt == SL_INT32 || dt == SL_INT64; }

/* The number of values, and how many of them the payload really holds (a short payload is shown, not read past). */
static int64_t comp_count(const sl_comp *c, int64_t *avail) {
  int64_t n = 1;
  if (sl_shape_count(&n, c->rank, c->shape)) n = 0;
  if (c->dtype == SL_BYTES) *avail = n;
  else *avail = (int64_t)(c->size / sl_dtype_size(c->dtype)) < n ? (int64_t)(c->size / sl_dtype_size(c->dtype)) : n;
  return n;
}

static void print_comp(const sl_comp *c, int width) {
  char shape[128] = "[";
  for (int d = 0; d < c->rank; d++) {
    size_t l = strlen(shape);
    snprintf(shape + l, sizeof shape - l, "%s%lld", d ? ", " : "", (long long)c->shape[d]);
  }
  strncat(shape, "]", sizeof shape - strlen(shape) - 1);
  printf("  %-*s %-8s %-16s", width, c->name, sl_dtype_name(c->dtype), shape);
  int64_t avail, n = comp_count(c, &avail);
  if (c->dtype == SL_BYTES) {
    int64_t shown = avail < HEAD_STRINGS ? avail : HEAD_STRINGS;
    size_t total = 0;
    for (int64_t i = 0; i < shown; i++) {
      const void *s;
      size_t len;
      char buf[HEAD_CHARS * 4 + 8];
      if (sl_comp_string(&s, &len, c, i)) break;
      abbrev(s, len, buf, sizeof buf);
      printf("%s\"%s\"", i ? " " : " ", buf);
      total = len;
    }
    if (c->rank == 0) printf(" (%zu bytes)", total);
    else if (n > shown) printf(" ... (%lld strings)", (long long)n);
  } else {
    const void *d = sl_comp_data(c);
    int64_t shown = avail < HEAD_VALUES ? avail : HEAD_VALUES;
    for (int64_t i = 0; i < shown; i++) {
      if (c->dtype == SL_INT64) { /* read exactly: a double holds only 53 bits */
        int64_t v;
        memcpy(&v, (const unsigned char *)d + (size_t)i * 8, 8);
        printf(" %lld", (long long)v);
      } else if (is_int(c->dtype)) {
        printf(" %lld", (long long)value_at(c, d, i));
      } else {
        printf(" %.6g", value_at(c, d, i));
      }
    }
    if (n > shown) printf(" ... (%lld values)", (long long)n);
  }
  printf("\n");
}

static json_t *comp_json(const sl_comp *c) {
  json_t *shape = json_array(), *vals = json_array();
  for (int d = 0; d < c->rank; d++) json_array_append_new(shape, json_integer(c->shape[d]));
  int64_t avail, n = comp_count(c, &avail);
  if (c->dtype == SL_BYTES) {
    for (int64_t i = 0; i < avail && i < HEAD_STRINGS; i++) {
      const void *s;
      size_t len;
      char buf[HEAD_CHARS * 4 + 8];
      if (sl_comp_string(&s, &len, c, i)) break;
      abbrev(s, len, buf, sizeof buf);
      json_array_append_new(vals, json_string(buf));
    }
  } else {
    const void *d = sl_comp_data(c);
    for (int64_t i = 0; i < avail && i < HEAD_VALUES; i++) {
      if (c->dtype == SL_INT64) {
        int64_t v;
        memcpy(&v, (const unsigned char *)d + (size_t)i * 8, 8);
        json_array_append_new(vals, json_integer(v));
        continue;
      }
      double v = value_at(c, d, i);
      if (is_int(c->dtype)) json_array_append_new(vals, json_integer((json_int_t)v));
      else json_array_append_new(vals, isfinite(v) ? json_real(v) : json_null()); /* JSON has no NaN/Inf */
    }
  }
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(c->name));
  json_object_set_new(o, "dtype", json_string(sl_dtype_name(c->dtype)));
  json_object_set_new(o, "shape", shape);
  json_object_set_new(o, "count", json_integer(n));
  if (c->dtype == SL_BYTES && c->rank == 0) json_object_set_new(o, "bytes", json_integer((json_int_t)c->size));
  json_object_set_new(o, "values", vals);
  return o;
}

int cmd_head(int argc, char **argv) {
  const char *spec = NULL;
  int64_t take = 5;
  bool json = false;
  const cli_opt opts[] = {
      {.name = "-n", .alias = "--take", .type = CLI_INT, .dst = &take, .lo = 1, .hi = (double)INT64_MAX,
       .must = "a positive number of elements"},
      {.name = "--json", .type = CLI_FLAG, .dst = &json},
      {.name = NULL},
  };
  const cli_args args = {.cmd = "head", .opts = opts, .help = head_help, .pos = &spec, .npos = 1, .noun = "spec"};
  int parsed = cli_parse(&args, argc, argv);
  if (parsed) return parsed < 0 ? CLI_OK : parsed;
  if (!spec) return cli_usage("head", "a SPEC file is required");
  sl_pipeline *p = NULL;
  sl_iter *it = NULL;
  char msg[1024];
  if (cli_open_spec(&p, spec, msg, sizeof msg) == 0 && sl_pipeline_iter(&it, p))
    snprintf(msg, sizeof msg, "%s", sl_error_last());
  if (!it) {
    if (json) cli_json_error(msg);
    sl_pipeline_free(p);
    return cli_fail(false, "%s", msg);
  }
  json_t *elems = json ? json_array() : NULL;
  sl_elem e;
  sl_elem_init(&e);
  int rc = 0;
  int64_t n = 0;
  for (; n < take && (rc = sl_iter_next(&e, it)) == 0; n++) {
    if (json) {
      json_t *comps = json_array(), *o = json_object();
      for (int k = 0; k < e.n; k++) json_array_append_new(comps, comp_json(&e.c[k]));
      json_object_set_new(o, "components", comps);
      json_array_append_new(elems, o);
    } else {
      int width = 4;
      for (int k = 0; k < e.n; k++)
        if ((int)strlen(e.c[k].name) > width) width = (int)strlen(e.c[k].name);
      printf("element %lld\n", (long long)n);
      for (int k = 0; k < e.n; k++) print_comp(&e.c[k], width);
    }
    sl_elem_clear(&e);
  }
  if (rc < 0) snprintf(msg, sizeof msg, "%s", sl_error_last());
  sl_iter_free(it);
  int ret = CLI_OK;
  if (rc < 0) {
    if (json) cli_json_error(msg);
    ret = cli_fail(false, "%s", msg);
  } else if (json) {
    json_t *doc = json_object();
    json_object_set_new(doc, "spec", json_string(spec));
    json_object_set_new(doc, "status", json_string("ok"));
    json_object_set_new(doc, "elements", elems);
    elems = NULL;
    char *t = json_dumps(doc, JSON_REAL_PRECISION(7));
    json_decref(doc);
    if (!t) ret = cli_fail(false, "head: out of memory writing the JSON");
    else printf("%s\n", t);
    free(t);
  } else if (n < take) {
    printf("(the stream ended after %lld element%s)\n", (long long)n, n == 1 ? "" : "s");
  }
  json_decref(elems);
  sl_pipeline_free(p);
  return ret;
}

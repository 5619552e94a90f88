/* prov/store/store_export.c: the store, or a query's result list, as JSON (sluice prov export / --json). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/store/store_int.h"

static json_t *prop_json(const sl_prov_prop *pr) {
  switch (pr->type) {
  case SL_PROV_T_INT: return json_integer(pr->i);
  case SL_PROV_T_DOUBLE: return isfinite(pr->d) ? json_real(pr->d) : json_null();
  case SL_PROV_T_BOOL: return json_boolean(pr->i);
  case SL_PROV_T_STRING:
  case SL_PROV_T_STRUCT: return json_string(pr->s ? pr->s : "");
  case SL_PROV_T_PROTO: {
    json_t *o = json_object();
    json_object_set_new(o, "bytes", json_integer((json_int_t)pr->len));
    char *b64 = NULL; /* the bytes themselves, so a reader can compare them (a serialized Any, as MLMD keeps) */
    if (sl__mlmd_proto_encode(&b64, NULL, pr->bytes, pr->len) == 0) json_object_set_new(o, "base64", json_string(b64));
    sl__free(b64);
    return o;
  }
  default: return json_null();
  }
}

static json_t *nodes_json(const sl_prov_list *l, sl_prov_kind kind) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < l->n; i++) {
    const sl_prov_node *n = &l->nodes[i];
    json_t *o = json_object(), *props = json_object(), *custom = json_object();
    json_object_set_new(o, "id", json_integer(n->id));
    json_object_set_new(o, "type", json_string(n->type_name ? n->type_name : ""));
    json_object_set_new(o, "type_id", json_integer(n->type_id));
    if (n->name) json_object_set_new(o, "name", json_string(n->name));
    if (kind == SL_PROV_ARTIFACT) json_object_set_new(o, "uri", n->uri ? json_string(n->uri) : json_null());
    if (kind != SL_PROV_CONTEXT) json_object_set_new(o, "state", json_string(sl_prov_state_name(kind, n->state)));
    json_object_set_new(o, "create_time_since_epoch", json_integer(n->create_ms));
    json_object_set_new(o, "last_update_time_since_epoch", json_integer(n->update_ms));
    if (n->depth) json_object_set_new(o, "depth", json_integer(n->depth));
    for (size_t j = 0; j < n->nprops; j++)
      json_object_set_new(n->props[j].custom ? custom : props, n->props[j].name, prop_json(&n->props[j]));
    json_object_set_new(o, "properties", props);
    json_object_set_new(o, "custom_properties", custom);
    json_array_append_new(a, o);
  }
  return a;
}

int sl_prov_list_to_json(char **json, const sl_prov_list *l) {
  *json = NULL;
  json_t *root = json_object(), *nodes = json_array(), *evs = json_array();
  if (!root || !nodes || !evs) {
    json_decref(root);
    json_decref(nodes);
    json_decref(evs);
    return sl__oom("json");
  }
  for (size_t i = 0; i < l->n; i++) {
    sl_prov_list one = {(sl_prov_node *)&l->nodes[i], 1, NULL, 0};
    json_t *a = nodes_json(&one, l->nodes[i].kind);
    json_t *o = json_array_get(a, 0);
    static const char *K[] = {"execution", "artifact", "context"};
    json_object_set_new(o, "kind", json_string(K[l->nodes[i].kind]));
    json_object_set_new(o, "depth", json_integer(l->nodes[i].depth));
    json_array_append(nodes, o);
    json_decref(a);
  }
  for (size_t i = 0; i < l->nevents; i++) {
    const sl_prov_event *e = &l->events[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(e->id));
    json_object_set_new(o, "artifact_id", json_integer(e->artifact_id));
    json_object_set_new(o, "execution_id", json_integer(e->execution_id));
    json_object_set_new(o, "type", json_string(sl_prov_event_name(e->type)));
    json_object_set_new(o, "milliseconds_since_epoch", json_integer(e->ms));
    json_object_set_new(o, "path", e->path ? json_string(e->path) : json_null());
    json_array_append_new(evs, o);
  }
  json_object_set_new(root, "nodes", nodes);
  json_object_set_new(root, "events", evs);
  char *s = json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  if (!s) return sl__oom("json");
  *json = sl__strdup(s);
  sl__free(s);
  return *json ? 0 : sl__oom("json");
}

static int pairs_json(sl_prov *p, json_t *root, const char *key, const char *sql, const char *c1, const char *c2) {
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, sql);
  if (rc) return rc;
  json_t *a = json_array();
  while ((rc = sl__pstmt_step(st)) == 1) {
    json_t *o = json_object();
    json_object_set_new(o, c1, json_integer(sl__pstmt_i64(st, 0)));
    json_object_set_new(o, c2, json_integer(sl__pstmt_i64(st, 1)));
    json_array_append_new(a, o);
  }
  sl__pstmt_free(st);
  json_object_set_new(root, key, a);
  return rc < 0 ? rc : 0;
}

int sl_prov_export_json(char **json, sl_prov *p) {
  *json = NULL;
  json_t *root = json_object();
  if (!root) return sl__oom("export");
  json_object_set_new(root, "schema_version", json_integer(10));
  int rc = 0;
  sl_prov_list *types = NULL;
  if (!(rc = sl_prov_types(&types, p))) {
    json_t *a = json_array();
    static const char *K[] = {"execution", "artifact", "context"};
    for (size_t i = 0; i < types->n; i++) {
      const sl_prov_node *t = &types->nodes[i];
      json_t *o = json_object(), *pr = json_object();
      json_object_set_new(o, "id", json_integer(t->id));
      json_object_set_new(o, "name", json_string(t->type_name));
      json_object_set_new(o, "kind", json_string(t->kind >= 0 && t->kind <= 2 ? K[t->kind] : "?"));
      if (t->name) json_object_set_new(o, "base_type", json_string(t->name));
      static const char *PT[] = {"UNKNOWN", "INT", "DOUBLE", "STRING", "STRUCT", "PROTO", "BOOLEAN"};
      for (size_t j = 0; j < t->nprops; j++)
        json_object_set_new(pr, t->props[j].name,
                            json_string(t->props[j].type >= 0 && t->props[j].type <= 6 ? PT[t->props[j].type] : "?"));
      json_object_set_new(o, "properties", pr);
      json_array_append_new(a, o);
    }
    json_object_set_new(root, "types", a);
    sl_prov_list_free(types);
  }
  static const char *NAMES[3] = {"executions", "artifacts", "contexts"};
  for (int k = 0; !rc && k < 3; k++) {
    sl_prov_list *l;
    if ((rc = sl_prov_find(&l, p, (sl_prov_kind)k, NULL))) break;
    json_object_set_new(root, NAMES[k], nodes_json(l, (sl_prov_kind)k));
    sl_prov_list_free(l);
  }
  if (!rc) {
    sl__pstmt *st;
    char sql[320];
    snprintf(sql, sizeof sql,
             "SELECT e.id, e.artifact_id, e.execution_id, e.type, e.milliseconds_since_epoch, p.is_index_step, "
             "p.step_index, p.step_key FROM Event e LEFT JOIN EventPath p ON p.event_id = e.id ORDER BY e.id, %s",
             sl__pdb_dialect_of(p->db)->path_order);
    rc = sl__pdb_prepare(p->db, &st, sql);
    json_t *a = json_array(), *cur = NULL;
    int64_t last = -1;
    while (!rc && (rc = sl__pstmt_step(st)) == 1) {
      rc = 0;
      int64_t id = sl__pstmt_i64(st, 0);
      if (id != last) {
        cur = json_object();
        json_object_set_new(cur, "id", json_integer(id));
        json_object_set_new(cur, "artifact_id", json_integer(sl__pstmt_i64(st, 1)));
        json_object_set_new(cur, "execution_id", json_integer(sl__pstmt_i64(st, 2)));
        json_object_set_new(cur, "type", json_string(sl_prov_event_name((int)sl__pstmt_i64(st, 3))));
        json_object_set_new(cur, "milliseconds_since_epoch", json_integer(sl__pstmt_i64(st, 4)));
        json_object_set_new(cur, "path", json_array());
        json_array_append_new(a, cur);
        last = id;
      }
      if (!sl__pstmt_null(st, 5)) {
        json_t *stp = json_object();
        if (sl__pstmt_i64(st, 5))
          json_object_set_new(stp, "index", json_integer(sl__pstmt_i64(st, 6)));
        else
          json_object_set_new(stp, "key", json_string(sl__pstmt_text(st, 7) ? sl__pstmt_text(st, 7) : ""));
        json_array_append_new(json_object_get(cur, "path"), stp);
      }
    }
    if (rc > 0) rc = 0;
    sl__pstmt_free(st);
    json_object_set_new(root, "events", a);
  }
  if (!rc)
    rc = pairs_json(p, root, "attributions", "SELECT context_id, artifact_id FROM Attribution ORDER BY id",
                    "context_id", "artifact_id");
  if (!rc)
    rc = pairs_json(p, root, "associations", "SELECT context_id, execution_id FROM Association ORDER BY id",
                    "context_id", "execution_id");
  if (!rc)
    rc = pairs_json(p, root, "parent_contexts",
                    "SELECT context_id, parent_context_id FROM ParentContext ORDER BY context_id, parent_context_id",
                    "context_id", "parent_context_id");
  if (rc < 0) {
    json_decref(root);
    return rc;
  }
  char *s = json_dumps(root, JSON_INDENT(2));
  json_decref(root);
  if (!s) return sl__oom("export");
  *json = sl__strdup(s);
  sl__free(s);
  return *json ? 0 : sl__oom("export");
}

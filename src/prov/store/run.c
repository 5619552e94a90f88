/* prov/store/run.c: recording sluice's own runs (sluice run/trace/optimize --record DB) as MLMD executions in a
 * `pipeline` context named after the spec, with the data files as input artifacts and the trace or tuned spec
 * as outputs. One transaction per call, so concurrent recorders never see half a record; a run may be recorded
 * RUNNING when it starts and finished by a second call, so that a run killed midway stays visible. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "prov/store/store_int.h"

/* An existing artifact of `type_id` with this uri, size and mtime (the same file, unchanged) links runs into
 * one lineage; otherwise a new artifact. */
static int file_artifact(sl_prov *p, int64_t *id, int64_t type_id, const char *path, int64_t now_ms) {
  struct stat sb;
  if (stat(path, &sb) != 0) return sl__err(SL_EIO, "%s: %s", path, strerror(errno));
  char real[PATH_MAX];
  const char *uri = realpath(path, real) ? real : path;
  int64_t size = (int64_t)sb.st_size, mtime = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
  sl__pstmt *st;
  /* before the query: PostgreSQL refuses to compare an INTEGER column with a wider parameter */
  int rc = sl__prov_int_fits(p, "size", size);
  if (rc || (rc = sl__prov_int_fits(p, "mtime", mtime))) return rc;
  rc = sl__pdb_prepare(p->db, &st,
                           "SELECT a.id FROM Artifact a JOIN ArtifactProperty s ON s.artifact_id = a.id AND s.name = "
                           "'size' JOIN ArtifactProperty m ON m.artifact_id = a.id AND m.name = 'mtime' WHERE "
                           "a.type_id = ? AND a.uri = ? AND s.int_value = ? AND m.int_value = ? ORDER BY a.id LIMIT 1");
  if (rc) return rc;
  if (!(rc = sl__pstmt_bind_i64(st, 1, type_id)) && !(rc = sl__pstmt_bind_text(st, 2, uri)) &&
      !(rc = sl__pstmt_bind_i64(st, 3, size)) && !(rc = sl__pstmt_bind_i64(st, 4, mtime)))
    rc = sl__pstmt_step(st);
  if (rc == 1) {
    *id = sl__pstmt_i64(st, 0);
    sl__pstmt_free(st);
    return 0;
  }
  sl__pstmt_free(st);
  if (rc < 0) return rc;
  if ((rc = sl_prov_put_artifact(id, p, type_id, uri, NULL, SL_PROV_A_LIVE, now_ms))) return rc;
  sl_prov_value vs = sl_prov_int(size), vm = sl_prov_int(mtime);
  if ((rc = sl_prov_set_property(p, SL_PROV_ARTIFACT, *id, "size", true, &vs))) return rc;
  return sl_prov_set_property(p, SL_PROV_ARTIFACT, *id, "mtime", true, &vm);
}

/* INPUT events from the spec and the data files. */
static int record_inputs(sl_prov *p, const sl_prov_run *r, int64_t eid, int64_t c_pipe, int64_t t_spec, int64_t t_data,
                         int64_t start) {
  int rc = 0;
  if (r->spec_path) {
    int64_t aid;
    sl_prov_step path[2] = {{"spec", 0}, {NULL, 0}};
    if ((rc = file_artifact(p, &aid, t_spec, r->spec_path, start)) ||
        (rc = sl_prov_put_event(NULL, p, aid, eid, SL_PROV_EV_INPUT, start, path, 2)) ||
        (rc = sl_prov_attribute(p, c_pipe, aid)))
      return rc;
  }
  for (size_t i = 0; i < r->ninputs; i++) {
    int64_t aid;
    sl_prov_step path[2] = {{"data", 0}, {NULL, (int64_t)i}};
    if ((rc = file_artifact(p, &aid, t_data, r->inputs[i], start)) ||
        (rc = sl_prov_put_event(NULL, p, aid, eid, SL_PROV_EV_INPUT, start, path, 2)) ||
        (rc = sl_prov_attribute(p, c_pipe, aid)))
      return rc;
  }
  return 0;
}

/* The start time of execution `eid` (its create time), SL_ENOTFOUND when the store has no such execution. */
static int exec_start(sl_prov *p, int64_t eid, int64_t *start) {
  sl__pstmt *st;
  int rc = sl__pdb_prepare(p->db, &st, "SELECT create_time_since_epoch FROM Execution WHERE id = ?");
  if (rc) return rc;
  if (!(rc = sl__pstmt_bind_i64(st, 1, eid))) rc = sl__pstmt_step(st);
  if (rc == 1) *start = sl__pstmt_i64(st, 0);
  sl__pstmt_free(st);
  if (rc == 0) return sl__err(SL_ENOTFOUND, "no execution %lld to finish", (long long)eid);
  return rc < 0 ? rc : 0;
}

static int record(sl_prov *p, const sl_prov_run *r, int64_t *exec_id) {
  int64_t now = sl__prov_now_ms();
  int64_t start = r->start_ms ? r->start_ms : now - (int64_t)(r->elapsed * 1000.0);
  int64_t t_exec, t_data, t_spec, t_pipe, t_run, c_pipe, c_run, eid = r->execution_id;
  int rc;
  if (eid && (rc = exec_start(p, eid, &start))) return rc; /* finishing: the run started when it was recorded */
  int64_t end = start + (int64_t)(r->elapsed * 1000.0);
  int state = r->running    ? SL_PROV_E_RUNNING
              : r->failed   ? SL_PROV_E_FAILED
              : r->canceled ? SL_PROV_E_CANCELED
                            : SL_PROV_E_COMPLETE;
  if ((rc = sl_prov_put_type(&t_exec, p, SL_PROV_EXECUTION, r->kind, NULL, 0, "mlmd.Process")) ||
      (rc = sl_prov_put_type(&t_data, p, SL_PROV_ARTIFACT, "sluice.Data", NULL, 0, "mlmd.Dataset")) ||
      (rc = sl_prov_put_type(&t_spec, p, SL_PROV_ARTIFACT, "sluice.Spec", NULL, 0, NULL)) ||
      (rc = sl_prov_put_type(&t_pipe, p, SL_PROV_CONTEXT, "pipeline", NULL, 0, NULL)) ||
      (rc = sl_prov_put_type(&t_run, p, SL_PROV_CONTEXT, "pipeline_run", NULL, 0, NULL)))
    return rc;
  if ((rc = sl_prov_put_context(&c_pipe, p, t_pipe, r->pipeline, start))) return rc;
  bool finish = eid != 0;
  if (finish) rc = sl_prov_set_execution_state(p, eid, state, end);
  else rc = sl_prov_put_execution(&eid, p, t_exec, NULL, state, start, r->running ? start : end);
  if (rc) return rc;
  char runname[600];
  snprintf(runname, sizeof runname, "%s.%lld.%lld", r->pipeline, (long long)start, (long long)eid);
  if ((rc = sl_prov_put_context(&c_run, p, t_run, runname, start))) return rc;
  if (!finish && ((rc = sl_prov_set_parent_context(p, c_run, c_pipe)) || (rc = sl_prov_associate(p, c_pipe, eid)) ||
                  (rc = sl_prov_associate(p, c_run, eid))))
    return rc;
  sl_prov_value v;
  if (!finish && (rc = record_inputs(p, r, eid, c_pipe, t_spec, t_data, start))) return rc;
  if (r->running) {
    v = sl_prov_string("RUNNING");
    *exec_id = eid;
    return sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "state", true, &v);
  }
  v = sl_prov_double(r->throughput);
  if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "throughput", true, &v))) return rc;
  v = sl_prov_double(r->cpu_seconds);
  if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "cpu_seconds", true, &v))) return rc;
  v = sl_prov_double(r->elapsed);
  if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "elapsed", true, &v))) return rc;
  if (r->busiest_load > 0) {
    v = sl_prov_double(r->busiest_load);
    if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "busiest_load", true, &v))) return rc;
  }
  if (r->bottleneck) {
    v = sl_prov_string(r->bottleneck);
    if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "bottleneck", true, &v))) return rc;
  }
  v = sl_prov_string(sl_prov_state_name(SL_PROV_EXECUTION, state));
  if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "state", true, &v))) return rc;
  if (r->tuner) {
    v = sl_prov_string(r->tuner);
    if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "tuner", true, &v))) return rc;
    v = sl_prov_int(r->tuner_solves);
    if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "tuner_solves", true, &v))) return rc;
    if (r->tuner_changes) {
      v = sl_prov_string(r->tuner_changes);
      if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "tuner_changes", true, &v))) return rc;
    }
  }
  if (r->failed) {
    v = sl_prov_string(r->error ? r->error : "");
    if ((rc = sl_prov_set_property(p, SL_PROV_EXECUTION, eid, "error", true, &v))) return rc;
  }
  for (size_t i = 0; i < r->noutputs; i++) {
    const sl_prov_output *o = &r->outputs[i];
    if (!o->path || !o->type) return sl__err(SL_EINVAL, "output %zu: path and type are required", i);
    int64_t tid, aid;
    const char *key = !strcmp(o->type, "sluice.Trace") ? "trace" : !strcmp(o->type, "sluice.Spec") ? "spec" : "output";
    sl_prov_step path[2] = {{key, 0}, {NULL, (int64_t)i}};
    if ((rc = sl_prov_put_type(&tid, p, SL_PROV_ARTIFACT, o->type, NULL, 0, NULL))) return rc;
    /* An output that exists is stat'ed like an input; one that does not (a failed run) is recorded PENDING. */
    struct stat sb;
    if (stat(o->path, &sb) == 0) {
      rc = file_artifact(p, &aid, tid, o->path, end);
    } else {
      rc = sl_prov_put_artifact(&aid, p, tid, o->path, NULL, SL_PROV_A_PENDING, end);
    }
    if (rc || (rc = sl_prov_put_event(NULL, p, aid, eid, SL_PROV_EV_OUTPUT, end, path, 2)) ||
        (rc = sl_prov_attribute(p, c_pipe, aid)) || (rc = sl_prov_attribute(p, c_run, aid)))
      return rc;
  }
  *exec_id = eid;
  return 0;
}

int sl_prov_record_run(int64_t *execution_id, const char *uri, const sl_prov_run *r) {
  if (!uri || !r) return sl__err(SL_EINVAL, "record: store uri and run are required");
  if (r->version < 1 || r->version > SL_PROV_RUN_VERSION)
    return sl__err(SL_EVERSION, "record: sl_prov_run version %d", r->version);
  sl_prov_run rr; /* an older struct ends before the fields its version lacks: read only its own */
  memset(&rr, 0, sizeof rr);
  memcpy(&rr, r, r->version == 1 ? offsetof(sl_prov_run, running) : r->version == 2 ? offsetof(sl_prov_run, tuner)
                                                                                     : sizeof rr);
  if (!rr.kind) rr.kind = "sluice.Run"; /* the default (prov.h) */
  r = &rr;
  if (!*r->kind || !r->pipeline || !*r->pipeline)
    return sl__err(SL_EINVAL, "record: the run's kind and pipeline name are required");
  if (r->ninputs && !r->inputs) return sl__err(SL_EINVAL, "record: inputs is NULL");
  if (r->noutputs && !r->outputs) return sl__err(SL_EINVAL, "record: outputs is NULL");
  if (r->running && r->execution_id) return sl__err(SL_EINVAL, "record: running and execution_id exclude each other");
  if (r->tuner_changes) {
    sl__json_oom_take();
    json_error_t je;
    json_t *j = json_loads(r->tuner_changes, 0, &je);
    bool ok = j && json_is_array(j);
    json_decref(j);
    if (!j && sl__json_oom_take()) return sl__oom("record: tuner_changes");
    if (!ok) return sl__err(SL_EINVAL, "record: tuner_changes is not a JSON array%s%s", j ? "" : ": ", j ? "" : je.text);
  }
  sl_prov *p;
  int rc = sl_prov_open(&p, uri, SL_PROV_CREATE);
  if (rc) return sl__err_wrap(rc, "record");
  int64_t eid = 0;
  rc = sl_prov_begin(p);
  if (!rc) rc = sl__prov_txn_end(p, true, record(p, r, &eid));
  sl_prov_close(p);
  if (rc) return sl__err_wrap(rc, "record");
  if (execution_id) *execution_id = eid;
  return 0;
}

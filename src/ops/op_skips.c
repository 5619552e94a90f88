/* ops/op_skips.c: why an op skipped elements under on_error / on_corrupt "skip": a few distinct reasons, each with
 * its count and its first and latest messages (verbatim: a run's warning names its own element and file), so that a
 * user learns which files and why (sl_pipeline_op_skips: Python's
 * SkipWarning, the skipped line of `sluice run`). */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <string.h>

#include "ops/pipeline_int.h"

#define SKIP_REASONS 8

typedef struct sl__skiplog {
  pthread_mutex_t mu;
  int n;
  struct {
    char key[160];    /* the message with its digit runs written '#': groups, never shown */
    char first[1024]; /* the first message in full */
    char last[1024];  /* the latest one (this run's, when the count grew in it) */
    uint64_t count;
  } r[SKIP_REASONS];
  uint64_t other; /* skips whose reason came after the table filled */
} sl__skiplog;

static void reason_key(char *key, size_t cap, const char *msg) {
  size_t k = 0;
  for (const char *c = msg; *c && k + 1 < cap; c++) {
    if (isdigit((unsigned char)*c)) {
      key[k++] = '#';
      while (isdigit((unsigned char)c[1])) c++;
    } else {
      key[k++] = *c;
    }
  }
  key[k] = 0;
}

void sl__op_skip_note(sl__op *op, const char *msg, const void *file, size_t len) {
  sl__skiplog *log = atomic_load(&op->skips);
  if (!log) {
    sl__skiplog *fresh = sl__calloc(1, sizeof *fresh);
    if (!fresh) return;
    pthread_mutex_init(&fresh->mu, NULL);
    if (atomic_compare_exchange_strong(&op->skips, &log, fresh)) {
      log = fresh;
    } else { /* another thread's came first: `log` now holds it */
      pthread_mutex_destroy(&fresh->mu);
      sl__free(fresh);
    }
  }
  char key[sizeof log->r[0].key];
  reason_key(key, sizeof key, msg && *msg ? msg : "(no message)");
  pthread_mutex_lock(&log->mu);
  int i = 0;
  while (i < log->n && strcmp(log->r[i].key, key)) i++;
  if (i == log->n && i < SKIP_REASONS) {
    log->n++;
    snprintf(log->r[i].key, sizeof log->r[i].key, "%s", key);
  }
  if (i < SKIP_REASONS) {
    /* the file, when the message does not name it already */
    char *dst = log->r[i].count ? log->r[i].last : log->r[i].first;
    size_t cap = sizeof log->r[i].last;
    const char *m = msg && *msg ? msg : "(no message)";
    int fl = (int)(len < 512 ? len : 512);
    if (file && !memmem(m, strlen(m), file, (size_t)fl))
      snprintf(dst, cap, "%s (file %.*s)", m, fl, (const char *)file);
    else
      snprintf(dst, cap, "%s", m);
    if (!log->r[i].count) memcpy(log->r[i].last, log->r[i].first, sizeof log->r[i].last);
  }
  if (i < SKIP_REASONS) log->r[i].count++;
  else log->other++;
  pthread_mutex_unlock(&log->mu);
}

void sl__op_skips_free(sl__op *op) {
  sl__skiplog *log = atomic_load(&op->skips);
  if (!log) return;
  pthread_mutex_destroy(&log->mu);
  sl__free(log);
}

int sl__op_skips_json(char **out, sl__op *op) {
  *out = NULL;
  sl__skiplog *log = atomic_load(&op->skips);
  json_t *a = json_array();
  if (!a) return sl__oom("the skip reasons");
  int rc = 0;
  if (log) {
    pthread_mutex_lock(&log->mu);
    for (int k = 0; k < log->n && !rc; k++)
      rc = json_array_append_new(a, json_pack("{s:s, s:I, s:s, s:s}", "reason", log->r[k].key, "count",
                                              (json_int_t)log->r[k].count, "first", log->r[k].first, "last",
                                              log->r[k].last));
    if (!rc && log->other)
      rc = json_array_append_new(a, json_pack("{s:s, s:I, s:n, s:n}", "reason", "other", "count",
                                              (json_int_t)log->other, "first", "last"));
    pthread_mutex_unlock(&log->mu);
  }
  char *s = rc ? NULL : json_dumps(a, JSON_COMPACT);
  json_decref(a);
  if (!s) return sl__oom("the skip reasons");
  *out = sl__strdup(s);
  sl__free(s);
  return *out ? 0 : sl__oom("the skip reasons");
}

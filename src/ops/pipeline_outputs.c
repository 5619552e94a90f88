/* ops/pipeline_outputs.c: an output is never one of the pipeline's own inputs (issue 47). A `cache` "file", a -o,
 * a --save-state or a converter's shard that is the same file as an input the `files` ops list (by device and
 * inode: a symlink or a hard link to it counts) is refused, naming both, before anything is opened for writing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/outfile_int.h"
#include "ops/op_int.h"

typedef struct {
  dev_t dev;
  ino_t ino;
  const char *path;
} file_id;

static int id_cmp(const void *a, const void *b) {
  const file_id *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The inputs' identities, sorted (an input that no longer exists is left out: nothing of it can be destroyed). */
static int input_ids(file_id **out, size_t *n, const sl_pipeline *p) {
  const char **files;
  size_t nf;
  *out = NULL;
  *n = 0;
  int rc = sl_pipeline_input_files(&files, &nf, p);
  if (rc) return rc;
  file_id *ids = sl__calloc(nf + 1, sizeof *ids);
  if (!ids) {
    sl__free(files);
    return sl__oom("the input files' identities");
  }
  size_t k = 0;
  for (size_t i = 0; i < nf; i++) {
    struct stat st;
    if (stat(files[i], &st) == 0) ids[k++] = (file_id){st.st_dev, st.st_ino, files[i]};
  }
  sl__free(files);
  qsort(ids, k, sizeof *ids, id_cmp);
  *out = ids;
  *n = k;
  return 0;
}

/* The input `path` is, or NULL. A temporary's name in `swept` (a directory swept of dead writers' temporaries) is
 * one too: the sweep would remove it. */
static const char *same_input(const file_id *ids, size_t n, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return NULL; /* a new file: not an input */
  file_id key = {st.st_dev, st.st_ino, NULL};
  const file_id *hit = bsearch(&key, ids, n, sizeof *ids, id_cmp);
  return hit ? hit->path : NULL;
}

int sl__pipeline_check_outputs(const sl_pipeline *p, const char *const *outs, size_t nout, const char *swept,
                               const char *const *patterns, const char *what) {
  bool any = swept && patterns; /* outputs that do not exist yet are no input: the inputs need no stat */
  for (size_t i = 0; i < nout && !any; i++) {
    struct stat st;
    any = stat(outs[i], &st) == 0;
  }
  if (!any) return 0;
  file_id *ids;
  size_t n;
  int rc = input_ids(&ids, &n, p);
  if (rc || !n) {
    sl__free(ids);
    return rc;
  }
  for (size_t i = 0; i < nout && !rc; i++) {
    const char *in = same_input(ids, n, outs[i]);
    if (in)
      rc = sl__err(SL_EINVAL, "%s'%s' is the input file '%s' of the pipeline: writing it would destroy the data "
                   "being read (write the output elsewhere)", what ? what : "", outs[i], in);
  }
  if (!rc && swept && patterns) { /* the sweep removes temporaries of dead writers: an input never looks like one */
    struct stat ds;
    for (size_t i = 0; i < n && !rc && stat(swept, &ds) == 0; i++) {
      const char *slash = strrchr(ids[i].path, '/'), *name = slash ? slash + 1 : ids[i].path;
      long pid;
      struct stat ps;
      sl__str dir = {0};
      if (slash) rc = sl__str_append(&dir, ids[i].path, slash == ids[i].path ? 1 : (size_t)(slash - ids[i].path));
      else rc = sl__str_append(&dir, ".", 1);
      if (!rc && sl__outfile_tmp_of(name, patterns, &pid) && stat(dir.s, &ps) == 0 && ps.st_dev == ds.st_dev &&
          ps.st_ino == ds.st_ino)
        rc = sl__err(SL_EINVAL, "the output folder '%s' holds the input file '%s', named as a temporary its sweep "
                     "would remove (rename the input or write the output elsewhere)", swept, ids[i].path);
      sl__str_dispose(&dir);
    }
  }
  sl__free(ids);
  return rc;
}

int sl_pipeline_check_output(const sl_pipeline *p, const char *path) {
  if (!p || !path) return sl__err(SL_EINVAL, "sl_pipeline_check_output: no pipeline or no path");
  return sl__pipeline_check_outputs(p, &path, 1, NULL, NULL, NULL);
}

/* Every `cache` op's file against the inputs: `validate` refuses what `run` would destroy. */
int sl__pipeline_check_caches(const sl_pipeline *p) {
  int rc = 0;
  for (int i = 0; i < sl_pipeline_op_count(p) && !rc; i++) {
    const sl__op *op = sl__pipeline_op(p, i);
    const char *file = sl__cache_file(op);
    if (!file) continue;
    char what[600];
    snprintf(what, sizeof what, "%s.file: ", op->path);
    rc = sl__pipeline_check_outputs(p, &file, 1, NULL, NULL, what);
  }
  return rc;
}

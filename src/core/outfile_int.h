/* core/outfile_int.h: every file sluice writes (cache files, generated datasets, traces, reports, models, -o
 * outputs) is written through this: a hidden temporary beside its final name, created so that nothing planted
 * there is followed, then synced and renamed over the final name. */
#ifndef SL_OUTFILE_INT_H
#define SL_OUTFILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* An output file in the making. `f` is the stream to write to; `tmp` its name until commit. */
typedef struct sl__outfile {
  FILE *f;
  char *tmp;  /* DIR/.NAME.tmp-PID-RANDOM */
  char *path; /* the final name */
  bool in_place; /* an existing device, FIFO or system link (/dev/stdout), written where it is: no tmp */
} sl__outfile;

/* A directory at `path` is refused; an existing device, FIFO or socket, or a link in /dev or /proc (/dev/stdout), is
 * opened for writing in place (no temporary, no rename: the node stays). Otherwise:
 * creates the temporary of `path` in the directory of `path` with O_CREAT|O_EXCL|O_NOFOLLOW (a name taken by
 * anything, a planted symlink included, is skipped for another one). With SL__OUTFILE_SWEEP, first removes the
 * temporaries of `path` whose writer is dead (sl__outfile_sweep); a writer of many files in one directory sweeps
 * it once instead (sl__outfile_sweep_dir). Mode 0666 less the umask, like fopen. SL_EIO naming the file. */
enum { SL__OUTFILE_SWEEP = 1 };
int sl__outfile_open(sl__outfile *o, const char *path, unsigned flags);
/* Flushes, fsyncs, closes and renames the temporary over the final name (a symlink there is replaced, its target
 * untouched), then fsyncs the directory. On failure the temporary is removed, the final name is as it was, and
 * the error names the file and the reason (ENOSPC included). Releases `o` either way. */
int sl__outfile_commit(sl__outfile *o);
/* Closes and removes the temporary; the final name is as it was. Accepts a zeroed or released `o`. */
void sl__outfile_abort(sl__outfile *o);
/* The whole of `data` to `path`, as open (with SL__OUTFILE_SWEEP) + write + commit. */
int sl__outfile_write(const char *path, const void *data, size_t len);
/* Removes the temporaries of `path` (its hidden `.NAME.tmp-PID[-X]`, and the `NAME.tmp.PID` of older caches) whose
 * writer process no longer exists; a live writer's, or one whose process cannot be checked, stays. Returns how
 * many were removed. */
int sl__outfile_sweep(const char *path);
/* The same in `dir` for the writer of many files: the hidden temporaries (".NAME.tmp-PID[-X]") of dead writers whose
 * NAME one of `patterns` (fnmatch globs of the writer's own file names, NULL-terminated) matches. A temporary of
 * another name (an editor's, another program's) is never removed. */
int sl__outfile_sweep_dir(const char *dir, const char *const *patterns);
/* True when `name` is such a temporary of a NAME `patterns` match (whatever its writer), with its writer's pid. */
bool sl__outfile_tmp_of(const char *name, const char *const *patterns, long *pid);
/* True when `name` (a directory entry, no directory part) is a temporary of a file `base` (NULL: of any file), with
 * its writer's pid. */
bool sl__outfile_is_tmp(const char *name, const char *base, long *pid);

#endif

/* gen/gen.c: sl_gen_run: checks options, creates the output folder, runs the record makers of gen_image.c and
 * gen_text.c on `threads` threads in chunks (record i always comes from seed and i alone, so the files do not
 * depend on the thread count), writes records in order through gen_layout.c (shards, or an image folder) and measures what the issue asks the
 * report to say (mean JPEG size, decode cost). Each file is written under a hidden temporary name and renamed when
 * complete, so an interrupted run never leaves a truncated file under a final name. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile_int.h"
#include "gen/gen_int.h"
#include "io/io_int.h"
#include "fns/image_int.h"

static const char *const KIND_NAMES[] = {"imagenet", "ssd", "text", "tabular"};
static const char *const FORMAT_NAMES[] = {"tfrecord", "folder", "tar"};

int sl_gen_kind_parse(sl_gen_kind *out, const char *name) {
  int i = sl__name_index(KIND_NAMES, 4, name);
  if (i >= 0) {
    *out = (sl_gen_kind)i;
    return 0;
  }
  return sl__err(SL_EINVAL, "unknown dataset '%s' (imagenet, ssd, text, tabular)", name ? name : "");
}
const char *sl_gen_kind_name(sl_gen_kind k) { return (unsigned)k < 4 ? KIND_NAMES[k] : "?"; }

int sl_gen_format_parse(sl_gen_format *out, const char *name) {
  int i = sl__name_index(FORMAT_NAMES, 3, name);
  if (i >= 0) {
    *out = (sl_gen_format)i;
    return 0;
  }
  return sl__err(SL_EINVAL, "unknown format '%s' (tfrecord, folder, tar)", name ? name : "");
}

static int mkdirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return sl__err(SL_EINVAL, "out_dir: bad path '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0777) && errno != EEXIST) return sl__err(SL_EIO, "cannot create '%s': %s", buf, strerror(errno));
    buf[i] = c;
  }
  struct stat st;
  if (stat(path, &st) || !S_ISDIR(st.st_mode)) return sl__err(SL_EIO, "'%s' is not a directory", path);
  return 0;
}

#define CHUNK 32

typedef struct {
  const sl_gen_opts *o;
  const void *zipf;
  int64_t base, count;
  int tid, nthreads;
  sl__gen_rec *recs;
  int rc;
  char msg[1024]; /* the worker thread's error message */
} chunk_job;

static int make_one(const sl_gen_opts *o, const void *zipf, int64_t i, sl__gen_rec *r) {
  switch (o->kind) {
  case SL_GEN_IMAGENET:
  case SL_GEN_SSD: return sl__gen_image(o, i, r);
  case SL_GEN_TEXT: return sl__gen_sentence(o, zipf, i, r);
  default: return sl__gen_csv_row(o, i, r);
  }
}

static void *chunk_worker(void *arg) {
  chunk_job *j = arg;
  for (int64_t k = j->tid; k < j->count && !j->rc; k += j->nthreads) {
    j->rc = make_one(j->o, j->zipf, j->base + k, &j->recs[k]);
    if (j->rc) snprintf(j->msg, sizeof j->msg, "%s", sl_error_last());
  }
  return NULL;
}

static void rec_dispose(sl__gen_rec *r) {
  sl__str_dispose(&r->data);
  sl_buf_unref(r->jpeg);
  memset(r, 0, sizeof *r);
}

/* Decode cost: CPU time of decoding the sampled JPEGs with the decoder decode_jpeg uses, best of 3 passes. */
static double measure_decode(sl_buf **jpegs, int n) {
  if (n == 0) return 0;
  sl__jpeg_opts jo = {.channels = 3, .strict = true, .max_pixels = 1 << 30};
  double best = -1;
  for (int pass = 0; pass < 3; pass++) {
    uint64_t t0 = sl__cpu_ns();
    for (int i = 0; i < n; i++) {
      sl_buf *img;
      int64_t h, w, c;
      if (sl__jpeg_decode(sl_buf_data(jpegs[i]), sl_buf_size(jpegs[i]), &jo, NULL, &img, &h, &w, &c)) return -1;
      sl_buf_unref(img);
    }
    double us = (double)(sl__cpu_ns() - t0) / 1e3 / n;
    if (best < 0 || us < best) best = us;
  }
  return best;
}

/* The options as the run reads them: fields left 0 take their defaults (gen.h); a version 1 struct ends before
 * `cancel`, a version 2 before `format`, so only their fields are read. 0, or the error naming the field out of
 * range. */
static int gen_opts(sl_gen_opts *oo, const sl_gen_opts *opts) {
  memset(oo, 0, sizeof *oo);
  memcpy(oo, opts, opts->version == 1   ? offsetof(sl_gen_opts, cancel)
                   : opts->version == 2 ? offsetof(sl_gen_opts, format)
                                        : sizeof *oo);
  if (!oo->n) oo->n = 1000;
  if (!oo->shards) oo->shards = oo->n > 0 && oo->n < 4 ? (int)oo->n : 4;
  if (!oo->quality) oo->quality = 90;
  if (!oo->threads) oo->threads = 1;
  if (!oo->vocab_size) oo->vocab_size = 30000;
  if (!oo->chroma) oo->chroma = 444;
  if (!oo->classes) oo->classes = 1000;
  const sl_gen_opts *o = oo;
  if ((unsigned)o->kind > SL_GEN_TABULAR) return sl__err(SL_EINVAL, "sl_gen_run: unknown kind %d", (int)o->kind);
  if (!o->out_dir || !o->out_dir[0]) return sl__err(SL_EINVAL, "out_dir: required");
  if (o->n < 1) return sl__err(SL_EINVAL, "n: must be >= 1 (got %lld)", (long long)o->n);
  if (o->shards < 1 || o->shards > o->n || o->shards > 100000)
    return sl__err(SL_EINVAL, "shards: must be in 1..min(n, 100000) (got %d)", o->shards);
  if (o->quality < 1 || o->quality > 100) return sl__err(SL_EINVAL, "quality: must be in 1..100 (got %d)", o->quality);
  if (o->chroma != 444 && o->chroma != 420) return sl__err(SL_EINVAL, "chroma: 444 or 420 (got %d)", o->chroma);
  if (o->threads < 1 || o->threads > 256) return sl__err(SL_EINVAL, "threads: must be in 1..256 (got %d)", o->threads);
  if ((unsigned)o->format > SL_GEN_TAR) return sl__err(SL_EINVAL, "format: unknown format %d", (int)o->format);
  if (o->format != SL_GEN_TFRECORD && o->kind != SL_GEN_IMAGENET)
    return sl__err(SL_EINVAL, "format: %s has one layout (TFRecord, text or CSV shards); folder and tar are for "
                   "imagenet", KIND_NAMES[o->kind]);
  if (o->classes < 1 || o->classes > 100000)
    return sl__err(SL_EINVAL, "classes: must be in 1..100000 (got %d)", o->classes);
  if (o->kind == SL_GEN_TEXT && (o->vocab_size < 10 || o->vocab_size > 10000000))
    return sl__err(SL_EINVAL, "vocab_size: must be in 10..10000000");
  return 0;
}

/* Makes records base..base+count-1 into recs[0..count) on up to o->threads threads (this one among them). */
static int make_chunk(chunk_job *jobs, pthread_t *th, const sl_gen_opts *o, const void *zipf, int64_t base,
                      int64_t count, sl__gen_rec *recs) {
  int nt = o->threads < count ? o->threads : (int)count;
  int started = 0, rc = 0;
  for (int t = 0; t < nt; t++) {
    jobs[t] = (chunk_job){o, zipf, base, count, t, nt, recs, 0, {0}};
    if (t > 0 && pthread_create(&th[t], NULL, chunk_worker, &jobs[t])) {
      jobs[t].rc = sl__err(SL_ERROR, "cannot start a generator thread");
      break;
    }
    started = t + 1;
  }
  chunk_worker(&jobs[0]);
  for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < nt && !rc; t++)
    if (jobs[t].rc) rc = sl__err(jobs[t].rc, "%s", jobs[t].msg[0] ? jobs[t].msg : "generator failed");
  return rc;
}

int sl_gen_run(sl_gen_report *report, const sl_gen_opts *opts) {
  if (!opts || opts->version < 1 || opts->version > SL_GEN_OPTS_VERSION)
    return sl__err(SL_EINVAL, "sl_gen_run: options of another version");
  sl_gen_opts oo;
  int rc = gen_opts(&oo, opts);
  if (rc) return rc;
  const sl_gen_opts *o = &oo;
  if ((rc = mkdirs(o->out_dir)) != 0) return rc;
  /* shards of killed runs, whatever their count or format: once, not per shard; nobody else's temporaries */
  static const char *const ours[] = {"train-[0-9]*-of-[0-9]*.csv", "train-[0-9]*-of-[0-9]*.txt",
                                     "train-[0-9]*-of-[0-9]*.tfrecord", "train-[0-9]*-of-[0-9]*.tar", "vocab.txt", NULL};
  sl__outfile_sweep_dir(o->out_dir, ours);
  sl_gen_report rep;
  memset(&rep, 0, sizeof rep);
  void *zipf = NULL;
  sl__str path = {0};
  if (o->kind == SL_GEN_TEXT) {
    if ((rc = sl__str_printf(&path, "%s/vocab.txt", o->out_dir)) ||
        (rc = sl__gen_vocab(o, path.s, &zipf, &rep.vocab_size, &rep.bytes))) {
      sl__gen_zipf_free(zipf);
      sl__str_dispose(&path);
      return rc;
    }
    rep.files++;
  }
  bool images = o->kind == SL_GEN_IMAGENET || o->kind == SL_GEN_SSD;
  sl__gen_rec *recs = sl__calloc(CHUNK, sizeof *recs);
  chunk_job *jobs = sl__calloc((size_t)o->threads, sizeof *jobs);
  pthread_t *th = sl__calloc((size_t)o->threads, sizeof *th);
  enum { NSAMPLE = 48 };
  sl_buf *sample[NSAMPLE];
  int nsample = 0;
  double img_bytes = 0, sum_w = 0, sum_h = 0, tokens = 0;
  /* a failed or cancelled run removes the file in the making (gen_layout.c) */
  sl__gen_sink sink;
  if ((rc = sl__gen_sink_open(&sink, o)) != 0) goto done;
  if (!recs || !jobs || !th) {
    rc = sl__oom("generator");
    goto done;
  }
  for (int64_t base = 0; base < o->n && !rc; base += CHUNK) {
    if (o->cancel && *o->cancel) {
      bool folder = images && o->format == SL_GEN_FOLDER; /* a folder's files are complete one by one */
      rc = sl__err(SL_ECANCELED, "cancelled after %lld records; %d complete %s kept", (long long)rep.records,
                   folder ? sink.files : sink.files > 0 ? sink.files - 1 : 0, folder ? "files" : "shards");
      break;
    }
    int64_t count = o->n - base < CHUNK ? o->n - base : CHUNK;
    rc = make_chunk(jobs, th, o, zipf, base, count, recs);
    for (int64_t k = 0; k < count && !rc; k++) {
      sl__gen_rec *r = &recs[k];
      if ((rc = sl__gen_sink_put(&sink, base + k, r)) != 0) break;
      if (images) {
        img_bytes += (double)sl_buf_size(r->jpeg);
        sum_w += (double)r->w;
        sum_h += (double)r->h;
        rep.boxes += r->boxes;
        if (nsample < NSAMPLE) {
          sample[nsample++] = r->jpeg;
          r->jpeg = NULL;
        }
      } else {
        tokens += (double)r->tokens;
      }
      rep.records++;
      if (o->progress) o->progress(rep.records, o->n, o->payload);
    }
    for (int64_t k = 0; k < count; k++) rec_dispose(&recs[k]);
  }
  {
    int c = sl__gen_sink_close(&sink, !rc);
    if (!rc) rc = c;
  }
  rep.files += sink.files;
  rep.bytes += sink.bytes;
  rep.classes_present = sink.classes_present;
  if (!rc && images && rep.records) {
    rep.mean_image_bytes = img_bytes / (double)rep.records;
    rep.mean_width = sum_w / (double)rep.records;
    rep.mean_height = sum_h / (double)rep.records;
    rep.decode_us = measure_decode(sample, nsample);
    rep.quality = o->quality;
    rep.chroma = o->chroma;
  }
  if (!rc && o->kind == SL_GEN_TEXT) rep.mean_tokens = tokens / (double)rep.records;
done:
  sl__gen_sink_close(&sink, false); /* a failed or cancelled run leaves no partial file */
  for (int i = 0; i < nsample; i++) sl_buf_unref(sample[i]);
  if (recs)
    for (int k = 0; k < CHUNK; k++) rec_dispose(&recs[k]);
  sl__free(recs);
  sl__free(jobs);
  sl__free(th);
  sl__gen_zipf_free(zipf);
  sl__str_dispose(&path);
  if (!rc && report) *report = rep;
  return rc;
}

/* gen/gen_text.c: the text and tabular generators. Text: a vocabulary of pronounceable pseudo-words (shorter
 * words for more frequent ranks, as in natural language), sentences of 5-300 tokens (log-normal lengths, median
 * about 22) drawing words from a Zipf law (s = 1.05), with commas and a final . ? or !. Tabular: Criteo-like rows
 * "label,I1..I13,C1..C26": heavy-tailed integers, 8-hex-digit categoricals with per-column cardinalities from 4 to
 * 2 million and skewed frequencies, each column with its own rate of empty fields. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/outfile_int.h"
#include "gen/gen_int.h"


static const char *const SPECIAL[] = {"[PAD]", "[UNK]", "[BOS]", "[EOS]", ".", ",", "?", "!"};
#define NSPECIAL 8

/* The word of frequency rank r: bijective base-90 numeral over consonant-vowel syllables. */
static size_t word_of(int64_t r, char *out) {
  static const char C[] = "bcdfghjklmnprstvwz", V[] = "aeiou";
  int64_t n = r, span = 90;
  int len = 1;
  while (n >= span && len < 6) {
    n -= span;
    span *= 90;
    len++;
  }
  size_t k = 0;
  for (int i = 0; i < len; i++) {
    int d = (int)(n % 90);
    n /= 90;
    out[k++] = C[d / 5];
    out[k++] = V[d % 5];
  }
  out[k] = 0;
  return k;
}

typedef struct {
  int64_t n;
  double *cdf;
} zipf_t;

void sl__gen_zipf_free(void *z) {
  zipf_t *zz = z;
  if (!zz) return;
  sl__free(zz->cdf);
  sl__free(zz);
}

int sl__gen_vocab(const sl_gen_opts *o, const char *path, void **zipf, int64_t *entries, uint64_t *bytes) {
  zipf_t *z = sl__calloc(1, sizeof *z);
  if (!z) return sl__oom("vocabulary");
  z->n = o->vocab_size;
  z->cdf = sl__mallocarray((size_t)z->n, sizeof(double));
  if (!z->cdf) {
    sl__free(z);
    return sl__oom("vocabulary");
  }
  double sum = 0;
  for (int64_t r = 0; r < z->n; r++) z->cdf[r] = (sum += pow((double)(r + 1), -1.05));
  for (int64_t r = 0; r < z->n; r++) z->cdf[r] /= sum;
  sl__outfile of; /* written beside, renamed when complete */
  int rc = sl__outfile_open(&of, path, 0); /* the directory was swept (sl_gen_run) */
  if (rc) {
    sl__gen_zipf_free(z);
    return rc;
  }
  FILE *f = of.f;
  uint64_t b = 0;
  for (int i = 0; i < NSPECIAL; i++) b += (uint64_t)fprintf(f, "%s\n", SPECIAL[i]);
  char w[32];
  for (int64_t r = 0; r < z->n; r++) {
    size_t n = word_of(r, w);
    w[n] = '\n';
    b += fwrite(w, 1, n + 1, f);
  }
  if ((rc = sl__outfile_commit(&of))) {
    sl__gen_zipf_free(z);
    return rc;
  }
  *zipf = z;
  *entries = z->n + NSPECIAL;
  *bytes += b;
  return 0;
}

static int64_t zipf_draw(const zipf_t *z, sl_rng *r) {
  double u = sl_rng_uniform(r);
  int64_t lo = 0, hi = z->n - 1;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (z->cdf[mid] < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int sl__gen_sentence(const sl_gen_opts *o, const void *zipf, int64_t i, sl__gen_rec *rec) {
  const zipf_t *z = zipf;
  sl_rng r;
  sl_rng_seed(&r, sl__mix64(o->seed ^ 0x74657874ull) ^ sl__mix64((uint64_t)i));
  int64_t len = (int64_t)lround(exp(log(22.0) + 0.85 * sl__rng_normal(&r)));
  if (len < 5) len = 5;
  if (len > 300) len = 300;
  static const char END[] = ".?!";
  char w[32];
  int rc = 0;
  for (int64_t t = 0; t < len - 1 && !rc; t++) {
    size_t n = word_of(zipf_draw(z, &r), w);
    if (t) rc = sl__str_append(&rec->data, " ", 1);
    if (!rc) rc = sl__str_append(&rec->data, w, n);
    if (!rc && t + 2 < len - 1 && sl_rng_uniform(&r) < 0.06) {
      rc = sl__str_append(&rec->data, ",", 1);
      t++;
    }
  }
  double u = sl_rng_uniform(&r);
  char end[2] = {END[u < 0.85 ? 0 : u < 0.95 ? 1 : 2], '\n'};
  if (!rc) rc = sl__str_append(&rec->data, end, 2);
  rec->tokens = len;
  return rc;
}

int sl__gen_csv_row(const sl_gen_opts *o, int64_t i, sl__gen_rec *rec) {
  sl_rng r;
  sl_rng_seed(&r, sl__mix64(o->seed ^ 0x637376ull) ^ sl__mix64((uint64_t)i));
  int rc = sl__str_printf(&rec->data, "%d", sl_rng_uniform(&r) < 0.26 ? 1 : 0);
  for (int j = 0; j < 13 && !rc; j++) {
    /* Column parameters: a function of the seed and the column only. */
    sl_rng c;
  sl_rng_seed(&c, sl__mix64(o->seed ^ (0x1000ull + (uint64_t)j)));
    double miss = 0.02 + 0.4 * sl_rng_uniform(&c), mu = 5.0 * sl_rng_uniform(&c);
    if (sl_rng_uniform(&r) < miss) rc = sl__str_append(&rec->data, ",", 1);
    else rc = sl__str_printf(&rec->data, ",%lld", (long long)floor(exp(mu + 1.5 * sl__rng_normal(&r))) - (j == 1 ? 3 : 1));
  }
  for (int j = 0; j < 26 && !rc; j++) {
    sl_rng c;
  sl_rng_seed(&c, sl__mix64(o->seed ^ (0x2000ull + (uint64_t)j)));
    double pu = sl_rng_uniform(&c), miss = 0.45 * pu * pu, card = exp(log(4.0) + (log(2e6) - log(4.0)) * sl_rng_uniform(&c));
    if (sl_rng_uniform(&r) < miss) {
      rc = sl__str_append(&rec->data, ",", 1);
      continue;
    }
    uint64_t id = (uint64_t)floor(pow(card, sl_rng_uniform(&r)));
    rc = sl__str_printf(&rec->data, ",%08x", (unsigned)(sl__mix64(((uint64_t)j << 40) ^ id ^ o->seed) & 0xffffffffu));
  }
  if (!rc) rc = sl__str_append(&rec->data, "\n", 1);
  return rc;
}

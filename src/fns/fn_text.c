/* fns/fn_text.c: `tokenize`: splits text on whitespace and ASCII punctuation and looks each token up in a
 * vocabulary file (one token per line, id = line number from 0) through an open-addressing hash table keyed by
 * XXH3. Tokens are never copied: a token longer than the longest vocabulary entry is unknown without hashing,
 * so no input can overrun a buffer. Lowercasing hashes through XXH3's streaming API in small chunks. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "fns/fns_int.h"

typedef struct {
  uint64_t hash;
  uint32_t off, len; /* token bytes in the arena */
  int32_t id;        /* -1: empty slot */
} vocab_slot;

typedef struct {
  const char *comp, *output;
  bool lowercase, keep, split_punct;
  int32_t unk, bos, eos;
  char *arena;
  size_t arena_len;
  vocab_slot *slots;
  size_t mask;
  size_t max_len;
  int64_t size;
} tok_state;

static void tok_free(void *st) {
  tok_state *s = st;
  if (!s) return;
  sl__free(s->arena);
  sl__free(s->slots);
  sl__free(s);
}

static uint64_t hash_token(const char *p, size_t n, bool lower) {
  if (!lower) return XXH3_64bits(p, n);
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  char buf[64];
  while (n) {
    size_t k = n < sizeof buf ? n : sizeof buf;
    for (size_t i = 0; i < k; i++) buf[i] = (char)tolower((unsigned char)p[i]);
    XXH3_64bits_update(&st, buf, k);
    p += k;
    n -= k;
  }
  return XXH3_64bits_digest(&st);
}

static bool tok_eq(const char *a, const char *b, size_t n, bool lower) {
  if (!lower) return !memcmp(a, b, n);
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)a[i]) != (unsigned char)b[i]) return false;
  return true;
}

/* The token's id, or -1 when it is not in the vocabulary. */
static int32_t vocab_find(const tok_state *s, const char *p, size_t n) {
  if (n > s->max_len) return -1;
  uint64_t h = hash_token(p, n, s->lowercase);
  for (size_t i = (size_t)h & s->mask;; i = (i + 1) & s->mask) {
    const vocab_slot *v = &s->slots[i];
    if (v->id < 0) return -1;
    if (v->hash == h && v->len == n && tok_eq(p, s->arena + v->off, n, s->lowercase)) return v->id;
  }
}

static int load_vocab(tok_state *s, const char *path, const char *apath) {
  FILE *f;
  int orc = sl__fopen_regular(&f, path); /* a FIFO or a device is refused, never waited on */
  if (orc) return sl__err_wrap(orc, "%s.vocab", apath);
  sl__str text = {0};
  char chunk[65536];
  size_t got;
  int rc = 0;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
    if ((rc = sl__str_append(&text, chunk, got))) break;
  if (!rc && ferror(f)) rc = sl__err(SL_EIO, "%s.vocab: read error on '%s'", apath, path);
  fclose(f);
  if (rc) {
    sl__str_dispose(&text);
    return rc;
  }
  /* Count lines (tokens). */
  size_t lines = 0;
  for (size_t i = 0; i < text.len; i++) lines += text.s[i] == '\n';
  if (text.len && text.s[text.len - 1] != '\n') lines++;
  if (lines == 0) {
    sl__str_dispose(&text);
    return sl__err(SL_EINVAL, "%s.vocab: '%s' is empty (a vocabulary needs at least one token)", apath, path);
  }
  if (lines > INT32_MAX / 4 || text.len > UINT32_MAX) {
    sl__str_dispose(&text);
    return sl__err(SL_EINVAL, "%s.vocab: '%s' is too large", apath, path);
  }
  size_t cap = 16;
  while (cap < lines * 2) cap <<= 1;
  s->slots = sl__mallocarray(cap, sizeof *s->slots);
  if (!s->slots) {
    sl__str_dispose(&text);
    return sl__oom("vocabulary");
  }
  for (size_t i = 0; i < cap; i++) s->slots[i].id = -1;
  s->mask = cap - 1;
  if (s->lowercase)
    for (size_t i = 0; i < text.len; i++) text.s[i] = (char)tolower((unsigned char)text.s[i]);
  size_t start = 0;
  int32_t id = 0;
  for (size_t i = 0; i <= text.len; i++) {
    if (i < text.len && text.s[i] != '\n') continue;
    if (i == text.len && start == text.len) break;
    size_t len = i - start;
    if (len && text.s[start + len - 1] == '\r') len--;
    uint64_t h = hash_token(text.s + start, len, false);
    size_t k = (size_t)h & s->mask;
    for (;; k = (k + 1) & s->mask) {
      vocab_slot *v = &s->slots[k];
      if (v->id < 0) {
        *v = (vocab_slot){h, (uint32_t)start, (uint32_t)len, id};
        break;
      }
      if (v->hash == h && v->len == len && !memcmp(text.s + v->off, text.s + start, len)) break; /* first wins */
    }
    if (len > s->max_len) s->max_len = len;
    id++;
    start = i + 1;
  }
  s->size = id;
  s->arena = text.s;
  s->arena_len = text.len;
  return 0;
}

static int tok_init(void **state, const sl_args *a, void *payload) {
  tok_state *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("tokenize");
  const char *vocab;
  int64_t unk, bos, eos;
  int rc;
  if ((rc = sl__get_str(&s->comp, a, "component")) ||
      (rc = sl__get_str(&s->output, a, "output")) || (rc = sl__get_str(&vocab, a, "vocab")) ||
      (rc = sl__get_bool(&s->lowercase, a, "lowercase")) || (rc = sl__get_bool(&s->keep, a, "keep")) ||
      (rc = sl__get_bool(&s->split_punct, a, "split_punctuation")) ||
      (rc = sl__get_int(&unk, a, "unknown_id")) || (rc = sl__get_int(&bos, a, "bos_id")) ||
      (rc = sl__get_int(&eos, a, "eos_id")))
    goto fail;
  if (!vocab) {
    rc = sl__err(SL_EINVAL, "%s.vocab: required (a file of one token per line)", sl_args_path(a));
    goto fail;
  }
  if ((rc = load_vocab(s, vocab, sl_args_path(a)))) goto fail;
  if (unk == -2) {
    /* Default unknown id: the "[UNK]" or "<unk>" entry when the vocabulary has one, else its size. */
    int32_t u = vocab_find(s, "[UNK]", 5);
    if (u < 0) u = vocab_find(s, "<unk>", 5);
    unk = u < 0 ? s->size : u;
  }
  if (unk < -1 || unk > INT32_MAX || bos < -1 || bos > INT32_MAX || eos < -1 || eos > INT32_MAX) {
    rc = sl__err(SL_EINVAL, "%s: unknown_id, bos_id and eos_id must be -1 (none) or int32 ids", sl_args_path(a));
    goto fail;
  }
  s->unk = (int32_t)unk;
  s->bos = (int32_t)bos;
  s->eos = (int32_t)eos;
  *state = s;
  return 0;
fail:
  tok_free(s);
  return rc;
}

/* Scans text, writing ids to out (when not NULL); returns the token count. Unknown tokens get the unknown id,
 * or are dropped when it is -1. */
static int64_t scan(const tok_state *s, const char *p, size_t n, int32_t *out) {
  int64_t k = 0;
  size_t i = 0;
  while (i < n) {
    unsigned char ch = (unsigned char)p[i];
    if (isspace(ch)) {
      i++;
      continue;
    }
    size_t j = i + 1;
    if (!(s->split_punct && ch < 0x80 && ispunct(ch)))
      while (j < n) {
        unsigned char d = (unsigned char)p[j];
        if (isspace(d) || (s->split_punct && d < 0x80 && ispunct(d))) break;
        j++;
      }
    int32_t id = vocab_find(s, p + i, j - i);
    if (id >= 0 || s->unk >= 0) {
      if (out) out[k] = id >= 0 ? id : s->unk;
      k++;
    }
    i = j;
  }
  return k;
}

static int tok_call(void *st, sl_elem *e, sl_fn_call *call) {
  const tok_state *s = st;
  sl_comp *c;
  int rc = sl__fn_component(e, call, s->comp, &c);
  if (rc) return rc;
  if (c->dtype != SL_BYTES || c->rank != 0)
    return sl__err(SL_EINVAL, "%s: element %llu: '%s' is %s rank %d; expected one text string", call->op_path,
                   (unsigned long long)call->index, s->comp, sl_dtype_name(c->dtype), c->rank);
  const char *p = sl_comp_data(c);
  size_t n = c->size;
  int64_t count = scan(s, p, n, NULL) + (s->bos >= 0) + (s->eos >= 0);
  int64_t shape[1] = {count};
  /* Hold the text: the output may replace the input component. */
  sl_buf *hold = c->buf ? sl_buf_ref(c->buf) : NULL;
  char inl[SL_INLINE_BYTES];
  if (!hold) {
    memcpy(inl, p, n);
    p = inl;
  }
  int32_t *out;
  rc = sl_elem_new_tensor(e, s->output, SL_INT32, 1, shape, (void **)&out);
  if (!rc) {
    int64_t k = 0;
    if (s->bos >= 0) out[k++] = s->bos;
    k += scan(s, p, n, out + k);
    if (s->eos >= 0) out[k++] = s->eos;
    if (!s->keep && strcmp(s->comp, s->output)) sl_elem_remove(e, s->comp);
  }
  sl_buf_unref(hold);
  return rc;
}

/* ---- schemas ---- */
static const sl__arg TOK_ARGS[] = {
    {"component", SL__ARG_COMP, "line", 0, 0, 0, NULL, "the component holding the text"},
    {"output", SL__ARG_COMP, "tokens", 0, 0, 0, NULL, "the component the int32 token ids are written to"},
    {"vocab", SL__ARG_STR, NULL, SL__ARGF_REQUIRED, 0, 0, NULL, "a file of one token per line (the id is the line number)"},
    {"lowercase", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "lowercase the text first"},
    {"keep", SL__ARG_BOOL, "false", 0, 0, 0, NULL, "keep the text after tokenizing"},
    {"split_punctuation", SL__ARG_BOOL, "true", 0, 0, 0, NULL, "make each punctuation mark a token"},
    {"unknown_id", SL__ARG_INT, "-2", SL__LOHI, -2, 2147483647, NULL,
     "id of unknown tokens (-2: the vocabulary's [UNK] or <unk>, else its size; -1: drop them)"},
    {"bos_id", SL__ARG_INT, "-1", SL__LOHI, -1, 2147483647, NULL, "id put first (-1: none)"},
    {"eos_id", SL__ARG_INT, "-1", SL__LOHI, -1, 2147483647, NULL, "id put last (-1: none)"},
    {NULL}};
static const sl__fn_io TOK_READS[] = {{"component", NULL, NULL, SL_BYTES, 0, SL__IO_CONSUMED}, {NULL}};
static const sl__fn_io TOK_WRITES[] = {{"output", NULL, NULL, SL_INT32, 1, 0}, {NULL}};
/* The token list's length varies from element to element. */
static int tok_infer(sl__struct *s, const sl_args *a, const char *origin) {
  json_t *args = a->obj;
  const char *path = a->path;
  (void)args;
  (void)path;
  (void)path;
  (void)origin;
  const char *out;
  int rc = sl__get_str(&out, a, "output");
  if (rc) return rc;
  sl__comp_desc *c = sl__struct_get(s, out);
  if (c) c->dims[0] = SL__DIM_VARIES;
  return 0;
}
static const sl__fn_schema TOK_SCHEMA = {"splits text into int32 token ids by a vocabulary file", TOK_ARGS,
                                         TOK_READS, TOK_WRITES, tok_infer};

const sl__fn_entry sl__fns_text[] = {
    {"tokenize", {SL_FN_DEF_VERSION, 0, tok_init, tok_call, tok_free}, &TOK_SCHEMA},
    {NULL, {0, 0, NULL, NULL, NULL}, NULL},
};

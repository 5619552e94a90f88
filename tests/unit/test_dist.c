/* test_dist.c: the distributed pieces that run without MPI: shard's remainder (keep/drop/pad) and "auto" from the
 * launchers' variables, the hooks dist registers with the engine (shard "auto", the offload transport), the
 * workers' part of a spec, and the offload wire format (round trip, and every truncation or corruption refused). */
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "dist/dist_int.h"
#include "ops/dist_hook_int.h"
#include "testutil.h"

/* The values rank `index` of `num` gets from range(n) with `rem`; returns the count. */
static int64_t shard_values(int64_t *vals, int n, int num, int index, const char *rem) {
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"range\", \"stop\": %d}, {\"op\": \"shard\", \"num_shards\": %d, "
                                "\"index\": %d, \"remainder\": \"%s\"}]}", n, num, index, rem);
  int64_t k = tu_collect_i64(p, "value", vals, 64);
  sl_op_stats st;
  assert_int_equal(sl_pipeline_op_stats(&st, p, 1), 0);
  assert_int_equal(st.cardinality, k); /* the op's cardinality says what it yields */
  sl_pipeline_free(p);
  return k;
}

static void test_shard_remainders(void **s) {
  static const int ns[] = {0, 1, 2, 3, 5, 9, 10, 11};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    int n = ns[t], num = 3;
    int seen_keep[16] = {0}, seen_drop[16] = {0}, seen_pad[16] = {0};
    int64_t counts[3][3];
    for (int r = 0; r < num; r++) {
      int64_t v[64];
      const char *rems[] = {"keep", "drop", "pad"};
      int *seen[] = {seen_keep, seen_drop, seen_pad};
      for (int m = 0; m < 3; m++) {
        counts[m][r] = shard_values(v, n, num, r, rems[m]);
        for (int64_t i = 0; i < counts[m][r]; i++) seen[m][v[i]]++;
      }
    }
    for (int r = 0; r < num; r++) {
      assert_int_equal(counts[1][r], n / num);                  /* drop: the same count everywhere */
      assert_int_equal(counts[2][r], (n + num - 1) / num);      /* pad: likewise, rounded up */
    }
    for (int v = 0; v < n; v++) {
      assert_int_equal(seen_keep[v], 1);                        /* keep: exactly once */
      assert_true(seen_drop[v] == (v < n - n % num ? 1 : 0));   /* drop: the last round unseen */
      int want = 0; /* pad: the stream padded to whole rounds, wrapping around to the epoch's start */
      for (int q = 0; n > 0 && q < (n + num - 1) / num * num; q++) want += q % n == v;
      assert_int_equal(seen_pad[v], want);
    }
  }
}

/* OMPI_COMM_WORLD_SIZE/RANK serve "auto" too (mpirun without sluice's MPI); under "auto" the default is pad. */
static void test_shard_auto_ompi_env(void **s) {
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  int64_t total = 0;
  for (int r = 0; r < 3; r++) {
    char v[8];
    snprintf(v, sizeof v, "%d", r);
    setenv("OMPI_COMM_WORLD_RANK", v, 1);
    sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": "
                                 "\"auto\", \"index\": \"auto\"}]}");
    int64_t n = tu_count(p, 0);
    assert_int_equal(n, 4); /* padded: 10 over 3 ranks is 4 each */
    total += n;
    sl_pipeline_free(p);
  }
  assert_int_equal(total, 12);
  unsetenv("OMPI_COMM_WORLD_RANK");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": \"auto\", "
                       "\"index\": \"auto\"}]}", SL_EINVAL, "OMPI_COMM_WORLD_RANK is not set");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"shard\", \"num_shards\": 2, "
                       "\"remainder\": \"even\"}]}", SL_EINVAL, "ops[1].remainder: \"even\" is not valid");
}

/* A fake distributed runtime: shard "auto" is (4, 1); offload receives 100, 101, 102 instead of its input. */
static int g_opens, g_closes;
static int fake_shard(int64_t *num, int64_t *index, void *payload) {
  *num = 4;
  *index = 1;
  return 0;
}
static int fake_open(void **stream, sl__op *op, void *payload) {
  g_opens++;
  int *k = calloc(1, sizeof *k);
  *stream = k;
  return k ? 0 : SL_ENOMEM;
}
static int fake_next(void *stream, sl_elem *out) {
  int *k = stream;
  if (*k >= 3) return SL_END;
  return sl_elem_set_i64(out, "value", 100 + (*k)++);
}
static void fake_close(void *stream) {
  g_closes++;
  free(stream);
}

static void test_hooks(void **s) {
  sl__dist_hooks h = {fake_shard, fake_open, fake_next, fake_close, NULL};
  sl__dist_register(&h);
  int64_t v[16];
  sl_pipeline *p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 8}, {\"op\": \"shard\", \"num_shards\": "
                               "\"auto\", \"index\": \"auto\"}]}");
  assert_int_equal(tu_collect_i64(p, "value", v, 16), 2);
  assert_int_equal(v[0], 1);
  assert_int_equal(v[1], 5);
  sl_pipeline_free(p);
  p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 8}, {\"op\": \"offload\"}, {\"op\": \"take\", \"count\": 5}]}");
  assert_int_equal(tu_collect_i64(p, "value", v, 16), 3);
  assert_int_equal(v[0], 100);
  assert_int_equal(v[2], 102);
  assert_int_equal(g_opens, 1);
  assert_int_equal(g_closes, 1);
  sl_op_stats st;
  sl_pipeline_op_stats(&st, p, 0);
  assert_int_equal(st.elements_out, 0); /* the part above the cut is not run here */
  sl_pipeline_free(p);
  sl__dist_register(NULL);
  /* without a transport, offload passes its input through */
  p = tu_pipeline("{\"ops\": [{\"op\": \"range\", \"stop\": 8}, {\"op\": \"offload\"}]}");
  assert_int_equal(tu_collect_i64(p, "value", v, 16), 8);
  assert_int_equal(v[7], 7);
  sl_pipeline_free(p);
  tu_expect_spec_error("{\"ops\": [{\"op\": \"range\"}, {\"op\": \"offload\", \"window\": 3}]}", SL_EINVAL, "window");
}

static void test_worker_spec(void **s) {
  json_t *spec = json_loads("{\"name\": \"w\", \"ops\": [{\"op\": \"files\", \"glob\": \"x\"}, {\"op\": \"interleave\", "
                            "\"source\": [{\"op\": \"lines\"}]}, {\"op\": \"offload\"}, {\"op\": \"batch\", \"size\": 2}]}",
                            0, NULL);
  json_t *w = NULL;
  assert_int_equal(sl__offload_worker_spec(&w, spec, 3, 2), 0);
  json_t *ops = json_object_get(w, "ops");
  assert_int_equal(json_array_size(ops), 3); /* files, the inserted shard, interleave: nothing from the cut on */
  json_t *sh = json_array_get(ops, 1);
  assert_string_equal(json_string_value(json_object_get(sh, "op")), "shard");
  assert_int_equal(json_integer_value(json_object_get(sh, "num_shards")), 3);
  assert_int_equal(json_integer_value(json_object_get(sh, "index")), 2);
  assert_string_equal(json_string_value(json_object_get(sh, "remainder")), "keep");
  json_decref(w);
  json_decref(spec);
  /* the user's shard "auto" becomes the workers' group */
  spec = json_loads("{\"ops\": [{\"op\": \"range\", \"stop\": 9}, {\"op\": \"shard\", \"num_shards\": \"auto\", "
                    "\"index\": \"auto\"}, {\"op\": \"offload\"}]}", 0, NULL);
  assert_int_equal(sl__offload_worker_spec(&w, spec, 2, 1), 0);
  ops = json_object_get(w, "ops");
  assert_int_equal(json_array_size(ops), 2);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(ops, 1), "index")), 1);
  json_decref(w);
  json_decref(spec);
  spec = json_loads("{\"ops\": [{\"op\": \"range\", \"stop\": 9}]}", 0, NULL);
  assert_int_equal(sl__offload_worker_spec(&w, spec, 2, 1), SL_EINVAL);
  assert_non_null(strstr(sl_error_last(), "no {\"op\": \"offload\"}"));
  json_decref(spec);
  spec = json_loads("{\"ops\": [{\"op\": \"offload\"}, {\"op\": \"range\", \"stop\": 9}]}", 0, NULL);
  assert_int_equal(sl__offload_worker_spec(&w, spec, 2, 1), SL_EINVAL);
  json_decref(spec);
}

static const char *test_intern(void *ctx, const char *name, size_t len) {
  static char names[16][64];
  static int n;
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && !memcmp(names[i], name, len)) return names[i];
  if (n == 16 || len >= 64) return NULL;
  memcpy(names[n], name, len);
  names[n][len] = 0;
  return names[n++];
}

/* One element of every kind: an int64 scalar, a float32 tensor, a byte string, and an array of strings. */
static void make_elem(sl_elem *e) {
  char *dir = tu_tmpdir("dist");
  char *f = tu_write_file(dir, "l.txt", "a\nbb\nccc\n", 9);
  sl_pipeline *p = tu_pipelinef("{\"ops\": [{\"op\": \"files\", \"list\": [\"%s\"]}, {\"op\": \"interleave\", "
                                "\"source\": [{\"op\": \"lines\"}]}, {\"op\": \"batch\", \"size\": 3}]}", f);
  sl_iter *it = NULL;
  assert_int_equal(sl_pipeline_iter(&it, p), 0);
  assert_int_equal(sl_iter_next(e, it), 0);
  sl_iter_free(it);
  sl_pipeline_free(p);
  tu_rmtree(dir);
  free(f);
  free(dir);
  float *d;
  int64_t shape[2] = {2, 3};
  assert_int_equal(sl_elem_new_tensor(e, "f", SL_FLOAT32, 2, shape, (void **)&d), 0);
  for (int i = 0; i < 6; i++) d[i] = (float)i / 4;
  assert_int_equal(sl_elem_set_bytes(e, "b", NULL, 0, "a byte string longer than sixteen", 33), 0);
  assert_int_equal(sl_elem_set_i64(e, "i", -7), 0);
}

static void test_wire_round_trip_and_corruption(void **s) {
  sl_elem e, back;
  sl_elem_init(&e);
  make_elem(&e);
  void *msg = NULL;
  size_t len = 0;
  assert_int_equal(sl__dist_pack(&msg, &len, &e), 0);
  sl_buf *b = sl_buf_alloc(len);
  memcpy(sl_buf_data(b), msg, len);
  assert_int_equal(sl__dist_unpack(&back, b, test_intern, NULL, 5), 0);
  uint64_t d1, d2;
  assert_int_equal(sl_elem_digest(&d1, &e), 0);
  assert_int_equal(sl_elem_digest(&d2, &back), 0);
  assert_true(d1 == d2);
  sl_elem_clear(&back);
  sl_buf_unref(b);
  /* every truncation, and every single byte flipped in the header and descriptors, is refused or decodes to a
   * valid element: never a read outside the message (ASan watches) */
  for (size_t cut = 0; cut < len; cut++) {
    sl_buf *t = sl_buf_alloc(cut ? cut : 1);
    memcpy(sl_buf_data(t), msg, cut);
    sl_buf *tt = cut ? t : NULL;
    if (tt) {
      int rc = sl__dist_unpack(&back, tt, test_intern, NULL, 5);
      if (rc == 0) sl_elem_clear(&back);
      else assert_non_null(strstr(sl_error_last(), "rank 5 (worker): a malformed element message"));
    }
    sl_buf_unref(t);
  }
  for (size_t i = 0; i < len && i < 8 + 4 * 112; i++) {
    sl_buf *t = sl_buf_alloc(len);
    memcpy(sl_buf_data(t), msg, len);
    ((unsigned char *)sl_buf_data(t))[i] ^= 0xa5;
    if (sl__dist_unpack(&back, t, test_intern, NULL, 5) == 0) sl_elem_clear(&back);
    sl_buf_unref(t);
  }
  sl__free(msg);
  sl_elem_clear(&e);
}

/* A worker packs into the buffers of its finished sends: a buffer large enough is packed into where it is, a small
 * one replaced by a larger; what comes out unpacks to the same element either way. */
static void test_pack_into_reuses_the_buffer(void **s) {
  sl_elem big, small, back;
  sl_elem_init(&big);
  sl_elem_init(&small);
  make_elem(&big);
  assert_int_equal(sl_elem_set_i64(&small, "i", 42), 0);
  void *buf = NULL;
  size_t cap = 0, len = 0;
  assert_int_equal(sl__dist_pack_into(&buf, &cap, &len, &small), 0);
  size_t small_len = len, small_cap = cap;
  assert_true(cap >= len);
  assert_int_equal(sl__dist_pack_into(&buf, &cap, &len, &big), 0); /* too small: replaced */
  assert_true(len > small_len && cap >= len && cap > small_cap);
  void *kept = buf;
  size_t big_cap = cap;
  const sl_elem *els[2] = {&small, &big};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(sl__dist_pack_into(&buf, &cap, &len, els[k]), 0);
    assert_ptr_equal(buf, kept); /* large enough: packed in place */
    assert_int_equal(cap, big_cap);
    sl_buf *b = sl_buf_alloc(len);
    memcpy(sl_buf_data(b), buf, len);
    assert_int_equal(sl__dist_unpack(&back, b, test_intern, NULL, 1), 0);
    uint64_t d1, d2;
    assert_int_equal(sl_elem_digest(&d1, els[k]), 0);
    assert_int_equal(sl_elem_digest(&d2, &back), 0);
    assert_true(d1 == d2);
    sl_elem_clear(&back);
    sl_buf_unref(b);
  }
  sl__free(buf);
  sl_elem_clear(&big);
  sl_elem_clear(&small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pack_into_reuses_the_buffer),
      cmocka_unit_test(test_shard_remainders), cmocka_unit_test(test_shard_auto_ompi_env),
      cmocka_unit_test(test_hooks),            cmocka_unit_test(test_worker_spec),
      cmocka_unit_test(test_wire_round_trip_and_corruption),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

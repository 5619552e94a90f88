/* test_golden_model.c: the predictor's model file (format sluice.prov.model/1) stays readable: model-v1.json in
 * tests/data/golden/ was written once by `sluice prov gen p.db --pipelines 5 --days 30 --seed 4` and
 * `sluice prov train p.db -o model.json --trees 2 --depth 3 --seed 1`; loading it must give its threshold, its
 * training window and the same predictions. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static void test_model_v1_loads_and_predicts(void **st) {
  const char *src = getenv("SL_SRC");
  assert_non_null(src);
  char *path = NULL;
  assert_true(asprintf(&path, "%s/tests/data/golden/model-v1.json", src) > 0);
  sl_prov_model *m = NULL;
  int rc = sl_prov_model_load(&m, path);
  if (rc) fprintf(stderr, "%s\n", sl_error_last());
  assert_int_equal(rc, 0);
  assert_float_equal(sl_prov_model_threshold(m), 0.51, 1e-12);
  assert_int_equal(sl_prov_model_test_from(m), 1737900335954LL);
  size_t nf = sl_prov_feature_count();
  assert_int_equal(nf, 16);
  double *x = calloc(nf, sizeof *x);
  assert_non_null(x);
  double p0 = -1, p1 = -1;
  assert_int_equal(sl_prov_model_predict(&p0, m, x), 0);
  for (size_t j = 0; j < nf; j++) x[j] = NAN; /* unknown features: the forest's default branches */
  assert_int_equal(sl_prov_model_predict(&p1, m, x), 0);
  printf("# p(zeros) = %.17g, p(unknown) = %.17g\n", p0, p1);
  assert_float_equal(p0, 0.56627440452575684, 1e-6);
  assert_float_equal(p1, 0.6456562876701355, 1e-6);
  free(x);
  sl_prov_model_free(m);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_model_v1_loads_and_predicts)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_plan_net.c: the network model of a remote reader (plan/plan_net.c): k requests of B bytes in flight, each
 * paying the time to first byte L and then B / b at one stream's bandwidth, carry min(k B / (L + B / b), link). */
#include <math.h>

#include "plan/plan_int.h"
#include "testutil.h"

static void test_rate(void **s) {
  sl__pm_net n = {.latency = 0.05, .stream_bw = 100e6, .block = 8e6, .link = INFINITY};
  /* one request: 8 MB every 50 ms + 80 ms */
  assert_true(fabs(sl__plan_net_rate(&n, 1) - 8e6 / 0.13) < 1);
  /* Little's law: rate grows with the requests in flight until the link caps it */
  assert_true(fabs(sl__plan_net_rate(&n, 4) - 4 * 8e6 / 0.13) < 1);
  n.link = 25e6; /* 200 Mbit/s */
  assert_true(fabs(sl__plan_net_rate(&n, 4) - 25e6) < 1e-6);
  n.link = 100e6; /* one request does not reach it */
  assert_true(fabs(sl__plan_net_rate(&n, 1) - 8e6 / 0.13) < 1);
  /* a stream too fast to time: latency alone */
  sl__pm_net f = {.latency = 0.05, .stream_bw = INFINITY, .block = 1e6, .link = INFINITY};
  assert_true(fabs(sl__plan_net_rate(&f, 2) - 2e6 / 0.05) < 1e-3);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

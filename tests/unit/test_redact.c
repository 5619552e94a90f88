/* test_redact.c: sl_redact, the one routine that keeps connection-string passwords out of what sluice prints, and
 * the library's messages passing through it whoever formats them. */
#include <string.h>

#include "testutil.h"

static void expect(const char *in, const char *want) {
  char out[512];
  size_t n = sl_redact(out, sizeof out, in);
  assert_string_equal(out, want);
  assert_int_equal(n, strlen(want));
}

static void test_uri_userinfo(void **s) {
  expect("postgresql://u:PW@h:5432/db", "postgresql://u:***@h:5432/db");
  expect("postgres://u:PW@h/db", "postgres://u:***@h/db");
  expect("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"); /* no password: as it was */
  expect("postgresql://h:5432/db", "postgresql://h:5432/db");      /* a port is not a password */
  expect("postgresql://u:p@ss/w:rd@h/db", "postgresql://u:***@h/db"); /* raw '@' and '/': over-redact, never leak */
  expect("cannot open 'postgresql://u:PW@h/db': refused", "cannot open 'postgresql://u:***@h/db': refused");
  expect("a postgresql://u:PW@h/x and http://v:QQ@w/", "a postgresql://u:***@h/x and http://v:***@w/");
  expect("sqlite:/tmp/p.db", "sqlite:/tmp/p.db");
  expect("", "");
}

static void test_password_keys(void **s) {
  expect("postgresql://u@h/db?password=PW", "postgresql://u@h/db?password=***");
  expect("postgresql://u@h/db?sslmode=require&password=PW&x=1", "postgresql://u@h/db?sslmode=require&password=***&x=1");
  expect("postgresql://u@h/db?PASSWORD=PW", "postgresql://u@h/db?PASSWORD=***");
  expect("host=h password=PW dbname=d", "host=h password=*** dbname=d");
  expect("host=h password = PW dbname=d", "host=h password = *** dbname=d");
  expect("host=h password='P W\\' x' dbname=d", "host=h password=*** dbname=d");
  expect("password=PW", "password=***");
  expect("mypassword=x", "mypassword=x"); /* another key */
  expect("password is required", "password is required");
}

static void test_truncation_never_leaks(void **s) {
  char out[20];
  size_t n = sl_redact(out, sizeof out, "postgresql://u:SECRETSECRET@h/db");
  assert_int_equal(n, strlen("postgresql://u:***@h/db"));
  assert_int_equal(strlen(out), sizeof out - 1);
  assert_null(strstr(out, "SECRET"));
  assert_int_equal(sl_redact(NULL, 0, "password=x"), strlen("password=***"));
}

static void test_library_messages_are_redacted(void **s) {
  sl_error_set(SL_EIO, "%s: cannot connect", "postgresql://u:TOPSECRET@127.0.0.1:1/db");
  assert_null(strstr(sl_error_last(), "TOPSECRET"));
  assert_non_null(strstr(sl_error_last(), "postgresql://u:***@127.0.0.1:1/db: cannot connect"));
  /* a URI long enough to be cut by the message's size is still seen whole */
  char longuri[1100];
  memset(longuri, 'h', sizeof longuri);
  memcpy(longuri, "postgresql://u:TOPSECRET", 24);
  memcpy(longuri + 1000, "@h/db", 6);
  sl_error_set(SL_EIO, "%s", longuri);
  assert_null(strstr(sl_error_last(), "TOPSECRET"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uri_userinfo),
      cmocka_unit_test(test_password_keys),
      cmocka_unit_test(test_truncation_never_leaks),
      cmocka_unit_test(test_library_messages_are_redacted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

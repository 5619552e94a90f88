/* test_redact.c: sl_redact, the one routine that keeps connection-string passwords out of what sluice prints, and
 * the library's messages passing through it whoever formats them. */
#include <string.h>

#include "core/core_int.h"
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
  /* issue 47 row 5: quotes, blanks, '<' '>' in a password end no URI early */
  expect("cannot open postgresql://u:ab'PW@h:1/db: refused", "cannot open postgresql://u:***@h:1/db: refused");
  expect("'postgresql://u:a\"b c\td<e>@h/db'", "'postgresql://u:***@h/db'");
  expect("postgresql://u:a?b#c@h/db?x=1", "postgresql://u:***@h/db?x=1");
  expect("postgresql://u:@h/db", "postgresql://u:@h/db");
  expect("postgresql://h:5432/db x", "postgresql://h:5432/db x"); /* a port, no '@' on the line */
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

/* What libpq echoes of a URI it misreads holds fragments the structure cannot see: the noted password's text goes
 * wherever it appears, raw and decoded. */
static void test_noted_passwords(void **s) {
  sl__redact_note("postgresql://u:Zk%41pw9 x@h/db");
  expect("invalid percent-encoded token: \"Zk%41pw9 x\"", "invalid percent-encoded token: \"***\"");
  expect("host name \"ZkApw9 x\" unknown", "host name \"***\" unknown");
  sl__redact_note("postgresql://u@h/db?sslmode=disable&password=Qv7 &yy&x=1");
  expect("value \"Qv7 &yy\" bad", "value \"***\" bad");
  expect("postgresql://u@h/db?password=Qv7 &yy&x=1", "postgresql://u@h/db?password=***&x=1");
  sl__redact_note("host=h password='Wq\\'5 z' dbname=d");
  expect("got Wq'5 z", "got ***");
  sl__redact_note("postgresql://u:ab@h/db"); /* too short to note: structure only */
  expect("ab", "ab");
  sl_error_set(SL_EIO, "could not translate host name \"%s\"", "ZkApw9 x@h");
  assert_null(strstr(sl_error_last(), "ZkApw9"));
}

/* The password leaves the URI libpq reads: decoded, as a keyword of its own. */
static void take(const char *uri, const char *rest, const char *pw) {
  char *r, *p;
  assert_int_equal(sl__uri_take_password(uri, &r, &p), 0);
  assert_string_equal(r, rest);
  if (pw) assert_string_equal(p, pw);
  else assert_null(p);
  sl__free(r);
  sl__free(p);
}

static void test_take_password(void **s) {
  take("postgresql://u:pw@h:5/db", "postgresql://u@h:5/db", "pw");
  take("postgresql://u:p%40w/x@h/db?a=1", "postgresql://u@h/db?a=1", "p@w/x");
  take("postgresql://u:p@w@h/db", "postgresql://u@h/db", "p@w");
  take("postgresql://u:a?b@h/db", "postgresql://u@h/db", "a?b");
  take("postgresql://u:a b'c@h/db?application_name=x@y", "postgresql://u@h/db?application_name=x@y", "a b'c");
  take("postgresql://u@h/db?sslmode=disable&password=a%20b&c&x=1", "postgresql://u@h/db?sslmode=disable&x=1", "a b&c");
  take("postgresql://u@h/db?password=x", "postgresql://u@h/db", "x");
  take("postgresql://h:5432/db?application_name=a@b", "postgresql://h:5432/db?application_name=a@b", NULL);
  take("postgresql://u@h/db", "postgresql://u@h/db", NULL);
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
      cmocka_unit_test(test_noted_passwords),
      cmocka_unit_test(test_take_password),
      cmocka_unit_test(test_truncation_never_leaks),
      cmocka_unit_test(test_library_messages_are_redacted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

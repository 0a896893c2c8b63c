/* Unit tests for noded/listen: --listen values parsed row by row, and Unix sockets opened
 * safely: a stale socket file replaced, a regular file, a directory, a symbolic link and a socket
 * something listens on refused; the mode set before the socket accepts; the file removed at the
 * end only while it is still the one made. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "listen.h"

static void test_parse_rows(void **state) {
  static const struct {
    const char *text;
    int ok, is_unix, pp, mode;
    const char *path, *owner, *group;
  } rows[] = {
      {"127.0.0.1:7480", 1, 0, 0, -1, "", "", ""},
      {"[::1]:0,proxy-protocol", 1, 0, 1, -1, "", "", ""},
      {":8080", 1, 0, 0, -1, "", "", ""},
      {"unix:/run/cdnca/noded.sock", 1, 1, 0, -1, "/run/cdnca/noded.sock", "", ""},
      {"unix:/run/n.sock,proxy-protocol,mode=0660,group=www-data,owner=cdnca", 1, 1, 1, 0660,
       "/run/n.sock", "cdnca", "www-data"},
      {"unix:rel.sock,mode=600", 1, 1, 0, 0600, "rel.sock", "", ""},
      {"unix:/x,owner=0,group=33", 1, 1, 0, -1, "/x", "0", "33"},
      {"unix:", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,mode=0800", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,mode=01777", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,mode=66", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,mode=", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,owner=", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,owner=a b", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,group=-x", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/x,proxy", 0, 0, 0, 0, NULL, NULL, NULL},
      {"127.0.0.1:80,mode=0660", 0, 0, 0, 0, NULL, NULL, NULL},
      {"127.0.0.1:80,group=www", 0, 0, 0, 0, NULL, NULL, NULL},
      {"127.0.0.1:80,proxy-protocol=1", 0, 0, 0, 0, NULL, NULL, NULL},
      {"127.0.0.1:80,,proxy-protocol", 0, 0, 0, 0, NULL, NULL, NULL},
      {"localhost:80", 0, 0, 0, 0, NULL, NULL, NULL},
      {"127.0.0.1", 0, 0, 0, 0, NULL, NULL, NULL},
      {"unix:/"
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
       0, 0, 0, 0, NULL, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    struct listen_spec ls;
    char err[256] = "";
    int rc = listen_parse(rows[i].text, &ls, err, sizeof err);
    if ((rc == 0) != rows[i].ok) fail_msg("'%s': rc %d (%s)", rows[i].text, rc, err);
    if (rc < 0) {
      assert_non_null(strstr(err, "option listen"));
      continue;
    }
    assert_int_equal(ls.is_unix, rows[i].is_unix);
    assert_int_equal(ls.proxy_protocol, rows[i].pp);
    assert_int_equal(ls.mode, rows[i].mode);
    if (ls.is_unix) assert_string_equal(ls.path, rows[i].path);
    assert_string_equal(ls.owner, rows[i].owner);
    assert_string_equal(ls.group, rows[i].group);
  }
}

static void test_parse_list(void **state) {
  struct listen_spec ls[LISTEN_MAX];
  char err[256], many[LISTEN_MAX * 24 + 64];
  size_t off = 0;
  assert_int_equal(listen_parse_list("127.0.0.1:1\nunix:/a,proxy-protocol\n[::1]:1", ls, LISTEN_MAX,
                                     err, sizeof err),
                   3);
  assert_true(ls[1].is_unix && ls[1].proxy_protocol);
  assert_int_equal(
      listen_parse_list("127.0.0.1:1\n127.0.0.1:1,proxy-protocol", ls, LISTEN_MAX, err, sizeof err),
      -1);
  assert_non_null(strstr(err, "same listener"));
  assert_int_equal(listen_parse_list("unix:/a\nunix:/a,mode=0600", ls, LISTEN_MAX, err, sizeof err),
                   -1);
  assert_int_equal(listen_parse_list("", ls, LISTEN_MAX, err, sizeof err), -1);
  for (int i = 0; i <= LISTEN_MAX; i++)
    off += (size_t)snprintf(many + off, sizeof many - off, "%s127.0.0.1:%d", i ? "\n" : "", i + 1);
  assert_int_equal(listen_parse_list(many, ls, LISTEN_MAX, err, sizeof err), -1);
  assert_non_null(strstr(err, "more than"));
}

struct dir {
  char path[64];
  char sock[128];
};

static int setup(void **state) {
  struct dir *d = calloc(1, sizeof *d);
  snprintf(d->path, sizeof d->path, "/tmp/cdnca-listen-XXXXXX");
  assert_non_null(mkdtemp(d->path));
  snprintf(d->sock, sizeof d->sock, "%s/noded.sock", d->path);
  *state = d;
  return 0;
}

static int teardown(void **state) {
  struct dir *d = *state;
  char p[160];
  unlink(d->sock);
  snprintf(p, sizeof p, "%s/target", d->path);
  unlink(p);
  rmdir(d->path);
  free(d);
  return 0;
}

static int open_sock(const char *text, dev_t *dev, ino_t *ino, char *err, size_t errlen) {
  struct listen_spec ls;
  assert_int_equal(listen_parse(text, &ls, err, errlen), 0);
  return listen_unix_open(&ls, dev, ino, err, errlen);
}

static void test_unix_new_and_mode(void **state) {
  struct dir *d = *state;
  char text[200], err[256];
  struct stat st;
  dev_t dev;
  ino_t ino;
  int fd;
  snprintf(text, sizeof text, "unix:%s,mode=0640,group=%d", d->sock, (int)getgid());
  fd = open_sock(text, &dev, &ino, err, sizeof err);
  if (fd < 0) fail_msg("%s", err);
  assert_int_equal(lstat(d->sock, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_int_equal(st.st_gid, getgid());
  /* a second noded on the same path: refused while the first listens */
  assert_int_equal(open_sock(text, &dev, &ino, err, sizeof err), -1);
  assert_non_null(strstr(err, "another process listens"));
  close(fd);
  /* now stale: replaced, the new file is another inode */
  {
    dev_t dev2;
    ino_t ino2;
    fd = open_sock(text, &dev2, &ino2, err, sizeof err);
    if (fd < 0) fail_msg("%s", err);
    (void)dev;
    (void)ino;
    listen_unix_remove(d->sock, dev2, ino2 + 1); /* another file's identity: left alone */
    assert_int_equal(lstat(d->sock, &st), 0);
    listen_unix_remove(d->sock, dev2, ino2);
    assert_int_equal(lstat(d->sock, &st), -1);
    close(fd);
  }
}

static void test_unix_refuses_non_sockets(void **state) {
  struct dir *d = *state;
  char text[200], err[256], target[160];
  struct stat st;
  dev_t dev;
  ino_t ino;
  FILE *f;
  snprintf(text, sizeof text, "unix:%s", d->sock);
  f = fopen(d->sock, "w");
  assert_non_null(f);
  fputs("precious", f);
  fclose(f);
  assert_int_equal(open_sock(text, &dev, &ino, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a socket"));
  assert_int_equal(lstat(d->sock, &st), 0);
  assert_true(S_ISREG(st.st_mode) && st.st_size == 8); /* untouched */
  unlink(d->sock);
  assert_int_equal(mkdir(d->sock, 0700), 0);
  assert_int_equal(open_sock(text, &dev, &ino, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a socket"));
  rmdir(d->sock);
  /* a symbolic link (even to a stale socket) is not a socket file */
  snprintf(target, sizeof target, "%s/target", d->path);
  assert_int_equal(symlink(target, d->sock), 0);
  assert_int_equal(open_sock(text, &dev, &ino, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a socket"));
  assert_int_equal(lstat(d->sock, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  unlink(d->sock);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_rows),
      cmocka_unit_test(test_parse_list),
      cmocka_unit_test_setup_teardown(test_unix_new_and_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_refuses_non_sockets, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* listen — parsing --listen values and opening their sockets (listen.h). */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"

/* A name or number of at most cap - 1 bytes: letters, digits, '_', '-', '.' (and a final '$'). */
static int id_ok(const char *s, size_t n, size_t cap) {
  if (n == 0 || n >= cap || s[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.' || (c == '$' && i == n - 1)))
      return 0;
  }
  return 1;
}

static int opt_is(const char *o, size_t n, const char *name) {
  size_t k = strlen(name);
  return n > k && memcmp(o, name, k) == 0 && o[k] == '=';
}

int listen_parse(const char *text, struct listen_spec *ls, char *err, size_t errlen) {
  const char *comma = strchr(text, ','), *o;
  size_t al = comma ? (size_t)(comma - text) : strlen(text);
  char addr[256];
  memset(ls, 0, sizeof *ls);
  ls->mode = -1;
  if (strlen(text) >= sizeof ls->text || al >= sizeof addr) {
    snprintf(err, errlen, "option listen: '%.40s...' is too long", text);
    return -1;
  }
  memcpy(ls->text, text, strlen(text) + 1);
  memcpy(addr, text, al);
  addr[al] = '\0';
  if (strncmp(addr, "unix:", 5) == 0) {
    size_t pl = al - 5;
    if (pl == 0 || pl >= sizeof ls->path) {
      snprintf(err, errlen, "option listen: '%s': a Unix socket path of 1 to %zu bytes", text,
               sizeof ls->path - 1);
      return -1;
    }
    memcpy(ls->path, addr + 5, pl + 1);
    ls->is_unix = 1;
  } else if (addr_parse_listen(addr, 1, &ls->sa, &ls->salen) < 0) {
    snprintf(err, errlen, "option listen: '%s' is not host:port (IPv4 or [IPv6]) nor unix:/path",
             text);
    return -1;
  }
  for (o = comma; o; o = strchr(o + 1, ',')) {
    const char *s = o + 1, *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 14 && memcmp(s, "proxy-protocol", 14) == 0) {
      ls->proxy_protocol = 1;
    } else if (ls->is_unix && opt_is(s, n, "mode")) {
      long v = 0;
      size_t k = 5;
      if (n - k < 3 || n - k > 4) goto bad_mode;
      for (; k < n; k++) {
        if (s[k] < '0' || s[k] > '7') goto bad_mode;
        v = v * 8 + (s[k] - '0');
      }
      if (v > 0777) goto bad_mode;
      ls->mode = (int)v;
    } else if (ls->is_unix && opt_is(s, n, "owner") && id_ok(s + 6, n - 6, sizeof ls->owner)) {
      memcpy(ls->owner, s + 6, n - 6);
      ls->owner[n - 6] = '\0';
    } else if (ls->is_unix && opt_is(s, n, "group") && id_ok(s + 6, n - 6, sizeof ls->group)) {
      memcpy(ls->group, s + 6, n - 6);
      ls->group[n - 6] = '\0';
    } else {
      snprintf(err, errlen, "option listen: '%s': '%.*s' is not proxy-protocol%s", text,
               (int)(n > 64 ? 64 : n), s,
               ls->is_unix ? ", mode=OCTAL, owner=USER or group=GROUP"
                           : " (mode, owner and "
                             "group are for unix:)");
      return -1;
    }
  }
  return 0;
bad_mode:
  snprintf(err, errlen, "option listen: '%s': mode is 3 or 4 octal digits, at most 0777", text);
  return -1;
}

int listen_parse_list(const char *list, struct listen_spec *out, int max, char *err,
                      size_t errlen) {
  int n = 0;
  const char *s = list;
  while (s && *s) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    char one[300];
    if (n >= max) {
      snprintf(err, errlen, "option listen: more than %d listeners", max);
      return -1;
    }
    if (len >= sizeof one) {
      snprintf(err, errlen, "option listen: '%.40s...' is too long", s);
      return -1;
    }
    memcpy(one, s, len);
    one[len] = '\0';
    if (listen_parse(one, &out[n], err, errlen) < 0) return -1;
    for (int i = 0; i < n; i++) {
      int same = out[i].is_unix == out[n].is_unix &&
                 (out[n].is_unix ? strcmp(out[i].path, out[n].path) == 0
                                 : out[i].salen == out[n].salen &&
                                       memcmp(&out[i].sa, &out[n].sa, out[n].salen) == 0);
      if (same) {
        snprintf(err, errlen, "option listen: '%s' and '%s' are the same listener", out[i].text,
                 out[n].text);
        return -1;
      }
    }
    n++;
    s = nl ? nl + 1 : NULL;
  }
  if (n == 0) {
    snprintf(err, errlen, "option listen: no listener");
    return -1;
  }
  return n;
}

/* A number in [0, max] or -1. */
static long id_number(const char *s) {
  char *end;
  long v;
  if (!*s || *s < '0' || *s > '9') return -1;
  errno = 0;
  v = strtol(s, &end, 10);
  return errno || *end || v < 0 || v > 0x7fffffff ? -1 : v;
}

int listen_ids(const struct listen_spec *ls, uid_t *uid, gid_t *gid, char *err, size_t errlen) {
  char tmp[4096];
  *uid = (uid_t)-1;
  *gid = (gid_t)-1;
  if (ls->owner[0]) {
    struct passwd pw, *res = NULL;
    long v = id_number(ls->owner);
    if (v >= 0) {
      *uid = (uid_t)v;
    } else if (getpwnam_r(ls->owner, &pw, tmp, sizeof tmp, &res) == 0 && res) {
      *uid = res->pw_uid;
    } else {
      snprintf(err, errlen, "option listen: '%s': no user '%s'", ls->text, ls->owner);
      return -1;
    }
  }
  if (ls->group[0]) {
    struct group gr, *res = NULL;
    long v = id_number(ls->group);
    if (v >= 0) {
      *gid = (gid_t)v;
    } else if (getgrnam_r(ls->group, &gr, tmp, sizeof tmp, &res) == 0 && res) {
      *gid = res->gr_gid;
    } else {
      snprintf(err, errlen, "option listen: '%s': no group '%s'", ls->text, ls->group);
      return -1;
    }
  }
  return 0;
}

int listen_tcp_open(const struct sockaddr_storage *sa, socklen_t len) {
  int one = 1, e;
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
      bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 1024) < 0) {
    e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Something at path: remove it when it is a socket nothing accepts on. 0, or -1 with err. */
static int clear_stale(const char *path, const struct sockaddr_un *un, char *err, size_t errlen) {
  struct stat st;
  int fd, rc, e;
  if (lstat(path, &st) < 0) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "option listen: unix:%s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(err, errlen,
             "option listen: unix:%s exists and is not a socket; refusing to replace it", path);
    return -1;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "option listen: unix:%s: socket: %s", path, strerror(errno));
    return -1;
  }
  rc = connect(fd, (const struct sockaddr *)un, sizeof *un);
  e = errno;
  close(fd);
  if (rc == 0 || e == EAGAIN || e == EINPROGRESS) {
    snprintf(err, errlen, "option listen: unix:%s: another process listens on it", path);
    return -1;
  }
  if (e != ECONNREFUSED) {
    snprintf(err, errlen, "option listen: unix:%s: cannot tell whether it is in use: %s", path,
             strerror(e));
    return -1;
  }
  /* a stale socket file (its process is gone): replaced */
  if (unlink(path) < 0 && errno != ENOENT) {
    snprintf(err, errlen, "option listen: unix:%s: cannot remove the stale socket: %s", path,
             strerror(errno));
    return -1;
  }
  return 0;
}

int listen_unix_open(const struct listen_spec *ls, dev_t *dev, ino_t *ino, char *err,
                     size_t errlen) {
  struct sockaddr_un un;
  struct stat st;
  uid_t uid;
  gid_t gid;
  int fd = -1;
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  memcpy(un.sun_path, ls->path, strlen(ls->path) + 1);
  if (listen_ids(ls, &uid, &gid, err, errlen) < 0) return -1;
  if (clear_stale(ls->path, &un, err, errlen) < 0) return -1;
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "option listen: unix:%s: socket: %s", ls->path, strerror(errno));
    return -1;
  }
  /* bind never replaces a file: one that appeared since the check is an error here */
  if (bind(fd, (const struct sockaddr *)&un, sizeof un) < 0) {
    snprintf(err, errlen, "option listen: unix:%s: bind: %s", ls->path, strerror(errno));
    goto fail_open;
  }
  /* the socket refuses connections until listen(): its owner and mode are set before that */
  if ((uid != (uid_t)-1 || gid != (gid_t)-1) && lchown(ls->path, uid, gid) < 0) {
    snprintf(err, errlen, "option listen: unix:%s: owner/group: %s", ls->path, strerror(errno));
    goto fail_bound;
  }
  if (ls->mode >= 0 && fchmodat(AT_FDCWD, ls->path, (mode_t)ls->mode, 0) < 0) {
    snprintf(err, errlen, "option listen: unix:%s: mode: %s", ls->path, strerror(errno));
    goto fail_bound;
  }
  if (lstat(ls->path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
    snprintf(err, errlen, "option listen: unix:%s: the socket file went away", ls->path);
    goto fail_open;
  }
  if (listen(fd, 1024) < 0) {
    snprintf(err, errlen, "option listen: unix:%s: listen: %s", ls->path, strerror(errno));
    goto fail_bound;
  }
  *dev = st.st_dev;
  *ino = st.st_ino;
  return fd;
fail_bound:
  (void)unlink(ls->path);
fail_open:
  close(fd);
  return -1;
}

void listen_unix_remove(const char *path, dev_t dev, ino_t ino) {
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev && st.st_ino == ino)
    (void)unlink(path);
}

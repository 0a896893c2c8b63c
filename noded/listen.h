/* listen — noded's visitor listeners (docs/design.md#noded-behind-an-edge-cache): a --listen
 * value "ADDR[,OPTION...]" parsed (pure), and its socket opened: a TCP address once per worker
 * (SO_REUSEPORT), a Unix socket once, with its mode and owner set before it accepts; a socket
 * file nothing listens on any more is replaced, anything else at the path is refused. */
#ifndef CDNCA_LISTEN_H
#define CDNCA_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* --listen values at most (each repeated flag is one listener). */
#define LISTEN_MAX 16

/* One parsed --listen value. */
struct listen_spec {
  char text[256];             /* the value as given, for messages */
  int is_unix;                /* "unix:/path" */
  struct sockaddr_storage sa; /* TCP: the address */
  socklen_t salen;
  char path[108];            /* Unix: the socket path (fits sun_path) */
  int proxy_protocol;        /* ",proxy-protocol": a PROXY header is required on each connection */
  int mode;                  /* Unix ",mode=0660": the socket's mode; -1 = as the umask leaves it */
  char owner[64], group[64]; /* Unix ",owner=", ",group=": names or numbers; "" = unchanged */
};

/* Parse one value: "host:port", "[v6]:port" or "unix:/path", then options separated by commas:
 * "proxy-protocol", and for unix: "mode=OCTAL" (at most 0777), "owner=USER", "group=GROUP".
 * 0, or -1 with err naming the option and the value. */
int listen_parse(const char *text, struct listen_spec *ls, char *err, size_t errlen);

/* Parse a list of values joined by '\n' (an OPT_LIST) into out[max]: how many (>= 1), or -1 with
 * err (a bad value, more than max, the same address or path twice). */
int listen_parse_list(const char *list, struct listen_spec *out, int max, char *err, size_t errlen);

/* Look up ls's owner and group (-1 when not set): 0, or -1 with err naming the unknown one. */
int listen_ids(const struct listen_spec *ls, uid_t *uid, gid_t *gid, char *err, size_t errlen);

/* A non-blocking TCP listener on sa (SO_REUSEADDR, SO_REUSEPORT, backlog 1024): the descriptor,
 * or -1 with errno set. */
int listen_tcp_open(const struct sockaddr_storage *sa, socklen_t len);

/* The Unix listener of ls (non-blocking, backlog 1024), its mode and owner set before it listens.
 * A socket file at the path that refuses connections is removed first; a path that is not a
 * socket, or a socket that accepts, is refused. The descriptor, with *dev and *ino of the new
 * socket file (for listen_unix_remove), or -1 with err naming the path. */
int listen_unix_open(const struct listen_spec *ls, dev_t *dev, ino_t *ino, char *err,
                     size_t errlen);

/* Remove the socket file at path when it is still the one listen_unix_open made (dev, ino). */
void listen_unix_remove(const char *path, dev_t dev, ino_t ino);

#endif

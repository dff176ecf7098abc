/* Load generator for bench/datapath_bench.py: new connections (TCP) or new flows (UDP) per second.
 * Compiled by the driver at bench time (cc -O2): a C loop is steadier than Python's, so that the
 * rules' cost per first packet is not lost in the client's own.
 *
 *   datapath_load server tcp|udp PORT
 *       TCP: accept and close, forever. UDP: read each datagram; echo an "e" from the address it
 *       was sent to (IP_PKTINFO: the node's conntrack must see the reply come from the endpoint).
 *   datapath_load client tcp|udp|udpecho DST_IP PORT SECONDS SRC_PREFIX FIRST_HOST NHOSTS
 *       For SECONDS: tcp connects and closes (SO_LINGER 0, so the close is a RST and leaves no
 *       TIME_WAIT behind); udp sends one datagram from a fresh socket (a new flow: its first
 *       packet walks the node's NAT rules on this CPU, in the sender's softirq, before sendto
 *       returns; no reply is awaited, so the other CPU's wake-ups stay out of the figure);
 *       udpecho does the same and waits for the echo (the check that the flows arrive).
 *       Prints "ok=N failed=M seconds=S". Every attempt binds the next (source address, port) of
 *       SRC_PREFIX.FIRST_HOST.. x ports 1024..65535, so that no attempt reuses a conntrack entry
 *       still alive in the node's table: each one is a new flow that walks the NAT rules.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int is_tcp(const char *proto) { return strcmp(proto, "tcp") == 0; }

static int serve(const char *proto, int port) {
  int tcp = is_tcp(proto);
  int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY};
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); return 1; }
  if (tcp) {
    if (listen(fd, 4096) < 0) { perror("listen"); return 1; }
    for (;;) {
      int c = accept(fd, NULL, NULL);
      if (c >= 0) close(c);
    }
  }
  setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
  for (;;) {
    char buf[256], cbuf[256];
    struct sockaddr_in peer;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr m = {.msg_name = &peer, .msg_namelen = sizeof peer, .msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(fd, &m, 0);
    if (n < 0) continue;
    struct in_addr dst = {0};
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)
        dst = ((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr;
    char obuf[CMSG_SPACE(sizeof(struct in_pktinfo))];
    memset(obuf, 0, sizeof obuf);
    iov.iov_len = n;
    struct msghdr r = {.msg_name = &peer, .msg_namelen = sizeof peer, .msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = obuf, .msg_controllen = sizeof obuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&r);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
    ((struct in_pktinfo *)CMSG_DATA(c))->ipi_spec_dst = dst;
    if (n == 1 && buf[0] == 'e') sendmsg(fd, &r, 0);
  }
}

static int client(const char *proto, const char *dst_ip, int port, double seconds, const char *src_prefix,
                  int first_host, int nhosts) {
  int tcp = is_tcp(proto), echo = strcmp(proto, "udpecho") == 0;
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, dst_ip, &dst.sin_addr);
  struct in_addr srcs[256];
  if (nhosts < 1 || nhosts > 256) return 2;
  for (int i = 0; i < nhosts; i++) {
    char s[64];
    snprintf(s, sizeof s, "%s.%d", src_prefix, first_host + i);
    inet_pton(AF_INET, s, &srcs[i]);
  }
  struct linger lg = {1, 0};
  struct timeval tv = {0, 200000};  /* a lost UDP reply or a TCP SYN unanswered: failure after 200 ms */
  long ok = 0, failed = 0, seq = 0;
  /* Start at a random (address, port) so that consecutive rounds do not replay the same tuples. */
  srand(getpid() ^ (unsigned)(now_s() * 1e6));
  seq = rand() % (nhosts * 64512L);
  double t0 = now_s(), end = t0 + seconds;
  while (now_s() < end) {
    long k = seq++ % (nhosts * 64512L);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = htons(1024 + k / nhosts), .sin_addr = srcs[k % nhosts]};
    int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0) { close(fd); failed++; continue; }
    if (tcp) {
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      if (connect(fd, (struct sockaddr *)&dst, sizeof dst) == 0) ok++; else failed++;
    } else {
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char b = echo ? 'e' : 'x', r;
      if (sendto(fd, &b, 1, 0, (struct sockaddr *)&dst, sizeof dst) == 1 && (!echo || recv(fd, &r, 1, 0) == 1))
        ok++;
      else
        failed++;
    }
    close(fd);
  }
  printf("ok=%ld failed=%ld seconds=%.3f\n", ok, failed, now_s() - t0);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "server") == 0) return serve(argv[2], atoi(argv[3]));
  if (argc == 9 && strcmp(argv[1], "client") == 0)
    return client(argv[2], argv[3], atoi(argv[4]), atof(argv[5]), argv[6], atoi(argv[7]), atoi(argv[8]));
  fprintf(stderr, "usage: %s server tcp|udp PORT | client tcp|udp|udpecho DST PORT SECONDS SRC_PREFIX FIRST NHOSTS\n",
          argv[0]);
  return 2;
}

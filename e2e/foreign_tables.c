// Test helper: writes "other agents'" nftables objects straight through netlink (libnftnl + libmnl),
// the way newer nft binaries, CNIs and firewalls leave them on a shared node. Only e2e tests use it.
//
//   foreign-tables chains FAMILY TABLE COUNT     a table with COUNT regular chains
//   foreign-tables sets FAMILY TABLE             sets with comments and typeof (as nft 1.0.x writes them)
//   foreign-tables newer-set FAMILY TABLE NAME   one set with the userdata nft >= 1.1.2 writes for a
//                                                plain `type ipv4_addr` set (KEY_TYPEOF of EXPR_VALUE),
//                                                which makes libnftables 1.0.6 segfault while it
//                                                fills its cache
// The table is created when missing (NEWTABLE without NLM_F_EXCL). Exit 0 on success.
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

// libnftnl udata TLVs as nft writes them (nftables include/rule.h, src/*.c).
enum { UDATA_SET_KEYBYTEORDER = 0, UDATA_SET_KEY_TYPEOF = 3, UDATA_SET_COMMENT = 7 };
enum { UDATA_TYPEOF_EXPR = 0, UDATA_TYPEOF_DATA = 1 };
enum { EXPR_VALUE = 4, EXPR_META_1_0 = 9 };  // nft 1.0.x/1.1.x expression enum
enum { DATATYPE_IPADDR = 7, DATATYPE_MARK = 19 };
enum { BYTEORDER_HOST = 1, BYTEORDER_BIG = 2 };

struct udata {
  unsigned char buf[256];
  size_t len;
};

static void put_tlv(struct udata* u, uint8_t type, const void* value, uint8_t len) {
  u->buf[u->len++] = type;
  u->buf[u->len++] = len;
  memcpy(u->buf + u->len, value, len);
  u->len += len;
}

static void put_u32(struct udata* u, uint8_t type, uint32_t v) { put_tlv(u, type, &v, sizeof v); }

// KEY_TYPEOF { TYPEOF_EXPR = etype, TYPEOF_DATA = data }
static void put_typeof(struct udata* u, uint32_t etype, const struct udata* data) {
  struct udata nest = {.len = 0};
  put_u32(&nest, UDATA_TYPEOF_EXPR, etype);
  put_tlv(&nest, UDATA_TYPEOF_DATA, data->buf, (uint8_t)data->len);
  put_tlv(u, UDATA_SET_KEY_TYPEOF, nest.buf, (uint8_t)nest.len);
}

static int family_of(const char* name) {
  if (!strcmp(name, "ip")) return NFPROTO_IPV4;
  if (!strcmp(name, "ip6")) return NFPROTO_IPV6;
  if (!strcmp(name, "inet")) return NFPROTO_INET;
  fprintf(stderr, "unknown family %s\n", name);
  exit(2);
}

struct batch {
  char* buf;
  size_t size;
  struct mnl_nlmsg_batch* b;
  uint32_t seq;
};

static void batch_open(struct batch* bt, size_t size) {
  bt->size = size;
  bt->buf = malloc(size);
  bt->b = mnl_nlmsg_batch_start(bt->buf, size);
  bt->seq = (uint32_t)time(NULL);
  nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), bt->seq++);
  mnl_nlmsg_batch_next(bt->b);
}

// Errors are answered without NLM_F_ACK too; ACKs for thousands of chains would overflow the socket.
static struct nlmsghdr* batch_msg(struct batch* bt, uint16_t type, int family, uint16_t flags) {
  return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, family, flags, bt->seq++);
}

// Sends the batch as one transaction and waits for every ACK; returns 0 or the first error.
static int batch_send(struct batch* bt) {
  nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), bt->seq++);
  mnl_nlmsg_batch_next(bt->b);
  struct mnl_socket* nl = mnl_socket_open(NETLINK_NETFILTER);
  if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    perror("netlink");
    return -1;
  }
  int rc = 0;
  if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b)) < 0) {
    perror("sendto");
    rc = -1;
  }
  // The kernel runs the batch inside sendto(); an error answer means it aborted the whole batch.
  static char rbuf[1 << 16];
  uint32_t portid = mnl_socket_get_portid(nl);
  while (rc == 0) {
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(mnl_socket_get_fd(nl), &fds);
    if (select(mnl_socket_get_fd(nl) + 1, &fds, NULL, NULL, &tv) <= 0) break;  // all answered
    ssize_t n = mnl_socket_recvfrom(nl, rbuf, sizeof rbuf);
    if (n < 0) {
      perror("recv");
      rc = -1;
      break;
    }
    if (mnl_cb_run(rbuf, n, 0, portid, NULL, NULL) < 0) {
      fprintf(stderr, "kernel: %s\n", strerror(errno));
      rc = -1;
    }
  }
  mnl_socket_close(nl);
  mnl_nlmsg_batch_stop(bt->b);
  free(bt->buf);
  return rc;
}

static void add_table(struct batch* bt, int family, const char* table) {
  struct nftnl_table* t = nftnl_table_alloc();
  nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, family);
  nftnl_table_set_str(t, NFTNL_TABLE_NAME, table);
  nftnl_table_nlmsg_build_payload(batch_msg(bt, NFT_MSG_NEWTABLE, family, NLM_F_CREATE), t);
  nftnl_table_free(t);
  mnl_nlmsg_batch_next(bt->b);
}

static void add_set(struct batch* bt, int family, const char* table, const char* name, uint32_t key_type,
                    const struct udata* ud, uint32_t id) {
  struct nftnl_set* s = nftnl_set_alloc();
  nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
  nftnl_set_set_str(s, NFTNL_SET_NAME, name);
  nftnl_set_set_u32(s, NFTNL_SET_FAMILY, family);
  nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
  nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
  nftnl_set_set_u32(s, NFTNL_SET_ID, id);
  nftnl_set_set_data(s, NFTNL_SET_USERDATA, ud->buf, (uint32_t)ud->len);
  nftnl_set_nlmsg_build_payload(batch_msg(bt, NFT_MSG_NEWSET, family, NLM_F_CREATE), s);
  nftnl_set_free(s);
  mnl_nlmsg_batch_next(bt->b);
}

static int cmd_chains(int family, const char* table, int count) {
  const int per_batch = 2000;  // ~100 bytes a chain: well inside one batch buffer
  for (int first = 0; first < count; first += per_batch) {
    struct batch bt;
    batch_open(&bt, 1 << 20);
    add_table(&bt, family, table);
    for (int i = first; i < count && i < first + per_batch; i++) {
      char name[64];
      snprintf(name, sizeof name, "chain-%05d", i);
      struct nftnl_chain* c = nftnl_chain_alloc();
      nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
      nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
      nftnl_chain_nlmsg_build_payload(batch_msg(&bt, NFT_MSG_NEWCHAIN, family, NLM_F_CREATE), c);
      nftnl_chain_free(c);
      mnl_nlmsg_batch_next(bt.b);
    }
    if (batch_send(&bt) != 0) return 1;
  }
  return 0;
}

static int cmd_sets(int family, const char* table) {
  struct batch bt;
  batch_open(&bt, 1 << 16);
  add_table(&bt, family, table);
  // `typeof meta mark` with a comment, as nft 1.0.x writes it.
  struct udata meta = {.len = 0};
  put_u32(&meta, 0 /* NFTNL_UDATA_META_KEY */, NFT_META_MARK);
  for (uint32_t i = 0; i < 20; i++) {
    struct udata ud = {.len = 0};
    put_u32(&ud, UDATA_SET_KEYBYTEORDER, BYTEORDER_HOST);
    put_typeof(&ud, EXPR_META_1_0, &meta);
    const char* comment = "written by another agent";
    put_tlv(&ud, UDATA_SET_COMMENT, comment, (uint8_t)(strlen(comment) + 1));
    char name[32];
    snprintf(name, sizeof name, "marks-%02u", i);
    add_set(&bt, family, table, name, DATATYPE_MARK, &ud, 100 + i);
  }
  return batch_send(&bt) != 0;
}

static int cmd_newer_set(int family, const char* table, const char* name) {
  struct batch bt;
  batch_open(&bt, 1 << 16);
  add_table(&bt, family, table);
  // nft >= 1.1.2 for `type ipv4_addr`: KEYBYTEORDER, then KEY_TYPEOF { EXPR_VALUE, empty data }:
  // bytes 03 08 | 00 04 04000000 | 01 00.
  struct udata ud = {.len = 0};
  struct udata empty = {.len = 0};
  put_u32(&ud, UDATA_SET_KEYBYTEORDER, BYTEORDER_BIG);
  put_typeof(&ud, EXPR_VALUE, &empty);
  const char* comment = "nft 1.1.2 userdata";
  put_tlv(&ud, UDATA_SET_COMMENT, comment, (uint8_t)(strlen(comment) + 1));
  add_set(&bt, family, table, name, DATATYPE_IPADDR, &ud, 1);
  return batch_send(&bt) != 0;
}

int main(int argc, char** argv) {
  if (argc >= 5 && !strcmp(argv[1], "chains")) return cmd_chains(family_of(argv[2]), argv[3], atoi(argv[4]));
  if (argc >= 4 && !strcmp(argv[1], "sets")) return cmd_sets(family_of(argv[2]), argv[3]);
  if (argc >= 5 && !strcmp(argv[1], "newer-set")) return cmd_newer_set(family_of(argv[2]), argv[3], argv[4]);
  fprintf(stderr,
          "usage: %s chains FAMILY TABLE COUNT | sets FAMILY TABLE | newer-set FAMILY TABLE NAME\n",
          argv[0]);
  return 2;
}

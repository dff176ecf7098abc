#include "nft/kernel/typeof_guard.h"

#include <dlfcn.h>
#include <libnftnl/set.h>

namespace kpn::nft {
namespace {

// libnftnl userdata: TLVs of a one-byte type, a one-byte length and the value.
// Set attributes (nftables include/rule.h) and the typeof nest's attributes:
constexpr unsigned char kKeyTypeof = 3, kDataTypeof = 4;
constexpr unsigned char kTypeofExpr = 0, kTypeofData = 1;
constexpr unsigned char kConcatSubType = 0;
// An attribute number 1.0.6's set_parse_udata_cb skips ("default: return 0").
constexpr unsigned char kIgnoredAttribute = 0xff;

// Expression types (1.0.6's enum expr_types) whose typeof 1.0.6 parses back, and whose numbers
// newer nft still writes for the same expression (1.1.6 renumbered only from EXPR_TUNNEL = 26 on).
enum : uint32_t { kPayload = 7, kMeta = 9, kCt = 12, kConcat = 13, kNumgen = 23 };
bool parsableLeaf(uint32_t t) { return t == kPayload || t == kMeta || t == kCt || t == kNumgen; }

struct Tlv {
  unsigned char type;
  const unsigned char* value;
  unsigned char len;
};

// Calls fn for each well-formed TLV of [p, p+len); false when the buffer is malformed.
template <typename Fn>
bool forEachTlv(const unsigned char* p, uint32_t len, Fn fn) {
  uint32_t pos = 0;
  while (pos + 2 <= len) {
    Tlv t{p[pos], p + pos + 2, p[pos + 1]};
    if (pos + 2u + t.len > len) return false;
    fn(t, pos);
    pos += 2u + t.len;
  }
  return pos == len;
}

bool readU32(const Tlv& t, uint32_t* out) {
  if (t.len != sizeof(uint32_t)) return false;
  uint32_t v;
  __builtin_memcpy(&v, t.value, sizeof v);
  *out = v;
  return true;
}

// A concat's typeof data: one nest per member, each {SUB_TYPE u32, SUB_DATA}.
bool concatParsable(const Tlv& data) {
  bool ok = true;
  bool wellFormed = forEachTlv(data.value, data.len, [&](const Tlv& member, uint32_t) {
    bool sawType = false;
    bool memberOk = forEachTlv(member.value, member.len, [&](const Tlv& a, uint32_t) {
      uint32_t sub;
      if (a.type != kConcatSubType) return;
      sawType = true;
      if (!readU32(a, &sub) || !parsableLeaf(sub)) ok = false;
    });
    if (!memberOk || !sawType) ok = false;
  });
  return ok && wellFormed;
}

bool typeofParsable(const Tlv& typeofAttr) {
  const Tlv* expr = nullptr;
  const Tlv* data = nullptr;
  Tlv found[2];
  bool wellFormed = forEachTlv(typeofAttr.value, typeofAttr.len, [&](const Tlv& a, uint32_t) {
    if (a.type == kTypeofExpr) found[0] = a, expr = &found[0];
    if (a.type == kTypeofData) found[1] = a, data = &found[1];
  });
  if (!wellFormed) return false;
  if (!expr || !data) return true;  // 1.0.6 gives up on these by itself
  uint32_t etype;
  if (!readU32(*expr, &etype)) return false;
  if (etype == kConcat) return concatParsable(*data);
  return parsableLeaf(etype);
}

}  // namespace

size_t neutraliseUnparsableTypeof(unsigned char* udata, uint32_t len) {
  size_t renamed = 0;
  forEachTlv(udata, len, [&](const Tlv& t, uint32_t pos) {
    if ((t.type == kKeyTypeof || t.type == kDataTypeof) && !typeofParsable(t)) {
      udata[pos] = kIgnoredAttribute;
      ++renamed;
    }
  });
  return renamed;
}

}  // namespace kpn::nft

// The interposer. libnftables calls it for every set it reads from the kernel; the userdata
// buffer belongs to the libnftnl set object, so renaming in place changes only what it sees.
extern "C" const void* nftnl_set_get_data(const struct nftnl_set* s, uint16_t attr, uint32_t* data_len) {
  using Fn = const void* (*)(const struct nftnl_set*, uint16_t, uint32_t*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "nftnl_set_get_data"));
  if (!real) return nullptr;
  const void* data = real(s, attr, data_len);
  if (data && data_len && attr == NFTNL_SET_USERDATA)
    kpn::nft::neutraliseUnparsableTypeof(static_cast<unsigned char*>(const_cast<void*>(data)), *data_len);
  return data;
}

namespace kpn::nft {
bool typeofGuardActive() {
  return dlsym(RTLD_DEFAULT, "nftnl_set_get_data") == reinterpret_cast<void*>(&::nftnl_set_get_data);
}
}  // namespace kpn::nft

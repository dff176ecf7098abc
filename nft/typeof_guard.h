// libnftables 1.0.6 reads every set of the namespace while it fills its cache, and parses the
// `typeof` expression that nft stores in each set's userdata without checking that it knows the
// expression type: sets written by nft >= 1.1.2 (KEY_TYPEOF of EXPR_VALUE for every plain `type`
// set: Debian trixie, Fedora 42+, Istio CNI, newer Calico) make it jump to a NULL function, and
// unknown types make it abort (kubernetes issues 136786 and 140898; fixed upstream in nft 1.1.4,
// be737a19).
//
// The guard interposes libnftnl's nftnl_set_get_data in our executable (the symbol is exported by
// the link, see the Makefile): libnftables then sees, for every set, userdata whose typeof entries
// 1.0.6 cannot parse are renamed to an attribute number it ignores. It then falls back to the
// set's kernel key type, as it does for sets without typeof. No cost measurable, works for sets
// inside our own table too; it depends on 1.0.6's expression numbering (checked below).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kpn::nft {

// Renames, in place, the KEY_TYPEOF/DATA_TYPEOF entries of one set's userdata (libnftnl TLVs)
// that libnftables 1.0.6 cannot parse back; returns how many it renamed. Malformed TLVs end the
// walk (libnftables rejects those itself, safely).
size_t neutraliseUnparsableTypeof(unsigned char* udata, uint32_t len);

// True when the dynamic linker resolves nftnl_set_get_data to the guard, i.e. libnftables in this
// process is protected.
bool typeofGuardActive();

}  // namespace kpn::nft

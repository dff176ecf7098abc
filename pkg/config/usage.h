// --help: generated from the flag table (flag_table.h), so it lists exactly the flags that are
// accepted, with their defaults, grouped as the table groups them.
#pragma once

#include <string>

namespace kpn::config {

std::string usageText();

}  // namespace kpn::config

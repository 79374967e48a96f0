// JSON string quoting shared by stats, the doctor's channel and pack's metadata.
#pragma once

#include <string>

namespace stoker::detail {

// `s` as a JSON string literal, quotes included (", \\ and control characters escaped).
std::string json_quote(const std::string& s);

}  // namespace stoker::detail

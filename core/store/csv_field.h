#pragma once
// CSV text for exports (RFC 4180): a field holding a comma, quote, CR or LF is quoted and
// its quotes doubled; numbers use the shortest text that reads back to the same double.

#include <string>
#include <string_view>

namespace mok {

std::string csv_field(std::string_view text);
std::string csv_number(double v);   // NaN → "" (an empty cell), ±inf → "inf"/"-inf"
std::string csv_number(long long v);

}  // namespace mok

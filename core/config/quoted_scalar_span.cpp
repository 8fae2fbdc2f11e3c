#include "core/config/quoted_scalar_span.h"

namespace mok {

size_t closing_quote_offset(std::string_view text, size_t open) {
  if (open >= text.size()) return std::string_view::npos;
  const char quote = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '"' && c == '\\') {
      ++i;  // the escaped character, whatever it is
    } else if (c == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is one quote inside the scalar
      } else {
        return i;
      }
    }
  }
  return std::string_view::npos;
}

}  // namespace mok

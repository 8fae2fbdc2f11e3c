#pragma once
// The bytes of a config before YAML reads them. YAML text is Unicode (here UTF-8) without
// control characters other than tab, line feed and carriage return; yaml-cpp reads other
// bytes anyway and then reports something unrelated ("unknown escape character") or passes
// them on into names and messages. So the text is checked first.

#include <string>
#include <string_view>

namespace mok {

// Throws ConfigError at the first byte that is not valid UTF-8 or is a control character
// YAML does not allow (a NUL byte, say), naming `source`:line:column (the column counts
// characters), the enclosing key path as far as the indentation of block keys shows it,
// and the byte. `line_base`/`column_base`: the position of the text's first character
// (an override's value inside its --set argument).
void check_config_text(std::string_view text, const std::string& source, int line_base = 1, int column_base = 1);

}  // namespace mok

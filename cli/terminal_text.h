// What the CLI prints of what it read — names of events, ops, threads, hosts and files, from profiles anyone could
// have written — goes through one function on its way to the terminal: a control character in a name is printed
// escaped (`\x1b`), never raw, so a trace cannot clear the screen, retitle the window or forge lines with ESC
// sequences, BEL, NUL or a carriage return.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace podscope::cli {

// `text` with every control character but the newline and the tab escaped: C0 and DEL as `\xNN`, C1 (U+0080 to
// U+009F, which terminals may take as 8-bit escape sequences) as `\u00NN`, and each byte that is not part of valid
// UTF-8 as `\xNN`.
std::string terminal_safe(std::string_view text);

// Writes terminal_safe(text) to `out`.
std::ostream& print(std::ostream& out, std::string_view text);

}  // namespace podscope::cli

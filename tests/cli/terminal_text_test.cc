// What the CLI prints goes through terminal_safe: control characters escaped, text and layout kept.
#include "cli/terminal_text.h"

#include <gtest/gtest.h>

#include <string>

namespace podscope::cli {
namespace {

TEST(TerminalText, ControlCharactersAreEscapedNewlinesAndTabsKept) {
  constexpr char kName[] = "aten::\x1b[31mred\0nul\x07 bel\rcr\x7f\x1b]0;title\x07";
  const std::string name(kName, sizeof kName - 1);
  EXPECT_EQ(terminal_safe(name + "\n\tnext line\n"),
            "aten::\\x1b[31mred\\x00nul\\x07 bel\\x0dcr\\x7f\\x1b]0;title\\x07\n\tnext line\n");
}

TEST(TerminalText, C1ControlsAndBrokenUtf8AreEscapedOtherUtf8Kept) {
  // U+009B is an 8-bit CSI to some terminals; a lone continuation byte and a cut sequence are no UTF-8.
  EXPECT_EQ(terminal_safe("\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80 \xc2\x9b[2J \x80 \xe2\x86"),
            "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80 \\u009b[2J \\x80 \\xe2\\x86");
  // Overlong encodings and surrogates are not valid UTF-8 either.
  EXPECT_EQ(terminal_safe("\xc0\x9b \xed\xa0\x80"), "\\xc0\\x9b \\xed\\xa0\\x80");
}

TEST(TerminalText, PlainTextIsUnchanged) {
  const std::string page = "step  time (ms)\n  1     12.5\n";
  EXPECT_EQ(terminal_safe(page), page);
}

}  // namespace
}  // namespace podscope::cli

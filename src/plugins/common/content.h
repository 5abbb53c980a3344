// What a file's first bytes look like, so that a plugin given the wrong kind of file can say what it got
// ("not HLO text (looks like a binary protobuf)"), and escaping of arbitrary bytes for messages, so that
// stderr and error records are always valid UTF-8. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace falcon::plugins {

enum class ContentKind {
  kEmpty,
  kProtobuf,  // binary whose first byte is a plausible protobuf field tag (an XSpace starts with 0x0a)
  kBinary,    // other binary data (control bytes or invalid UTF-8)
  kJson,      // text starting with '{' or '['
  kHlo,       // text with "HloModule" or "ENTRY" near the start
  kText,      // other text
};

// Classifies `head`, the first bytes of the (uncompressed) content; 4 KiB are plenty. A UTF-8 sequence cut
// at the end of `head` is not counted against it.
ContentKind ClassifyContent(std::string_view head);

// "a binary protobuf", "binary data", "JSON text", "HLO text", "text", "an empty file".
std::string_view DescribeContent(ContentKind kind);

// `s` with every byte that is not part of valid UTF-8, and every control character but tab and newline,
// written as \xNN (and a backslash as \\ only when it precedes 'x', so normal text stays as it is).
std::string EscapeBytes(std::string_view s);

}  // namespace falcon::plugins

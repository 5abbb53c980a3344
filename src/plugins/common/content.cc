#include "plugins/common/content.h"

#include <cstdint>

namespace falcon::plugins {

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 when it is not one; -1 when it is cut off by the end of `s`.
int Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  int n = 0;
  uint32_t min = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    unsigned char d = b(i + k);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsControl(unsigned char c) { return (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c == 0x7F; }

}  // namespace

ContentKind ClassifyContent(std::string_view head) {
  if (head.empty()) return ContentKind::kEmpty;
  // Binary: a NUL byte, or more than 1% of bytes that are control bytes (text has none but blanks) or not
  // UTF-8 (a text file with a stray control byte or a few Latin-1 bytes in a comment is still text).
  bool binary = false;
  size_t odd = 0;
  for (size_t i = 0; i < head.size();) {
    unsigned char c = static_cast<unsigned char>(head[i]);
    if (c < 0x80) {
      if (c == 0) {
        binary = true;
        break;
      }
      if (IsControl(c)) ++odd;
      ++i;
      continue;
    }
    int n = Utf8Length(head, i);
    if (n < 0) break;  // cut at the end of the head
    if (n == 0) {
      ++odd;
      ++i;
      continue;
    }
    i += static_cast<size_t>(n);
  }
  if (odd * 100 > head.size()) binary = true;
  if (binary) {
    // A protobuf message starts with a field tag: field number >= 1, wire type 0, 1, 2 or 5.
    unsigned char t = static_cast<unsigned char>(head[0]);
    unsigned wire = t & 7;
    bool tag = (t >> 3) != 0 && (wire == 0 || wire == 1 || wire == 2 || wire == 5);
    return tag ? ContentKind::kProtobuf : ContentKind::kBinary;
  }
  size_t p = 0;
  if (head.substr(0, 3) == "\xEF\xBB\xBF") p = 3;
  while (p < head.size() && (head[p] == ' ' || head[p] == '\t' || head[p] == '\n' || head[p] == '\r')) ++p;
  if (p == head.size()) return ContentKind::kText;
  if (head[p] == '{' || head[p] == '[') return ContentKind::kJson;
  if (head.find("HloModule") != std::string_view::npos || head.find("ENTRY") != std::string_view::npos) {
    return ContentKind::kHlo;
  }
  return ContentKind::kText;
}

std::string_view DescribeContent(ContentKind kind) {
  switch (kind) {
    case ContentKind::kEmpty:
      return "an empty file";
    case ContentKind::kProtobuf:
      return "a binary protobuf";
    case ContentKind::kBinary:
      return "binary data";
    case ContentKind::kJson:
      return "JSON text";
    case ContentKind::kHlo:
      return "HLO text";
    case ContentKind::kText:
      return "text";
  }
  return "unknown data";
}

std::string EscapeBytes(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char c) {
    out += "\\x";
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
        hex(c);
      } else if (c == '\\' && i + 1 < s.size() && s[i + 1] == 'x') {
        out += "\\\\";
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    int n = Utf8Length(s, i);
    if (n <= 0) {
      hex(c);
      ++i;
    } else {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

}  // namespace falcon::plugins

#include "net/url.h"

namespace falcon::net {

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string PercentEncodePath(std::string_view s) {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    out += PercentEncode(s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& query) {
  std::string out;
  char sep = '?';
  for (const auto& [k, v] : query) {
    out += sep;
    out += PercentEncode(k) + "=" + PercentEncode(v);
    sep = '&';
  }
  return out;
}

}  // namespace falcon::net

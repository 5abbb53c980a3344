// Percent-encoding (RFC 3986), the one encoder of the code base: URL path segments, query keys and values,
// form fields. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace falcon::net {

// Encodes every byte except the unreserved set (A-Z a-z 0-9 - _ . ~), so '/' becomes %2F (one path
// segment, a GCS object name, a query value) and ' ' becomes %20.
std::string PercentEncode(std::string_view s);

// Encodes a relative path segment by segment, keeping the '/' separators ("a b/c" -> "a%20b/c").
std::string PercentEncodePath(std::string_view s);

// "?k1=v1&k2=v2" with keys and values encoded; "" for no pairs.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& query);

}  // namespace falcon::net

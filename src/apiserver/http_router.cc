#include "apiserver/http_router.h"

#include <set>

namespace falcon::apiserver {
namespace {

// Splits a template into literal text and parameters: "{name}" (one or more characters other than '/'
// and ':') and "{name+}" (one or more of any character).
std::vector<HttpRouter::Token> Compile(const std::string& tmpl) {
  std::vector<HttpRouter::Token> out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] == '{') {
      size_t end = tmpl.find('}', i);
      bool rest = end != std::string::npos && end > i + 1 && tmpl[end - 1] == '+';
      out.push_back({rest ? HttpRouter::Token::kRest : HttpRouter::Token::kSegment, ""});
      i = end == std::string::npos ? tmpl.size() : end + 1;
      continue;
    }
    size_t next = tmpl.find('{', i);
    if (next == std::string::npos) next = tmpl.size();
    out.push_back({HttpRouter::Token::kLiteral, tmpl.substr(i, next - i)});
    i = next;
  }
  return out;
}

// Whether path[pos..] matches tokens[k..]; appends the parameters (the longest match of a "{name+}" wins,
// as a greedy regular expression would).
bool MatchFrom(const std::vector<HttpRouter::Token>& tokens, size_t k, std::string_view path, size_t pos,
               std::vector<std::string>* params) {
  if (k == tokens.size()) return pos == path.size();
  const HttpRouter::Token& t = tokens[k];
  switch (t.kind) {
    case HttpRouter::Token::kLiteral:
      if (path.compare(pos, t.text.size(), t.text) != 0) return false;
      return MatchFrom(tokens, k + 1, path, pos + t.text.size(), params);
    case HttpRouter::Token::kSegment: {
      size_t end = path.find_first_of("/:", pos);
      if (end == std::string_view::npos) end = path.size();
      if (end == pos) return false;
      // A segment parameter cannot be followed by another one (templates never do that), so its match is
      // all of the segment up to the next '/' or ':'.
      params->emplace_back(path.substr(pos, end - pos));
      if (MatchFrom(tokens, k + 1, path, end, params)) return true;
      params->pop_back();
      return false;
    }
    case HttpRouter::Token::kRest:
      for (size_t end = path.size(); end > pos; --end) {
        params->emplace_back(path.substr(pos, end - pos));
        if (MatchFrom(tokens, k + 1, path, end, params)) return true;
        params->pop_back();
      }
      return false;
  }
  return false;
}

}  // namespace

void HttpRouter::Add(HttpRoute route) {
  // The label in metrics and docs has no '+'.
  std::string label;
  for (char c : route.path) {
    if (c != '+') label += c;
  }
  patterns_.push_back(Compile(route.path));
  route.path = label;
  routes_.push_back(std::move(route));
}

HttpRouter::Match HttpRouter::Find(const std::string& method, const std::string& path) const {
  Match m;
  const std::string& want = method == "HEAD" ? std::string("GET") : method;
  std::set<std::string> allowed;
  for (size_t i = 0; i < routes_.size(); ++i) {
    std::vector<std::string> params;
    if (!MatchFrom(patterns_[i], 0, path, 0, &params)) continue;
    if (routes_[i].method == want) {
      m.route = &routes_[i];
      m.params = std::move(params);
      return m;
    }
    allowed.insert(routes_[i].method);
  }
  if (allowed.count("GET")) allowed.insert("HEAD");
  static const char* kOrder[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  for (const char* x : kOrder) {
    if (!allowed.count(x)) continue;
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += x;
  }
  return m;
}

}  // namespace falcon::apiserver

#include "apiserver/http_router.h"

#include <set>

namespace falcon::apiserver {
namespace {

std::regex Compile(const std::string& tmpl) {
  std::string re;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == '{') {
      size_t end = tmpl.find('}', i);
      bool rest = end != std::string::npos && end > i + 1 && tmpl[end - 1] == '+';
      re += rest ? "(.+)" : "([^/:]+)";
      i = end;
    } else if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) {
      re += '\\';
      re += c;
    } else {
      re += c;
    }
  }
  return std::regex(re);
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
    std::smatch sm;
    if (!std::regex_match(path, sm, patterns_[i])) continue;
    if (routes_[i].method == want) {
      m.route = &routes_[i];
      for (size_t k = 1; k < sm.size(); ++k) m.params.push_back(sm[k].str());
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

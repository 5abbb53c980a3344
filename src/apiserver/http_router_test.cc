// HttpRouter: path templates matched against hostile paths (the router sees every request's path).
#include "apiserver/http_router.h"

#include <gtest/gtest.h>

namespace falcon::apiserver {
namespace {

HttpRouter Routes() {
  HttpRouter r;
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/analyses"},
           {"GET", "/v1/analyses/{id}"},
           {"DELETE", "/v1/analyses/{id}"},
           {"POST", "/v1/analyses/{id}:cancel"},
           {"GET", "/v1/analyses/{id}/results/{name+}"},
           {"PUT", "/v1/exps/{exp_id}/files/{name+}"},
       }) {
    r.Add(HttpRoute{method, path, "x", BodyKind::kNone, nullptr});
  }
  return r;
}

TEST(HttpRouterTest, MatchesTemplatesAndReturnsTheirParameters) {
  HttpRouter r = Routes();
  auto m = r.Find("GET", "/v1/analyses/abc");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->path, "/v1/analyses/{id}");
  EXPECT_EQ(m.params, std::vector<std::string>{"abc"});
  m = r.Find("POST", "/v1/analyses/abc:cancel");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params, std::vector<std::string>{"abc"});
  m = r.Find("GET", "/v1/analyses/abc/results/dir/sub/file.jsonl");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->path, "/v1/analyses/{id}/results/{name}");  // the label has no '+'
  EXPECT_EQ(m.params, (std::vector<std::string>{"abc", "dir/sub/file.jsonl"}));
  m = r.Find("HEAD", "/v1/analyses");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->method, "GET");
}

TEST(HttpRouterTest, RefusesPathsThatOnlyLookLikeARoute) {
  HttpRouter r = Routes();
  for (const char* path : {"/v1/analyses/", "/v1/analyses//", "/v1/analyses/a/b", "/v1/analyses/a:b",
                           "/v1/analyses/a:cancel/x", "/v1/analyses/:cancel", "/v1/analysesX", "/v1/analyses/a/results/",
                           "v1/analyses/a", ""}) {
    auto m = r.Find("GET", path);
    EXPECT_EQ(m.route, nullptr) << path;
  }
  EXPECT_EQ(r.Find("POST", "/v1/analyses/a:cancel:cancel").route, nullptr);
  EXPECT_EQ(r.Find("POST", "/v1/analyses/a/b:cancel").route, nullptr);
}

TEST(HttpRouterTest, AnotherMethodOnAKnownPathListsTheAllowedOnes) {
  HttpRouter r = Routes();
  auto m = r.Find("PATCH", "/v1/analyses/abc");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allow, "GET, HEAD, DELETE");
  EXPECT_EQ(r.Find("PATCH", "/nothing").allow, "");
}

TEST(HttpRouterTest, ALongRestParameterIsMatchedWhole) {
  HttpRouter r = Routes();
  std::string name(100000, 'a');
  for (size_t i = 50; i < name.size(); i += 50) name[i] = '/';
  auto m = r.Find("PUT", "/v1/exps/e1/files/" + name);
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params[1], name);
}

}  // namespace
}  // namespace falcon::apiserver

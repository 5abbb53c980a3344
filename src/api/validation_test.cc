// The shared rules of src/api/: validation, the error mapping, the strict JSON mapping's range checks and
// the built-in OpenAPI document.
#include "api/validation.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/json_codec.h"
#include "api/openapi.h"

namespace falcon::api {
namespace {

using nlohmann::json;

TEST(ApiValidation, QuantitiesAreBoundedAndNeverThrow) {
  EXPECT_EQ(*ParseCpuQuantity("500m"), 500);
  EXPECT_EQ(*ParseCpuQuantity("2"), 2000);
  EXPECT_EQ(*ParseCpuQuantity("0.5"), 500);
  EXPECT_EQ(*ParseCpuQuantity("1e3"), 1'000'000);
  EXPECT_EQ(*ParseMemoryQuantity("1Gi"), 1073741824);
  EXPECT_EQ(*ParseMemoryQuantity("500M"), 500'000'000);
  for (const char* bad : {"", "1e-", "1e", "e3", "1x", ".", "-1", "0", "0m", "1Ei", "1e400", "1e-400",
                          "10000000000000000000000", "2000000", "1 m"}) {
    EXPECT_EQ(ParseCpuQuantity(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ParseMemoryQuantity(std::string(400, '9')).ok());
  EXPECT_FALSE(ParseMemoryQuantity("2Ei").ok());
  v1::Resources r;
  r.set_cpu_request("2");
  r.set_cpu_limit("1");
  auto s = ValidateResources(r, "resource_override");
  EXPECT_NE(s.message().find("resource_override.cpu_request"), absl::string_view::npos) << s;
}

TEST(ApiValidation, IdsUrisNamesAndPaths) {
  EXPECT_TRUE(ValidateId("exp-1.a_b", "exp_id").ok());
  for (const char* bad : {"", ".x", "-x", "a b", "a/b"}) EXPECT_FALSE(ValidateId(bad, "exp_id").ok()) << bad;
  EXPECT_FALSE(ValidateId(std::string(129, 'a'), "exp_id").ok());
  EXPECT_TRUE(ValidateArtifactUri("gs://bucket/a/b").ok());
  EXPECT_TRUE(ValidateArtifactUri("file:///tmp/x").ok());
  for (const char* bad : {"http://example.com/x", "x", "gs:///x", "file://relative", "s3://b/k"}) {
    EXPECT_FALSE(ValidateArtifactUri(bad).ok()) << bad;
  }
  EXPECT_TRUE(ValidateName(std::string(256, 'n'), "name", true).ok());
  EXPECT_FALSE(ValidateName(std::string(257, 'n'), "name", true).ok());
  EXPECT_FALSE(ValidateName("", "name", true).ok());
  // Characters, not bytes (as the OpenAPI document's maxLength counts): 256 two-byte characters are fine.
  std::string accented;
  for (int i = 0; i < 256; ++i) accented += "\xc3\xa9";
  EXPECT_TRUE(ValidateName(accented, "name", true).ok());
  EXPECT_FALSE(ValidateName(accented + "e", "name", true).ok());
  EXPECT_FALSE(ValidateName("a\x7f", "name", true).ok());
  EXPECT_TRUE(ValidateRelativePath("a/b.txt", "file name").ok());
  for (std::string bad : {std::string(""), std::string("a//b"), std::string("../x"), std::string("a/."),
                          std::string(256, 'x'), std::string("a\nb")}) {
    EXPECT_FALSE(ValidateRelativePath(bad, "file name").ok()) << bad;
  }
  EXPECT_FALSE(ValidateScriptName("a/b").ok());
  EXPECT_FALSE(ValidateUuid("0192F3C4-5D6E-7ABC-8DEF-0123456789AB", "analysis_id").ok());
}

TEST(ApiValidation, QueryParameters) {
  EXPECT_EQ(*ParseIntParam("page_size", "10", 1, 1000), 10);
  for (const char* bad : {"", "0", "1001", "-1", "1.5", "99999999999999999999"}) {
    EXPECT_FALSE(ParseIntParam("page_size", bad, 1, 1000).ok()) << bad;
  }
  EXPECT_TRUE(*ParseBoolParam("purge", "1"));
  EXPECT_FALSE(ParseBoolParam("purge", "").ok()) << "an empty value is not true";
  EXPECT_EQ(*ParseEnumParam(v1::ExpStatus_descriptor(), "status", "1"), 1);
  EXPECT_EQ(*ParseEnumParam(v1::ExpStatus_descriptor(), "status", "COMPLETED"), 3);
  EXPECT_FALSE(ParseEnumParam(v1::ExpStatus_descriptor(), "status", "").ok());
  EXPECT_FALSE(ParseEnumParam(v1::ExpStatus_descriptor(), "status", "0").ok());
  EXPECT_FALSE(ParseEnumParam(v1::ExpStatus_descriptor(), "status", "4294967297").ok());
}

TEST(ApiJson, NumbersAreRangeCheckedBeforeConversionAndNullIsRefused) {
  v1::AnalysisRecord r;
  auto s = FromJson(json::parse(R"({"status": 4294967297})"), &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "not taken as 1";
  EXPECT_FALSE(FromJson(json::parse(R"({"status": -1})"), &r).ok());
  v1::Plugin p;
  EXPECT_FALSE(FromJson(json::parse(R"({"timeout_seconds": 9223372036854775808})"), &p).ok());
  EXPECT_TRUE(FromJson(json::parse(R"({"timeout_seconds": "600"})"), &p).ok());
  s = FromJson(json::parse(R"({"name": null})"), &r);
  EXPECT_NE(s.message().find("null"), absl::string_view::npos) << s;
  EXPECT_TRUE(FromJson(json::parse(R"({"name": null, "new_field": 1})"), &r, JsonReadOptions::Answer()).ok());
  analyzer::v1::CreateAnalysisRequest req;
  s = FromJson(json::parse(R"({"resource_override": {"cpu": "1"}})"), &req);
  EXPECT_NE(s.message().find("resource_override.cpu"), absl::string_view::npos) << s;

  auto big = ParseJsonObject(R"({"name": 1e400})");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
}

TEST(ApiErrors, BodyAndHttpStatus) {
  EXPECT_EQ(ErrorBody(absl::NotFoundError("x")), json::parse(R"({"error":{"code":"NOT_FOUND","message":"x"}})"));
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("big")), 413);
  EXPECT_EQ(HttpStatusOf(WithHttpStatus(absl::ResourceExhaustedError("long"), 414)), 414);
  auto back = StatusFromErrorBody(404, R"({"error":{"code":"NOT_FOUND","message":"gone"}})");
  EXPECT_EQ(back.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(back.message(), "gone");
  EXPECT_EQ(StatusFromErrorBody(503, "<html>").code(), absl::StatusCode::kUnavailable);
}

TEST(ApiOpenApi, TheBuiltInDocumentIsJson) {
  auto doc = OpenApiJson();
  ASSERT_TRUE(doc.ok()) << doc.status();
  json j = json::parse(*doc);
  EXPECT_TRUE(j["openapi"].get<std::string>().rfind("3.", 0) == 0) << j["openapi"];
  EXPECT_TRUE(j.contains("paths"));
  auto typed = YamlToJson("a: 1\nb: '1'\nc: true\nd: [x, 2.5]\ne: ~\n");
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(json::parse(*typed), json::parse(R"({"a":1,"b":"1","c":true,"d":["x",2.5],"e":null})"));
}

}  // namespace
}  // namespace falcon::api

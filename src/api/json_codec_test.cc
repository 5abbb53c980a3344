#include "api/json_codec.h"

#include <gtest/gtest.h>

#include "falcon/analyzer/v1/analyzer.pb.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::api {
namespace {

using nlohmann::json;

TEST(ApiserverJsonCodec, RecordUsesSnakeCaseLowerCaseEnumsRfc3339AndTextScript) {
  api::v1::AnalysisRecord r;
  r.set_analysis_id("0192f3c4-5d6e-7abc-8def-0123456789ab");
  r.set_exp_id("e1");
  r.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  r.set_status(api::v1::ANALYSIS_STATUS_RUNNING);
  r.set_script_content("print('hi')\n");
  r.mutable_created_at()->set_seconds(1'700'000'000);
  r.mutable_created_at()->set_nanos(123'456'000);
  json j = ToJson(r);
  EXPECT_EQ(j["analysis_id"], "0192f3c4-5d6e-7abc-8def-0123456789ab");
  EXPECT_EQ(j["status"], "running");
  EXPECT_EQ(j["analysis_type"], "online");
  EXPECT_EQ(j["script_content"], "print('hi')\n");
  EXPECT_EQ(j["created_at"], "2023-11-14T22:13:20.123456Z");
  EXPECT_FALSE(j.contains("updated_at")) << "unset timestamps are omitted";
  EXPECT_EQ(j["error_message"], "") << "scalars are printed at their default";

  api::v1::AnalysisRecord back;
  ASSERT_TRUE(FromJson(j, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), r.SerializeAsString());
}

TEST(ApiserverJsonCodec, ExpStatusWords) {
  api::v1::Exp e;
  e.set_status(api::v1::EXP_STATUS_COMPLETED);
  EXPECT_EQ(ToJson(e)["status"], "completed");
  e.set_status(api::v1::EXP_STATUS_UNSPECIFIED);
  EXPECT_EQ(ToJson(e)["status"], "unspecified");
}

TEST(ApiserverJsonCodec, ParsesEnumNamesInAllForms) {
  for (const char* form : {"failed", "ANALYSIS_STATUS_FAILED"}) {
    api::v1::AnalysisRecord r;
    ASSERT_TRUE(FromJson(json{{"status", form}}, &r).ok()) << form;
    EXPECT_EQ(r.status(), api::v1::ANALYSIS_STATUS_FAILED) << form;
  }
  api::v1::AnalysisRecord r;
  ASSERT_TRUE(FromJson(json{{"status", 5}}, &r).ok());
  EXPECT_EQ(r.status(), api::v1::ANALYSIS_STATUS_CANCELLED);
}

TEST(ApiserverJsonCodec, RejectsUnknownFieldsAndWrongTypesNamingThem) {
  api::v1::AnalysisRecord r;
  auto s = FromJson(json{{"stauts", "running"}}, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("stauts"), absl::string_view::npos) << s.message();

  s = FromJson(json{{"status", "runing"}}, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("running"), absl::string_view::npos) << "lists accepted values: " << s.message();

  s = FromJson(json{{"name", 12}}, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"name\""), absl::string_view::npos) << s.message();

  s = FromJson(json{{"created_at", "yesterday"}}, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ApiserverJsonCodec, NestedMessagesAndRepeatedFields) {
  analyzer::v1::CreateAnalysisRequest req;
  auto s = FromJson(json::parse(R"({"exp_id":"e","resource_override":{"cpu_limit":"2"}})"), &req);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(req.resource_override().cpu_limit(), "2");

  api::v1::Plugin p;
  p.add_artifact_types("hlo");
  p.add_artifact_types("file");
  p.set_timeout_seconds(600);
  json j = ToJson(p);
  EXPECT_EQ(j["artifact_types"], json::array({"hlo", "file"}));
  EXPECT_EQ(j["timeout_seconds"], 600);
}

TEST(ApiserverJsonCodec, MapsAreObjectsBothWays) {
  api::v1::Plugin p;
  EXPECT_EQ(ToJson(p)["node_selector"], json::object());  // empty: {}, never []
  (*p.mutable_node_selector())["pool"] = "tpu";
  (*p.mutable_node_selector())["zone"] = "b";
  json j = ToJson(p);
  EXPECT_EQ(j["node_selector"], json::parse(R"({"pool":"tpu","zone":"b"})"));

  api::v1::Plugin back;
  auto s = FromJson(j, &back);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(back.node_selector().at("pool"), "tpu");
  EXPECT_EQ(back.node_selector().size(), 2u);
  s = FromJson(json::parse(R"({"node_selector":["pool"]})"), &back);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("must be an object"), std::string::npos) << s;
}

TEST(ApiserverJsonCodec, MalformedBodyNamesThePosition) {
  auto j = ParseJsonObject(R"({"name": "x",})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("at byte 14"), absl::string_view::npos) << j.status();

  j = ParseJsonObject("[1,2]");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("JSON object"), absl::string_view::npos) << j.status();

  j = ParseJsonObject("");
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE(j->is_object());
}

TEST(ApiserverJsonCodec, InvalidUtf8IsReplacedNotThrown) {
  api::v1::AnalysisRecord r;
  r.set_script_content(std::string("a\xff" "b"));
  std::string out = Dump(ToJson(r));
  EXPECT_NE(out.find("a\xEF\xBF\xBD" "b"), std::string::npos);
}

}  // namespace
}  // namespace falcon::api

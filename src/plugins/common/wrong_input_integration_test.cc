// Every plugin given a file of the wrong kind (an .xplane.pb to hlo-stats, HLO text to xplane-stats, ...)
// says what the file looks like, exits non-zero, and writes only valid UTF-8 to stderr, whatever bytes the
// file and its name hold.
#include "plugins/common/content.h"
#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

// True when `s` is valid UTF-8 without control bytes but newline and tab (checked byte by byte here, not
// with the plugins' own escaper).
bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || c == 0xC0 || c == 0xC1 || c > 0xF4 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

struct Case {
  std::string plugin, input, message;
};

TEST(WrongInput, EachPluginSaysWhatTheFileLooksLike) {
  TempDir tmp;
  const std::string xplane = ReferenceData("xplane/tracelens__jax08_gemm.tw003.xplane.pb");
  const std::string hlo = ReferenceData("hlo/xla__service_gpu_tests__dot_bf16.hlo");
  const std::string trace = ReferenceData("trace/xprof__tf_trace_viewer__trace.json");
  // Binary bytes in the name as well as in the content.
  std::string odd = tmp.Write("odd\xff\xfe.hlo", std::string("\x0a\x05\xff\xfe\x00\x01zz", 8));
  const std::vector<Case> cases = {
      {"hlo-stats", xplane, "not HLO text (looks like a binary protobuf)"},
      {"hlo-stats", trace, "not HLO text (looks like JSON text)"},
      {"hlo-stats", odd, "not HLO text (looks like a binary protobuf)"},
      {"xplane-stats", hlo, "not an XSpace protobuf (looks like HLO text)"},
      {"xplane-stats", trace, "not an XSpace protobuf (looks like JSON text)"},
      {"trace-summary", xplane, "not Chrome trace JSON (looks like a binary protobuf)"},
      {"trace-summary", hlo, "not Chrome trace JSON (looks like HLO text)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.plugin + " " + c.input);
    std::string out = tmp.path() + "/o.jsonl";
    ProcessOutput r = RunProcessOutput({PluginPath(c.plugin), "--input", c.input, "--output", out});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(ValidUtf8(r.output)) << EscapeBytes(r.output);
    EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
    auto errors = OfType(ReadJsonl(out), "error");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0]["message"].get<std::string>().find(c.message), std::string::npos) << errors[0].dump();
    EXPECT_EQ(errors[0]["code"], "INVALID_ARGUMENT");
  }
  // file-stats reads any file; its stderr is valid UTF-8 with such a name too.
  ProcessOutput r = RunProcessOutput({PluginPath("file-stats"), "--input", odd, "--output", tmp.path() + "/f.jsonl"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(ValidUtf8(r.output)) << EscapeBytes(r.output);
  EXPECT_NE(r.output.find("odd\\xff\\xfe.hlo"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace falcon::plugins::testing

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "plugins/common/content.h"
#include "plugins/common/jsonl_writer.h"
#include "plugins/common/plugin_io.h"
#include "plugins/common/plugin_main.h"

namespace falcon::plugins {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "plugin-common-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& rel, const std::string& content) {
    fs::path p = fs::path(path_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string WriteGz(const std::string& rel, const std::string& content) {
    fs::path p = fs::path(path_) / rel;
    fs::create_directories(p.parent_path());
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
    gzclose(f);
    return p.string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(PluginIo, CollectInputsWalksDirectoriesWithFilterAndKeepsExplicitFiles) {
  TempDir d;
  d.Write("a/x.trace.json", "{}");
  d.Write("a/b/y.trace.json.gz", "");
  d.Write("a/notes.txt", "");
  std::string explicit_file = d.Write("other.bin", "");
  auto files = CollectInputs({d.path() + "/a", explicit_file},
                             [](const std::string& n) { return HasSuffixMaybeGz(n, ".trace.json"); });
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0], d.path() + "/a/b/y.trace.json.gz");
  EXPECT_EQ((*files)[1], d.path() + "/a/x.trace.json");
  EXPECT_EQ((*files)[2], explicit_file);
  EXPECT_EQ(CollectInputs({d.path() + "/missing"}, nullptr).status().code(), absl::StatusCode::kNotFound);
}

TEST(PluginIo, ReadsGzipAndPlainFilesAlike) {
  TempDir d;
  std::string text(300000, 'q');
  text += "end";
  auto plain = ReadWholeFile(d.Write("p.txt", text));
  auto gz = ReadWholeFile(d.WriteGz("p.txt.gz", text));
  ASSERT_TRUE(plain.ok() && gz.ok());
  EXPECT_EQ(*plain, text);
  EXPECT_EQ(*gz, text);
}

TEST(PluginIo, TruncatedGzipIsDataLoss) {
  TempDir d;
  std::string text;
  for (int i = 0; i < 100000; ++i) text += std::to_string(i * 7919 % 10007);
  std::string gz = d.WriteGz("t.gz", text);
  fs::resize_file(gz, fs::file_size(gz) / 2);
  auto r = ReadWholeFile(gz);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

TEST(PluginIo, InputErrorCarriesLocation) {
  auto s = InputError("bad", 12, 345);
  EXPECT_EQ(ErrorLine(s), 12);
  EXPECT_EQ(ErrorOffset(s), 345);
  EXPECT_FALSE(ErrorLine(absl::InternalError("x")).has_value());
}

TEST(JsonlWriter, RecordsStartWithTypeAndSource) {
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_source("f.json");
  Json r = w.Record("op");
  r["n"] = 1;
  w.Write(r);
  ASSERT_TRUE(w.Close().ok());
  EXPECT_EQ(os.str(), "{\"record_type\":\"op\",\"source\":\"f.json\",\"n\":1}\n");
}

PluginInfo TestInfo() {
  PluginInfo info;
  info.name = "demo";
  info.description = "demo plugin";
  info.file_kinds = "*.demo files";
  info.filter = [](const std::string& n) { return HasSuffixMaybeGz(n, ".demo"); };
  return info;
}

TEST(JsonlWriter, AppendHelpersPrintExactlyWhatDumpPrints) {
  // The hot-path serializers must agree with nlohmann's dump (Write()) byte for byte.
  const std::string strings[] = {
      "", "plain ascii/op_name(x)", "quote\" and back\\slash", "ctrl \x01\x1f\n\t\r\b\f", "del \x7f",
      "utf8 caf\xc3\xa9 \xe2\x82\xac", "bad \xff\xfe utf8", "truncated \xc3", std::string("nul \0 byte", 10)};
  for (const std::string& v : strings) {
    std::string got;
    AppendJsonString(got, v);
    EXPECT_EQ(got, Json(v).dump(-1, ' ', false, Json::error_handler_t::replace)) << v;
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{42}, INT64_MIN, INT64_MAX}) {
    std::string got;
    AppendJsonInt(got, v);
    EXPECT_EQ(got, Json(v).dump());
  }
  std::string u;
  AppendJsonUInt(u, UINT64_MAX);
  EXPECT_EQ(u, Json(UINT64_MAX).dump());
  for (double v : {0.5, 1e20, -3.25, 1.0 / 3}) {
    std::string got;
    AppendJsonDouble(got, v);
    EXPECT_EQ(got, Json(v).dump());
  }

  std::ostringstream os;
  JsonlWriter w(os);
  w.WriteRaw("{\"a\":1}\n{\"b\":2}\n", 2);
  EXPECT_EQ(w.records_written(), 2u);
  EXPECT_EQ(os.str(), "{\"a\":1}\n{\"b\":2}\n");
}

TEST(PluginMain, DefaultsComeFromEnvironment) {
  const char* argv[] = {"demo"};
  auto o = ParsePluginArgs(TestInfo(), 1, argv, {{"FALCON_INPUT_DIR", "/in"}, {"FALCON_OUTPUT_DIR", "/out"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->inputs, std::vector<std::string>{"/in"});
  EXPECT_EQ(o->output, "/out/demo.jsonl");
  auto missing = ParsePluginArgs(TestInfo(), 1, argv, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  const char* help[] = {"demo", "--help"};
  auto h = ParsePluginArgs(TestInfo(), 2, help, {});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  EXPECT_NE(h->help_text.find("--input"), std::string::npos);
}

TEST(PluginMain, ErrorRecordsAndExitStatus) {
  TempDir d;
  d.Write("in/good.demo", "ok");
  d.Write("in/bad.demo", "bad");
  PluginOptions o;
  o.inputs = {d.path() + "/in", d.path() + "/nope"};
  o.output = d.path() + "/out/demo.jsonl";
  AnalyzeFn fn = [](const std::string& path, JsonlWriter& out) -> absl::Status {
    auto data = ReadWholeFile(path);
    if (*data == "bad") return InputError("bad content", 3, std::nullopt);
    out.Write(out.Record("fine"));
    return absl::OkStatus();
  };
  EXPECT_EQ(RunPluginOnInputs(TestInfo(), o, fn), 0);
  std::ifstream f(o.output);
  std::vector<Json> recs;
  for (std::string line; std::getline(f, line);) recs.push_back(Json::parse(line));
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0]["record_type"], "error");  // the missing path
  EXPECT_EQ(recs[0]["code"], "NOT_FOUND");
  EXPECT_EQ(recs[1]["record_type"], "error");
  EXPECT_EQ(recs[1]["line"], 3);
  EXPECT_EQ(recs[1]["source"], d.path() + "/in/bad.demo");
  EXPECT_EQ(recs[2]["record_type"], "fine");

  o.inputs = {d.path() + "/in/bad.demo"};
  EXPECT_EQ(RunPluginOnInputs(TestInfo(), o, fn), 1);
}

// Several files are analysed at once (small ones into memory on worker threads, a large one on the
// calling thread straight into the output); the output must be exactly that of one thread, in input
// order, whatever order the files finish in.
TEST(PluginMain, FilesAnalysedInParallelAreWrittenInInputOrder) {
  TempDir d;
  for (int i = 0; i < 40; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "in/f%02d.demo", i);
    d.Write(name, i == 17 ? "bad" : std::to_string(i));
  }
  d.Write("in/f20_large.demo", std::string(5 << 20, 'x'));  // over the in-memory limit
  PluginOptions o;
  o.inputs = {d.path() + "/in"};
  AnalyzeFn fn = [](const std::string& path, JsonlWriter& out) -> absl::Status {
    auto data = ReadWholeFile(path);
    if (!data.ok()) return data.status();
    if (*data == "bad") return InputError("bad content", 1, std::nullopt);
    // Early files take longest, so later ones finish first.
    int n = data->size() > 100 ? 0 : std::stoi(*data);
    std::this_thread::sleep_for(std::chrono::milliseconds(n < 8 ? 30 - 3 * n : 0));
    for (int k = 0; k < 3; ++k) {
      Json r = out.Record("part");
      r["k"] = k;
      r["size"] = data->size();
      out.Write(r);
    }
    return absl::OkStatus();
  };
  auto run = [&](const char* threads) {
    setenv("FALCON_PLUGIN_THREADS", threads, 1);
    o.output = d.path() + "/out-" + threads + ".jsonl";
    EXPECT_EQ(RunPluginOnInputs(TestInfo(), o, fn), 0);
    unsetenv("FALCON_PLUGIN_THREADS");
    auto text = ReadWholeFile(o.output);
    return text.ok() ? *text : std::string();
  };
  std::string one = run("1"), four = run("4");
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 40 * 3 + 1);  // 40 files ok, 1 error
  EXPECT_TRUE(one == four) << "the parallel run's output differs from the sequential one";
}

}  // namespace
}  // namespace falcon::plugins

namespace falcon::plugins {
namespace {

TEST(Content, ClassifiesWhatAFileLooksLike) {
  EXPECT_EQ(ClassifyContent(""), ContentKind::kEmpty);
  // An XSpace starts with field 1 (planes), length-delimited: 0x0a, then a varint length.
  EXPECT_EQ(ClassifyContent(std::string("\x0a\x8b\x02\x08\x01\x12\x05/host", 11)), ContentKind::kProtobuf);
  EXPECT_EQ(ClassifyContent(std::string("\x00\x00\x00\x01", 4)), ContentKind::kBinary);  // field 0: no tag
  EXPECT_EQ(ClassifyContent("  {\"traceEvents\": []}"), ContentKind::kJson);
  EXPECT_EQ(ClassifyContent("[{\"ph\":\"X\"}"), ContentKind::kJson);
  EXPECT_EQ(ClassifyContent("HloModule m\n\nENTRY e {\n}\n"), ContentKind::kHlo);
  EXPECT_EQ(ClassifyContent("// a comment\nHloModule m"), ContentKind::kHlo);
  EXPECT_EQ(ClassifyContent("hello world\n"), ContentKind::kText);
  // A text with one Latin-1 or control byte in 200 is still text; mostly invalid UTF-8 is binary.
  EXPECT_EQ(ClassifyContent("HloModule m // caf\xe9" + std::string(200, ' ')), ContentKind::kHlo);
  EXPECT_EQ(ClassifyContent("HloModule m // \x01" + std::string(200, ' ')), ContentKind::kHlo);
  EXPECT_EQ(ClassifyContent("HloModule \xff\xfe\xfd\xfc"), ContentKind::kProtobuf);  // 'H' is a valid tag
  // A UTF-8 sequence cut at the end of the head does not count against it.
  EXPECT_EQ(ClassifyContent("HloModule caf\xc3"), ContentKind::kHlo);
  EXPECT_EQ(DescribeContent(ContentKind::kProtobuf), "a binary protobuf");
}

TEST(Content, EscapeBytesGivesValidUtf8) {
  EXPECT_EQ(EscapeBytes("plain text, caf\xc3\xa9\ttab\nline"), "plain text, caf\xc3\xa9\ttab\nline");
  EXPECT_EQ(EscapeBytes(std::string("a\xff\x00z", 4)), "a\\xff\\x00z");
  EXPECT_EQ(EscapeBytes("\xc3"), "\\xc3");              // a cut sequence
  EXPECT_EQ(EscapeBytes("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  EXPECT_EQ(EscapeBytes("C:\\x41"), "C:\\\\x41");       // a literal \x stays distinguishable
  EXPECT_EQ(EscapeBytes("\x1b[31m"), "\\x1b[31m");      // no terminal escapes
}

TEST(Provenance, StagedFilesAndPrefixesResolveToTheirUris) {
  ProvenanceResolver r("a1", "/w/input/", {{"host.xplane.pb", "gs://b/exps/e/host.xplane.pb"},
                                           {"run1", "gs://b/exps/e/run1/"},
                                           {"dir", "file:///data/dir"}});
  Provenance f = r.Resolve("/w/input/host.xplane.pb");
  EXPECT_EQ(f.source, "gs://b/exps/e/host.xplane.pb");
  EXPECT_EQ(f.analysis_id, "a1");
  EXPECT_EQ(f.local_path, "/w/input/host.xplane.pb");
  EXPECT_EQ(r.Resolve("/w/input/run1/plugins/profile/x.xplane.pb").source,
            "gs://b/exps/e/run1/plugins/profile/x.xplane.pb");
  EXPECT_EQ(r.Resolve("/w/input//dir/./a.hlo").source, "file:///data/dir/a.hlo");
  // Not staged by the runner: the path itself, no local_path.
  Provenance other = r.Resolve("/elsewhere/a.hlo");
  EXPECT_EQ(other.source, "/elsewhere/a.hlo");
  EXPECT_EQ(other.local_path, "");
  EXPECT_EQ(other.analysis_id, "a1");
  EXPECT_EQ(ProvenanceResolver().Resolve("x.hlo").source, "x.hlo");
}

TEST(Provenance, RelativeAndAbsolutePathsOfTheSameFileResolve) {
  const std::string cwd = std::filesystem::current_path().string();
  ProvenanceResolver abs_dir("a1", cwd + "/input", {{"host.xplane.pb", "gs://b/host.xplane.pb"}});
  Provenance f = abs_dir.Resolve("input/host.xplane.pb");
  EXPECT_EQ(f.source, "gs://b/host.xplane.pb");
  EXPECT_EQ(f.local_path, "input/host.xplane.pb");
  ProvenanceResolver rel_dir("a1", "./input/", {{"host.xplane.pb", "gs://b/host.xplane.pb"}});
  EXPECT_EQ(rel_dir.Resolve(cwd + "/input/host.xplane.pb").source, "gs://b/host.xplane.pb");
  EXPECT_EQ(rel_dir.Resolve("other/host.xplane.pb").source, "other/host.xplane.pb");
}

TEST(Provenance, ManifestFromTheEnvironment) {
  TempDir d;
  std::string m = d.Write("input-manifest.json",
                          R"({"analysis_id":"a1","inputs":[{"staged":"t.json","uri":"gs://b/t.json"}]})");
  auto r = ProvenanceResolver::FromEnv(
      {{"FALCON_ANALYSIS_ID", "a1"}, {"FALCON_INPUT_DIR", d.path() + "/input"}, {"FALCON_INPUT_MANIFEST", m}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Resolve(d.path() + "/input/t.json").source, "gs://b/t.json");
  std::string bad = d.Write("bad.json", R"({"inputs":[{"staged":1}]})");
  EXPECT_EQ(ProvenanceResolver::FromEnv({{"FALCON_INPUT_MANIFEST", bad}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProvenanceResolver::FromEnv({{"FALCON_INPUT_MANIFEST", d.path() + "/none.json"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Provenance, EveryRecordCarriesUriAndAnalysisId) {
  TempDir d;
  d.Write("input/t.demo", "ok");
  d.Write("input/bad.demo", std::string("bad \xff\xfe", 6));
  std::string m = d.Write("input-manifest.json",
                          R"({"inputs":[{"staged":"t.demo","uri":"gs://b/e/t.demo"},)"
                          R"({"staged":"bad.demo","uri":"gs://b/e/bad.demo"}]})");
  const char* argv[] = {"demo"};
  auto o = ParsePluginArgs(TestInfo(), 1, argv,
                           {{"FALCON_INPUT_DIR", d.path() + "/input"},
                            {"FALCON_OUTPUT_DIR", d.path() + "/out"},
                            {"FALCON_ANALYSIS_ID", "0190-a"},
                            {"FALCON_INPUT_MANIFEST", m}});
  ASSERT_TRUE(o.ok()) << o.status();
  AnalyzeFn fn = [](const std::string& path, JsonlWriter& out) -> absl::Status {
    auto data = ReadWholeFile(path);
    if (*data != "ok") return InputError(*data, 1, std::nullopt);  // a message with invalid UTF-8
    out.Write(out.Record("fine"));
    return absl::OkStatus();
  };
  EXPECT_EQ(RunPluginOnInputs(TestInfo(), *o, fn), 0);
  std::ifstream f(o->output);
  std::vector<Json> recs;
  for (std::string line; std::getline(f, line);) recs.push_back(Json::parse(line));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0]["record_type"], "error");
  EXPECT_EQ(recs[0]["source"], "gs://b/e/bad.demo");
  EXPECT_EQ(recs[0]["message"], "bad \\xff\\xfe");
  EXPECT_EQ(recs[1]["source"], "gs://b/e/t.demo");
  EXPECT_EQ(recs[1]["analysis_id"], "0190-a");
  EXPECT_EQ(recs[1]["local_path"], d.path() + "/input/t.demo");
  // The serialized fields of the fast path are those of Record().
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_provenance({"gs://b/x", "a1", "/w/x"});
  EXPECT_EQ(w.SourceFieldsJson(), R"("gs://b/x","analysis_id":"a1","local_path":"/w/x")");
  EXPECT_EQ(JsonlWriter::Serialize(w.Record("r")),
            R"({"record_type":"r","source":"gs://b/x","analysis_id":"a1","local_path":"/w/x"})" "\n");
}

}  // namespace
}  // namespace falcon::plugins

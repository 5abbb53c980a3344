#include "plugins/hlo_stats/hlo_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "plugins/common/plugin_io.h"
#include "plugins/hlo_stats/hlo_cost.h"
#include "plugins/hlo_stats/hlo_parser.h"

namespace falcon::plugins {
namespace {

std::vector<Json> Analyze(const std::string& text, absl::Status* status = nullptr) {
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_source("x.hlo");
  absl::Status s = AnalyzeHloText(text, "module_0001.jit_f.after_optimizations.txt", w);
  if (status)
    *status = s;
  else
    EXPECT_TRUE(s.ok()) << s;
  std::vector<Json> out;
  std::istringstream is(os.str());
  for (std::string line; std::getline(is, line);) out.push_back(Json::parse(line));
  return out;
}

const Json& Instr(const std::vector<Json>& recs, const std::string& name) {
  for (const auto& r : recs) {
    if (r["record_type"] == "instruction" && r["name"] == name) return r;
  }
  static Json none;
  ADD_FAILURE() << "no instruction " << name;
  return none;
}

TEST(HloShape, ParsesTuplesLayoutsDynamicDims) {
  std::string_view t = "(f32[2,3]{1,0:T(8,128)S(5)}, (s32[], pred[4]), bf16[2,<=2,2]{2,1,0}) rest";
  auto s = hlo::ParseShape(t);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->is_tuple);
  ASSERT_EQ(s->elements.size(), 3u);
  EXPECT_EQ(s->elements[0].ElementCount(), 6);
  EXPECT_EQ(s->elements[2].dims, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(s->ByteSize(), 6 * 4 + 4 + 4 + 8 * 2);
  EXPECT_EQ(s->ToString(), "(f32[2,3], (s32[], pred[4]), bf16[2,2,2])");
  EXPECT_EQ(t, " rest");
}

TEST(HloStats, MatmulFlopsAre2MNK) {
  // The matmul chain of testdata: (a @ b) @ c with a[128,256], b[256,512], c[512,64].
  auto recs = Analyze(
      R"(HloModule jit_matmul_chain, entry_computation_layout={(f32[128,256]{1,0})->f32[128,64]{1,0}}

ENTRY %main.1 (a.1: f32[128,256], b.1: f32[256,512], c.1: f32[512,64]) -> f32[128,64] {
  %a.1 = f32[128,256]{1,0} parameter(0), metadata={op_name="a"}
  %b.1 = f32[256,512]{1,0} parameter(1)
  %dot.2 = f32[128,512]{1,0} dot(%a.1, %b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" source_file="/t.py" source_line=6}
  %c.1 = f32[512,64]{1,0} parameter(2)
  ROOT %dot.3 = f32[128,64]{1,0} dot(%dot.2, %c.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)");
  ASSERT_EQ(recs[0]["record_type"], "module");
  EXPECT_EQ(recs[0]["module"], "jit_matmul_chain");
  EXPECT_EQ(recs[0]["stage"], "after_optimizations");
  EXPECT_EQ(recs[0]["flops"], 2LL * 128 * 256 * 512 + 2LL * 128 * 512 * 64);
  EXPECT_EQ(recs[0]["instructions"], 5);
  EXPECT_EQ(recs[0]["opcode_counts"]["dot"], 2);
  EXPECT_EQ(recs[0]["parameter_bytes"], 4 * (128 * 256 + 256 * 512 + 512 * 64));
  EXPECT_EQ(recs[0]["output_bytes"], 4 * 128 * 64);
  const Json& d = Instr(recs, "dot.2");
  EXPECT_EQ(d["flops"], 2LL * 128 * 256 * 512);
  EXPECT_EQ(d["bytes_accessed"], 4 * (128 * 256 + 256 * 512 + 128 * 512));
  EXPECT_EQ(d["op_name"], "jit(f)/dot_general");
  EXPECT_EQ(d["source_file"], "/t.py");
  EXPECT_EQ(d["source_line"], 6);
  EXPECT_EQ(d["line"], 6);
  EXPECT_EQ(Instr(recs, "a.1")["bytes_accessed"], 0);
}

TEST(HloStats, BatchedDotFusionReduceTranscendentalsAndStackFrames) {
  auto recs = Analyze(R"(HloModule m

FileNames
1 "model.py"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%fused (p0: f32[8,16], p1: f32[8,16]) -> f32[8,16] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[8,16]{1,0} parameter(1)
  %m = f32[8,16]{1,0} multiply(%p0, %p1)
  ROOT %e = f32[8,16]{1,0} exponential(%m)
}

ENTRY %main {
  %a = f32[4,8,32]{2,1,0} parameter(0)
  %b = f32[4,32,16]{2,1,0} parameter(1)
  %bd = f32[4,8,16]{2,1,0} dot(f32[4,8,32]{2,1,0} %a, f32[4,32,16]{2,1,0} %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, metadata={op_name="bd" stack_frame_id=1}
  %z = f32[] constant(0)
  %r = f32[8,16]{1,0} reduce(%bd, %z), dimensions={0}, to_apply=%add
  %f = f32[8,16]{1,0} fusion(%r, %r), kind=kLoop, calls=%fused
  %ar = f32[8,16]{1,0} all-reduce-start(%f), replica_groups={{0,1}}, to_apply=%add
  %ard = f32[8,16]{1,0} all-reduce-done(%ar)
  ROOT %t = (f32[8,16]{1,0}, f32[]) tuple(%ard, %z)
}
)");
  const Json& m = recs[0];
  EXPECT_EQ(Instr(recs, "bd")["flops"], 2 * 4 * 8 * 16 * 32);
  EXPECT_EQ(Instr(recs, "bd")["source_file"], "model.py");
  EXPECT_EQ(Instr(recs, "bd")["source_line"], 42);
  EXPECT_EQ(Instr(recs, "r")["flops"], 4 * 8 * 16 - 8 * 16);  // (in - out) x 1 add
  EXPECT_EQ(Instr(recs, "f")["flops"], 8 * 16);               // the fused multiply
  EXPECT_EQ(Instr(recs, "f")["transcendentals"], 8 * 16);     // the fused exponential
  EXPECT_EQ(Instr(recs, "f")["fusion_kind"], "kLoop");
  EXPECT_EQ(Instr(recs, "m")["fused"], true);
  EXPECT_EQ(Instr(recs, "f")["bytes_accessed"], 3 * 8 * 16 * 4);
  EXPECT_EQ(Instr(recs, "ar")["flops"], 8 * 16);
  EXPECT_EQ(Instr(recs, "ard")["bytes_accessed"], 0);
  EXPECT_EQ(Instr(recs, "t")["is_root"], true);
  EXPECT_EQ(m["fusions_by_kind"]["kLoop"], 1);
  EXPECT_EQ(m["collectives_by_kind"]["all-reduce"], 1);
  EXPECT_EQ(m["collectives_by_kind"].size(), 1u);
  EXPECT_EQ(m["fused_computations"], 1);
  EXPECT_EQ(m["computations"], 3);
  EXPECT_EQ(m["entry_computation"], "main");
  // Module total = entry instructions only (fusion and reducer bodies are counted through their
  // callers).
  EXPECT_EQ(m["flops"], 2 * 4 * 8 * 16 * 32 + (4 * 8 * 16 - 8 * 16) + 8 * 16 + 8 * 16);
  EXPECT_EQ(m["transcendentals"], 8 * 16);
}

TEST(HloStats, ConvolutionCountsValidWindowPositions) {
  // 1x1 image 5x5, 3x3 kernel, pad 1: per spatial dim 5 outputs x 3 taps minus 2 padded taps = 13.
  auto recs = Analyze(R"(HloModule conv
ENTRY %c {
  %in = f32[2,5,5,3]{3,2,1,0} parameter(0)
  %k = f32[3,3,3,8]{3,2,1,0} parameter(1)
  ROOT %conv = f32[2,5,5,8]{3,2,1,0} convolution(%in, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
)");
  EXPECT_EQ(Instr(recs, "conv")["flops"], 2 * 3 * 8 * 2 * 13 * 13);
}

TEST(HloStats, SeveralModulesOneBrokenStillReportsTheOthers) {
  absl::Status s;
  auto recs = Analyze(R"(HloModule good
ENTRY %e {
  ROOT %p = f32[4]{0} parameter(0)
}

// -----

HloModule bad
ENTRY %e {
  %p = f32[4]{0} parameter(0)
  ROOT %x = f32[4 negate(%p)
}
)",
                      &s);
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0]["record_type"], "module");
  EXPECT_EQ(recs[2]["record_type"], "error");
  EXPECT_EQ(recs[2]["line"], 11);

  Analyze("HloModule only_bad\nENTRY %e {\n  ROOT %x = f32[4]{0} negate(\n", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsAlreadyReported(s));
}

TEST(HloStats, UnknownOpcodesAndAttributesAreCarriedThrough) {
  auto recs = Analyze(R"(
ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %y = f32[4]{0} my-new-op(%p), some_attr={a=1, b="x,}"}, frontend_attributes={k="v"},
      backend_config="{\"x\": 1}"
}
)");
  EXPECT_EQ(Instr(recs, "y")["opcode"], "my-new-op");
  EXPECT_EQ(Instr(recs, "y")["flops"], 0);
  EXPECT_EQ(Instr(recs, "y")["bytes_accessed"], 32);
}

TEST(HloStats, MetadataEscapesCommentsAndCrlfSurviveIntoTheRecords) {
  // Escaped quotes and backslashes in metadata, control characters and UTF-8 in strings, /* */ and
  // // comments, CRLF line ends, a tuple shape with an /*index=N*/ comment, and a file without a
  // final newline.
  std::string text =
      "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}} // trailing\r\n"
      "ENTRY %e {\r\n"
      "  %p = f32[2]{0} parameter(0), metadata={op_name=\"a\\\"b\\\\c caf\xc3\xa9 \x01\" "
      "op_type=\"t/*x*/\" "
      "source_file=\"/s.py\" source_line=9}\r\n"
      "  /* block\r\n comment */ %t = (f32[2]{0}, f32[], f32[], f32[], f32[], "
      "/*index=5*/s32[3]{0}) "
      "tuple(%p, %p, %p, %p, %p, %p)\r\n"
      "  ROOT %n = f32[2]{0} negate(%p)\r\n"
      "}";
  auto recs = Analyze(text);
  ASSERT_EQ(recs.size(), 4u);
  const Json& p = Instr(recs, "p");
  EXPECT_EQ(p["op_name"], "a\"b\\c caf\xc3\xa9 \x01");
  EXPECT_EQ(p["op_type"], "t/*x*/");
  EXPECT_EQ(p["source_line"], 9);
  EXPECT_EQ(p["line"], 3);
  const Json& t = Instr(recs, "t");
  EXPECT_EQ(t["shape"], "(f32[2], f32[], f32[], f32[], f32[], s32[3])");
  EXPECT_EQ(t["dtype"], "tuple");
  EXPECT_EQ(t["elements"], 2 + 4 + 3);
  EXPECT_EQ(t["line"], 5);
  EXPECT_EQ(t["bytes_accessed"], 8 * 6);
  EXPECT_EQ(Instr(recs, "n")["line"], 6);
  EXPECT_EQ(Instr(recs, "n")["is_root"], true);
}

// A file of many modules is analysed in chunks by several threads (AnalyzeHloFile); the records
// must be exactly those of the one-pass analysis of the same text, in file order, with the error
// record of a broken module in its place and its line right.
TEST(HloStats, ChunkedParallelFileAnalysisEqualsOnePass) {
  std::string text = "// a dump written by hand\n";
  int broken_line = 0;
  for (int i = 0; i < 1500; ++i) {
    absl::StrAppend(&text, "HloModule m", i, "\n\nENTRY %e.", i, " (p: f32[8,8]) -> f32[8,8] {\n",
                    "  %p = f32[8,8]{1,0} parameter(0), metadata={op_name=\"x/p\"}\n");
    for (int k = 0; k < 20; ++k) {
      absl::StrAppend(&text, "  %d", k, " = f32[8,8]{1,0} dot(%",
                      k ? absl::StrCat("d", k - 1) : "p",
                      ", %p), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n");
    }
    if (i == 777) {
      broken_line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
      text += "  %bad = f32[8 negate(%p)\n";
    }
    text += "  ROOT %r = f32[8,8]{1,0} negate(%d19)\n}\n\n";
  }
  ASSERT_GT(text.size(), 2u << 20);  // several chunks

  std::string path = ::testing::TempDir() + "/chunked.hlo";
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  auto run = [&](bool file) {
    std::ostringstream os;
    JsonlWriter w(os);
    w.set_source("x.hlo");
    absl::Status s = file ? AnalyzeHloFile(path, w) : AnalyzeHloText(text, "x.hlo", w);
    EXPECT_TRUE(s.ok()) << s;
    std::string out = os.str();
    EXPECT_EQ(w.records_written(), static_cast<uint64_t>(std::count(out.begin(), out.end(), '\n')));
    return out;
  };
  std::string one_pass = run(false);
  setenv("FALCON_PLUGIN_THREADS", "4", 1);  // more workers than this machine may have cores
  std::string chunked = run(true);
  unsetenv("FALCON_PLUGIN_THREADS");
  EXPECT_TRUE(one_pass == chunked) << "the chunked output differs from the one-pass output";
  std::istringstream is(chunked);
  int next_module = 0, errors = 0;
  for (std::string line; std::getline(is, line);) {
    Json r = Json::parse(line);
    if (r["record_type"] == "module") {
      if (next_module == 777) ++next_module;  // the broken one has an error record instead
      EXPECT_EQ(r["module"], absl::StrCat("m", next_module)) << "out of order";
      ++next_module;
    } else if (r["record_type"] == "error") {
      ++errors;
      EXPECT_EQ(r["line"], broken_line) << r.dump();
      EXPECT_EQ(next_module, 777);
    }
  }
  EXPECT_EQ(next_module, 1500);
  EXPECT_EQ(errors, 1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace falcon::plugins

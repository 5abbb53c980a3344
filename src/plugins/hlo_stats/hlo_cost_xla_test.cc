// The cost model against XLA's HloCostAnalysis rules (xla/service/hlo_cost_analysis.cc and the GPU
// subclass' custom-call rules), one op class per test, with figures worked out by hand from those rules.
#include <gtest/gtest.h>

#include <sstream>

#include "plugins/hlo_stats/hlo_stats.h"

namespace falcon::plugins {
namespace {

std::vector<Json> Analyze(const std::string& text) {
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_source("x.hlo");
  absl::Status s = AnalyzeHloText(text, "x.hlo", w);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<Json> out;
  std::istringstream is(os.str());
  for (std::string line; std::getline(is, line);) out.push_back(Json::parse(line));
  return out;
}

const Json& Find(const std::vector<Json>& recs, const std::string& type, const std::string& name = "") {
  for (const auto& r : recs) {
    if (r["record_type"] == type && (name.empty() || r["name"] == name)) return r;
  }
  static Json none;
  ADD_FAILURE() << "no " << type << " " << name;
  return none;
}

TEST(HloCostXla, FftIs8TimesLog2LengthsTimesInputElements) {
  auto recs = Analyze(R"(HloModule m
ENTRY e {
  p = c64[8,32]{1,0} parameter(0)
  f1 = c64[8,32]{1,0} fft(p), fft_type=FFT, fft_length={32}
  q = c64[4,16,32]{2,1,0} parameter(1)
  f2 = c64[4,16,32]{2,1,0} fft(q), fft_type=IFFT, fft_length={16,32}
  r = f32[4,30]{1,0} parameter(2)
  ROOT f3 = c64[4,16]{1,0} fft(r), fft_type=RFFT, fft_length={30}
})");
  EXPECT_EQ(Find(recs, "instruction", "f1")["flops"], 2 * 4 * 5 * 8 * 32);
  EXPECT_EQ(Find(recs, "instruction", "f2")["flops"], 2 * 4 * (4 * 5) * 4 * 16 * 32);
  // log2 is floored (XLA's Log2Floor): 30 -> 4; the elements are the input's.
  EXPECT_EQ(Find(recs, "instruction", "f3")["flops"], 2 * 4 * 4 * 4 * 30);
}

TEST(HloCostXla, CublasGemmCustomCallsCountAsTheirDot) {
  auto recs = Analyze(R"(HloModule m
ENTRY e {
  a = f32[64,128]{1,0} parameter(0)
  b = f32[128,32]{1,0} parameter(1)
  lt = (f32[64,32]{1,0}, s8[4194304]{0}) custom-call(a, b), custom_call_target="__cublas$lt$matmul", backend_config={"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}
  x = f32[8,64,128]{2,1,0} parameter(2)
  y = f32[8,128,16]{2,1,0} parameter(3)
  ROOT g = f32[8,64,16]{2,1,0} custom-call(x, y), custom_call_target="__cublas$gemm", backend_config="{\"alpha_real\":1,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"2\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[\"0\"],\"rhs_batch_dimensions\":[\"0\"]}}"
})");
  const Json& lt = Find(recs, "instruction", "lt");
  EXPECT_EQ(lt["flops"], 2 * 64 * 32 * 128);
  EXPECT_EQ(lt["cost_model"], "dot");
  EXPECT_EQ(lt["custom_call_target"], "__cublas$lt$matmul");
  EXPECT_EQ(Find(recs, "instruction", "g")["flops"], 2 * 8 * 64 * 16 * 128);
  EXPECT_EQ(Find(recs, "module")["unmodelled_custom_calls"], Json::object());
}

TEST(HloCostXla, CudnnConvolutionCustomCallsCountAsTheConvolution) {
  auto recs = Analyze(R"(HloModule m
ENTRY e {
  x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  w = f32[3,3,4,16]{3,2,1,0} parameter(1)
  conv = f32[1,8,8,16]{3,2,1,0} convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  fwd = (f32[1,8,8,16]{3,2,1,0}, u8[256]{0}) custom-call(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward"
  dy = f32[1,8,8,16]{3,2,1,0} parameter(2)
  bwd = (f32[1,8,8,4]{3,2,1,0}, u8[0]{0}) custom-call(dy, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01oi->b01f, custom_call_target="__cudnn$convBackwardInput"
  dw = (f32[3,3,4,16]{3,2,1,0}, u8[0]{0}) custom-call(x, dy), window={size=8x8 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, custom_call_target="__cudnn$convBackwardFilter"
  ROOT t = (f32[1,8,8,16]{3,2,1,0}, f32[1,8,8,4]{3,2,1,0}, f32[3,3,4,16]{3,2,1,0}) tuple(fwd, bwd, dw)
})");
  // 2 x in_features x out_features x batch x valid (output, kernel) pairs: 8 x 3 - 2 per spatial dim.
  const int64_t fwd_flops = 2LL * 4 * 16 * 1 * 22 * 22;
  EXPECT_EQ(Find(recs, "instruction", "conv")["flops"], fwd_flops);
  const Json& fwd = Find(recs, "instruction", "fwd");
  EXPECT_EQ(fwd["flops"], fwd_flops);
  EXPECT_EQ(fwd["cost_model"], "convolution");
  // Output bytes: the result only, not the scratch buffer.
  EXPECT_EQ(fwd["bytes_accessed"], 4 * (8 * 8 * 4 + 3 * 3 * 4 * 16 + 8 * 8 * 16));
  // Backward input: operands (dy, w), result dx; the same rule with the custom-call's own labels.
  EXPECT_EQ(Find(recs, "instruction", "bwd")["flops"], 2LL * 16 * 4 * 1 * 22 * 22);
  // Backward filter: (x, dy) -> dw, the batch as the contracted "feature" (1 / 16 features, 4 as the
  // batch of dw): the forward convolution's multiply-adds again.
  const Json& dw = Find(recs, "instruction", "dw");
  EXPECT_EQ(dw["flops"], fwd_flops);
  EXPECT_EQ(dw["cost_model"], "convolution");
  EXPECT_EQ(Find(recs, "module")["unmodelled_custom_calls"], Json::object());
}

TEST(HloCostXla, ScatterAndGatherBytesAsHloCostAnalysis) {
  auto recs = Analyze(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  operand = f32[10,5]{1,0} parameter(0)
  indices = s32[24,1]{1,0} parameter(1)
  update = f32[24,2,3]{2,1,0} parameter(2)
  sc = f32[10,5]{1,0} scatter(operand, indices, update), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  gi = s32[5,1]{1,0} parameter(3)
  ROOT ga = f32[5,5]{1,0} gather(sc, gi), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}
})");
  const Json& sc = Find(recs, "instruction", "sc");
  EXPECT_EQ(sc["bytes_accessed"], 3 * (24 * 2 * 3 * 4) + 24 * 4);  // 3 x updates + indices
  EXPECT_EQ(sc["flops"], 24 * 2 * 3);                               // updates x the add
  EXPECT_EQ(Find(recs, "instruction", "ga")["bytes_accessed"], 2 * (5 * 5 * 4) + 5 * 4);  // 2 x output + indices
}

TEST(HloCostXla, FusionBytesAreWhatCrossesItsBoundary) {
  auto recs = Analyze(R"(HloModule m
fused_ds {
  p0 = f32[16,32]{1,0} parameter(0)
  p1 = s32[] parameter(1)
  p2 = f32[1,32]{1,0} parameter(2)
  z = s32[] constant(0)
  ds = f32[1,32]{1,0} dynamic-slice(p0, p1, z), dynamic_slice_sizes={1,32}
  ROOT a = f32[1,32]{1,0} add(ds, p2)
}
fused_dus {
  p0 = f32[16,32]{1,0} parameter(0)
  p1 = f32[1,32]{1,0} parameter(1)
  p2 = s32[] parameter(2)
  z = s32[] constant(0)
  n = f32[1,32]{1,0} negate(p1)
  ROOT dus = f32[16,32]{1,0} dynamic-update-slice(p0, n, p2, z)
}
fused_multi {
  p0 = f32[16,32]{1,0} parameter(0)
  p1 = f32[1,32]{1,0} parameter(1)
  p2 = s32[] parameter(2)
  z = s32[] constant(0)
  dus = f32[16,32]{1,0} dynamic-update-slice(p0, p1, p2, z)
  e = f32[1,32]{1,0} exponential(p1)
  ROOT t = (f32[16,32]{1,0}, f32[1,32]{1,0}) tuple(dus, e)
}
fused_shared {
  p0 = f32[8]{0} parameter(0)
  b = f32[4,8]{1,0} broadcast(p0), dimensions={1}
  m = f32[8]{0} multiply(p0, p0)
  mb = f32[4,8]{1,0} broadcast(m), dimensions={1}
  c = f32[4,8]{1,0} constant({{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8}})
  s = f32[4,8]{1,0} add(b, mb)
  ROOT r = f32[4,8]{1,0} add(s, c)
}
inner {
  q = f32[100]{0} parameter(0)
  ROOT n = f32[100]{0} negate(q)
}
fused_nested {
  p0 = f32[100]{0} parameter(0)
  f = f32[100]{0} fusion(p0), kind=kLoop, calls=inner
  ROOT s = f32[10]{0} slice(f), slice={[0:10]}
}
ENTRY e {
  xs = f32[16,32]{1,0} parameter(0)
  i = s32[] parameter(1)
  row = f32[1,32]{1,0} parameter(2)
  v = f32[8]{0} parameter(3)
  w = f32[100]{0} parameter(4)
  f_ds = f32[1,32]{1,0} fusion(xs, i, row), kind=kLoop, calls=fused_ds
  f_dus = f32[16,32]{1,0} fusion(xs, row, i), kind=kLoop, calls=fused_dus
  f_multi = (f32[16,32]{1,0}, f32[1,32]{1,0}) fusion(xs, row, i), kind=kLoop, calls=fused_multi
  f_shared = f32[4,8]{1,0} fusion(v), kind=kLoop, calls=fused_shared
  f_nested = f32[10]{0} fusion(w), kind=kLoop, calls=fused_nested
  j = s32[] parameter(5)
  ds = f32[1,32]{1,0} dynamic-slice(xs, i, j), dynamic_slice_sizes={1,32}
  ROOT dus = f32[16,32]{1,0} dynamic-update-slice(xs, row, i, j)
})");
  // Read through a dynamic-slice: only the slice (128) of xs; the index (4) and row (128) whole; the
  // output (128). The fusion's operands and output would be 2048 + 4 + 128 + 128.
  EXPECT_EQ(Find(recs, "instruction", "f_ds")["bytes_accessed"], 128 + 4 + 128 + 128);
  // A dynamic-update-slice root writes its update (128) in place: operand 0 is not read.
  EXPECT_EQ(Find(recs, "instruction", "f_dus")["bytes_accessed"], 128 + 0 + 128 + 4);
  // ... also as an element of a tuple root; the other element is written whole.
  EXPECT_EQ(Find(recs, "instruction", "f_multi")["bytes_accessed"], (128 + 128) + 0 + 128 + 4);
  // Users of a parameter share one read, but a broadcast reads it again; a constant of more than one
  // element is read from memory.
  EXPECT_EQ(Find(recs, "instruction", "f_shared")["bytes_accessed"], 128 + (32 + 32) + 128);
  // A nested fusion fed by the parameter, read through a slice: only the slice.
  EXPECT_EQ(Find(recs, "instruction", "f_nested")["bytes_accessed"], 40 + 40);
  // Outside fusions only the first start index counts (operand 1, resp. 2), as HandleDynamicSlice and
  // HandleDynamicUpdateSlice.
  EXPECT_EQ(Find(recs, "instruction", "ds")["bytes_accessed"], 2 * 128 + 4);
  EXPECT_EQ(Find(recs, "instruction", "dus")["bytes_accessed"], 2 * 128 + 4);
}

// A tuple-shaped fused parameter: per leaf, the first get-tuple-element of each index is followed
// (FusionProcessOperandBytesRead), so a second one of the same index, read whole, does not count; a leaf
// without one counts what the tuple's users read.
TEST(HloCostXla, ATupleFusedParameterIsReadThroughTheFirstGetTupleElementOfEachIndex) {
  auto recs = Analyze(R"(HloModule m
fused {
  p = (f32[100]{0}, f32[10]{0}) parameter(0)
  a = f32[100]{0} get-tuple-element(p), index=0
  s = f32[10]{0} slice(a), slice={[0:10]}
  b = f32[100]{0} get-tuple-element(p), index=0
  nb = f32[100]{0} negate(b)
  s2 = f32[10]{0} slice(nb), slice={[10:20]}
  c = f32[10]{0} get-tuple-element(p), index=1
  m = f32[10]{0} multiply(s2, c)
  ROOT r = f32[10]{0} add(s, m)
}
ENTRY e {
  x = f32[100]{0} parameter(0)
  y = f32[10]{0} parameter(1)
  t = (f32[100]{0}, f32[10]{0}) tuple(x, y)
  ROOT f = f32[10]{0} fusion(t), kind=kLoop, calls=fused
})");
  // Output 40; leaf {0} through `a` (its slice: 40, not `b`'s whole 400); leaf {1} through `c` (40).
  EXPECT_EQ(Find(recs, "instruction", "f")["bytes_accessed"], 40 + 40 + 40);
}

TEST(HloCostXla, CustomFusionOfAGatherOrScatterCostsWhatItDoes) {
  auto recs = Analyze(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
scatter_body {
  p0 = f32[10,5]{1,0} parameter(0)
  p1 = s32[24,1]{1,0} parameter(1)
  p2 = f32[24,5]{1,0} parameter(2)
  n = f32[24,5]{1,0} negate(p2)
  ROOT sc = f32[10,5]{1,0} scatter(p0, p1, n), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
gather_body {
  p0 = f32[64,8]{1,0} parameter(0)
  p1 = s32[10,1]{1,0} parameter(1)
  ROOT g = f32[10,8]{1,0} gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
}
ENTRY e {
  operand = f32[10,5]{1,0} parameter(0)
  indices = s32[24,1]{1,0} parameter(1)
  update = f32[24,5]{1,0} parameter(2)
  cs = f32[10,5]{1,0} fusion(operand, indices, update), kind=kCustom, calls=scatter_body
  table = f32[64,8]{1,0} parameter(3)
  gi = s32[10,1]{1,0} parameter(4)
  ROOT cg = f32[10,8]{1,0} fusion(table, gi), kind=kCustom, calls=gather_body
})");
  // The scatter's figures only: its 120 update elements x the add, 3 x updates + indices; the negate of the
  // body is not counted.
  const Json& cs = Find(recs, "instruction", "cs");
  EXPECT_EQ(cs["flops"], 24 * 5);
  EXPECT_EQ(cs["bytes_accessed"], 3 * (24 * 5 * 4) + 24 * 4);
  const Json& cg = Find(recs, "instruction", "cg");
  EXPECT_EQ(cg["flops"], 0);
  EXPECT_EQ(cg["bytes_accessed"], 2 * (10 * 8 * 4) + 10 * 4);
}

TEST(HloCostXla, WhileTripCountsKnownOrSaidToBeUnknown) {
  auto recs = Analyze(R"(HloModule m
body {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[16]{0} get-tuple-element(p), index=1
  y = f32[16]{0} multiply(x, x)
  ROOT t = (s32[], f32[16]{0}) tuple(j, y)
}
cond {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  init = (s32[], f32[16]{0}) parameter(0)
  known = (s32[], f32[16]{0}) while(init), condition=cond, body=body, backend_config={"known_trip_count":{"n":"10"},"known_init_step":{"init":"0","step":"1"}}
  ROOT unknown = (s32[], f32[16]{0}) while(known), condition=cond, body=body
})");
  const Json& known = Find(recs, "instruction", "known");
  // One iteration, as XLA: body (add 1 + multiply 16) + condition (compare 1).
  EXPECT_EQ(known["flops"], 18);
  EXPECT_EQ(known["trip_count"], 10);
  EXPECT_EQ(known["flops_all_iterations"], 180);
  EXPECT_EQ(Find(recs, "instruction", "unknown")["trip_count"], "unknown trip count");
  EXPECT_EQ(Find(recs, "module")["while_loops_unknown_trip_count"], 1);
}

TEST(HloCostXla, UnmodelledCustomCallsAreListedByTarget) {
  auto recs = Analyze(R"(HloModule m
ENTRY e {
  a = f32[4,4]{1,0} parameter(0)
  lu = (f32[4,4]{1,0}, s32[4]{0}) custom-call(a), custom_call_target="lapack_sgetrf"
  lu2 = (f32[4,4]{1,0}, s32[4]{0}) custom-call(a), custom_call_target="lapack_sgetrf"
  ROOT tk = (f32[4,2]{1,0}, s32[4,2]{1,0}) custom-call(a), custom_call_target="TopK"
})");
  EXPECT_EQ(Find(recs, "module")["unmodelled_custom_calls"], (Json{{"TopK", 1}, {"lapack_sgetrf", 2}}));
  const Json& lu = Find(recs, "instruction", "lu");
  EXPECT_EQ(lu["cost_model"], "unmodelled");
  EXPECT_EQ(lu["flops"], 0);
  EXPECT_EQ(lu["bytes_accessed"], 0);  // unknown, as XLA (-1 there), not a guess from the shapes
}

}  // namespace
}  // namespace falcon::plugins

// FLOP, transcendental and byte estimates of HLO instructions following the conventions of XLA's
// HloCostAnalysis (documented rule by rule in docs/plugins.md, "hlo-stats"). One CostModel is
// reused over the modules of a run: Reset() it for each module. Not thread-safe (memoizes
// per-computation costs).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "plugins/hlo_stats/hlo_parser.h"

namespace falcon::plugins::hlo {

struct Cost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_accessed = 0;
  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    transcendentals += o.transcendentals;
    bytes_accessed += o.bytes_accessed;
    return *this;
  }
};

// What the statistics need to know of an opcode, computed once per distinct opcode string.
struct OpInfo {
  enum class Flops : uint8_t {
    kNone,
    kTranscendental,
    kElementwise,
    kDot,
    kConvolution,
    kReduce,
    kReduceWindow,
    kSelectAndScatter,
    kMap,
    kScatter,
    kSort,
    kAllReduce,
    kFusion,
    kCall,
    kWhile,
    kConditional,
    kFft,
    kCustomCall,
    kGather
  };
  enum class Bytes : uint8_t {
    kDefault,
    kZero,
    kTuple,
    kSlice,
    kDynamicSlice,
    kDynamicUpdateSlice,
    kGather,
    kScatter
  };
  std::string name;
  Flops flops = Flops::kNone;
  Bytes bytes = Bytes::kDefault;
  std::string_view collective;  // normalized collective kind, "" when not a collective
  bool is_fusion = false, is_parameter = false, is_async_start = false;
};

// What the cost model makes of a custom-call, by its target (XLA's GpuHloCostAnalysis): cuBLAS gemms
// count as the dot they compute, cuDNN convolutions as the convolution; any other target is not modelled
// (0 FLOPs and 0 bytes here; XLA's HloCostAnalysis reports -1 for both) and is listed in the module's
// unmodelled_custom_calls.
enum class CustomCallKind : uint8_t { kGemm, kConvolution, kUnmodelled };
CustomCallKind ClassifyCustomCall(std::string_view target);
// The custom_call_target of an instruction without its quotes ("" when it has none).
std::string_view CustomCallTarget(const Instruction& ins);
// backend_config={... "known_trip_count":{"n":"10"} ...} of a while loop (XLA's WhileLoopBackendConfig);
// -1 when the loop has none (the trip count is unknown).
int64_t KnownTripCount(const Instruction& ins);

// Collective opcodes, normalized: "all-reduce-start" -> "all-reduce"; "" when not a collective (the
// *-done halves return "").
std::string_view CollectiveKind(std::string_view opcode);

// absl's hash of a std::string_view (Debian's absl::string_view is a distinct type, so absl::Hash
// would fall back to std::hash, which is slower).
struct ViewHash {
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>()(absl::string_view(s.data(), s.size()));
  }
};

class CostModel {
 public:
  // Indexes `module` (which must outlive the use of the model until the next Reset).
  void Reset(const Module& module);

  // The cost of one instruction (index into Module::instructions, of computation `computation`),
  // including the computations it calls (fusion bodies, reducers, while bodies, ...) as
  // HloCostAnalysis does.
  Cost InstructionCost(int computation, uint32_t instruction);
  // The sum over the computation's instructions (each with its called computations).
  Cost ComputationCost(int computation);
  // The whole module: the cost of its entry computation.
  Cost ModuleCost();

  // Index of a computation by name, -1 if unknown.
  int FindComputation(std::string_view name) const;
  // The computation called `which`-th by an instruction, -1 when there is none or it is unknown.
  int CalledComputation(uint32_t instruction, size_t which) const;
  // The shape (node in Module::shapes) of operand i of an instruction, -1 if it cannot be resolved.
  int64_t OperandShape(uint32_t instruction, size_t i) const;
  bool IsFusionBody(int computation) const { return fusion_bodies_[computation]; }
  // The opcode facts of an instruction.
  const OpInfo& Op(uint32_t instruction) const { return infos_[op_ids_[instruction]]; }
  uint32_t OpId(uint32_t instruction) const { return op_ids_[instruction]; }
  const OpInfo& OpById(uint32_t id) const { return infos_[id]; }
  size_t NumOpIds() const { return infos_.size(); }

 private:
  uint32_t Classify(std::string_view opcode);
  Cost ComputeInstruction(int c, uint32_t g);
  Cost CalledCost(uint32_t g, size_t which);
  // 2 x the multiply-adds of a convolution (or convolution custom-call) with these operand and result
  // shapes, as HloCostAnalysis::GetConvolutionFlops.
  double ConvolutionFlops(const Instruction& ins, int64_t lhs, int64_t rhs, int64_t out) const;
  // Bytes accessed by a fusion instruction whose fused computation is `body`, as HandleFusion: its
  // outputs (a dynamic-update-slice root writes only its update), the large constants of the body,
  // and what each fused parameter's users read of it (FusionParameterReadBytes). Memoized per body.
  double FusionBytes(uint32_t fusion, int body);
  // The users of each instruction of computation c, within c, each listed once, in instruction order.
  struct Users {
    uint32_t begin = 0;
    std::vector<std::vector<uint32_t>> of;  // of[g - begin]
  };
  Users UsersIn(int c) const;
  // HloCostAnalysis::FusionParameterReadBytes of instruction `hlo` (a fused parameter or a
  // get-tuple-element of one), whose computation's users are `users`.
  double ParameterReadBytes(const Users& users, uint32_t hlo);
  // The `index` of a get-tuple-element (-1 if it has none).
  int64_t TupleIndex(uint32_t g) const;
  // Calls fn with the index of every array leaf of a shape (ShapeUtil::ForEachLeafShape's order).
  void ForEachLeafIndex(uint32_t shape, const std::function<void(const std::vector<int64_t>&)>& fn) const;
  // The defining instruction of operand i of an instruction, -1 if it cannot be resolved.
  int64_t OperandDef(uint32_t instruction, size_t i) const;
  // The size HloCostAnalysis gives a shape: the dense size of an array, the index table (8 bytes per
  // element) of a tuple (ShapeUtil::ByteSizeOf with 8-byte pointers).
  double XlaShapeSize(uint32_t shape) const;

  const Module* m_ = nullptr;
  // Opcode facts, kept over the whole run.
  absl::flat_hash_map<std::string_view, uint32_t, ViewHash>
      op_index_;  // keys view the names in infos_
  std::deque<OpInfo> infos_;
  absl::flat_hash_map<std::string_view, int, ViewHash> comp_index_;
  static constexpr size_t kOpCacheSize = 256;
  uint32_t op_cache_[kOpCacheSize] = {};  // opcode id + 1, 0 = empty
  // Per module.
  absl::flat_hash_map<std::string_view, uint32_t, ViewHash>
      first_def_;  // name -> first instruction defining it (built on demand)
  absl::flat_hash_map<std::string_view, uint32_t, ViewHash>
      local_def_;                 // the same within one large computation
  std::vector<uint32_t> op_ids_;  // per instruction
  std::vector<int64_t>
      resolved_;  // per Module::names entry: operand shape node / called computation
  std::vector<int32_t> resolved_def_;  // per Module::names entry: operand's defining instruction, -1
  std::vector<double> fusion_bytes_;   // per computation: FusionBytes as a fusion body, -1 = not yet
  std::vector<bool> fusion_bodies_;
  std::vector<int> state_;  // 0 = not computed, 1 = in progress (cycle guard), 2 = done
  std::vector<Cost> comp_cost_;
  // Instruction costs computed for ModuleCost, reused by InstructionCost when no cycle was met.
  std::vector<Cost> inst_cost_;
  std::vector<bool> inst_done_;
  bool caching_ = false;
  bool cycle_ = false;
  bool cache_ok_ = false;
};

}  // namespace falcon::plugins::hlo

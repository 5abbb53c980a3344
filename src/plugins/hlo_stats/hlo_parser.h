// A tolerant parser of XLA HLO text (the format of --xla_dump_to *.txt files and of XLA's .hlo test
// files). It keeps what the statistics need and carries everything else through as raw text:
// unknown opcodes and attributes never fail the parse. One file may hold several modules (test
// files split by "// -----"); a malformed module is reported with its line and the others are still
// returned. Thread-compatible.
//
// For speed (hlo-stats reads dumps of hundreds of MB) a parsed Module is flat and refers into the
// module's text: names, opcodes and attribute values are string_views, shapes are nodes in one
// pool, operands and called computations are ranges of one name pool. A Module is reused from one
// module to the next (Clear() keeps its capacity), so parsing allocates nothing per instruction in
// the steady state.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::plugins::hlo {

// An array shape (dtype[dims]{layout}) or a tuple of shapes, as a self-contained value
// (ParseShape).
struct Shape {
  bool is_tuple = false;
  std::string dtype;             // "f32", "bf16", "pred", "token", ... (empty for tuples)
  std::vector<int64_t> dims;     // dynamic dims ("<=N") count as their bound N; "?" as 0
  std::vector<Shape> elements;   // tuple elements
  int64_t ElementCount() const;  // product of dims (1 for scalars); sum over tuple leaves
  int64_t ByteSize() const;      // dense size of all leaves; unknown dtypes count 0 bytes
  std::string ToString() const;  // without layout, e.g. "f32[2,3]" or "(f32[], s32[4])"
};
// Bits per element of an HLO primitive type, 0 when unknown (token, opaque).
int BitsOf(std::string_view dtype);

// One node of a shape in Module::shapes. A tuple's elements follow it in pre-order.
struct ShapeNode {
  bool is_tuple = false;
  std::string_view dtype;   // empty for tuples
  uint32_t dims_begin = 0;  // into Module::dims
  uint32_t dims_count = 0;
  uint32_t children = 0;  // tuple elements (direct)
  uint32_t subtree = 1;   // nodes in this subtree, itself included
  int64_t elements = 0;   // as Shape::ElementCount
  int64_t bytes = 0;      // as Shape::ByteSize
};

// Attributes the statistics use (all others are skipped). Later occurrences of a key win.
enum Attr : int {
  kAttrKind,
  kAttrMetadata,
  kAttrLhsContractingDims,
  kAttrDimLabels,
  kAttrFeatureGroupCount,
  kAttrBatchGroupCount,
  kAttrWindow,
  kAttrCustomCallTarget,
  kAttrBackendConfig,
  kAttrFftLength,
  kAttrIndex,  // get-tuple-element's tuple index
  // Called computations, in the order they are listed in Instruction's called range.
  kAttrCalls,
  kAttrToApply,
  kAttrBody,
  kAttrCondition,
  kAttrTrueComputation,
  kAttrFalseComputation,
  kAttrBranchComputations,
  kAttrSelect,
  kAttrScatter,
  kNumAttrs
};

struct Instruction {
  Instruction() {
  }  // attribute slots stay uninitialized: only present ones (attr_present) are ever set
  std::string_view name;
  std::string_view opcode;
  uint32_t shape = 0;  // root node in Module::shapes
  uint32_t operands_begin = 0,
           operands_count = 0;  // operand instruction names (without '%'), Module::names
  uint32_t called_begin = 0,
           called_count = 0;  // computations named by calls/to_apply/body/..., Module::names
  uint32_t attr_present = 0;  // bit per Attr
  bool is_root = false;
  int line = 0;  // 1-based line in the file
  int parameter_number = -1;  // N of `parameter(N)`, -1 for other opcodes
  // From metadata={...}.
  std::string_view op_name, op_type, source_file;
  int64_t source_line = 0;
  int64_t stack_frame_id = 0;  // newer dumps: resolved into source_file/source_line
  bool Has(Attr a) const { return (attr_present >> a) & 1u; }
  // Raw attribute text, e.g. attr(kAttrLhsContractingDims) = "{1}"; only when Has(a).
  std::string_view attr(Attr a) const { return {attrs_[a].data, attrs_[a].size}; }
  void set_attr(Attr a, std::string_view v) {
    attrs_[a] = {v.data(), v.size()};
    attr_present |= 1u << a;
  }

 private:
  struct RawView {
    const char* data;
    size_t size;
  };
  RawView attrs_[kNumAttrs];
};

struct Computation {
  std::string_view name;
  bool is_entry = false;
  int line = 0;
  uint32_t begin = 0, count = 0;  // its instructions in Module::instructions
  int root = -1;  // the ROOT instruction (index within), else the last; -1 when empty
};

struct Module {
  std::string_view name;
  int line = 0;
  std::vector<Computation> computations;
  std::vector<Instruction> instructions;  // all computations', computation after computation
  std::vector<ShapeNode> shapes;
  std::vector<int64_t> dims;
  std::vector<std::string_view> names;
  std::deque<std::string> owned;  // unescaped metadata strings the views above may point into
  int EntryIndex() const;         // the ENTRY computation, else the last one; -1 when none
  void Clear();                   // empties the module, keeping capacity

  const ShapeNode& shape(uint32_t i) const { return shapes[i]; }
  // The first array leaf of a shape (the shape itself when it is an array or an empty tuple).
  uint32_t FirstArray(uint32_t i) const;
  // Dimension `d` of an array shape; `def` when out of range or a tuple.
  int64_t Dim(uint32_t shape, int64_t d, int64_t def = 1) const;
  // As Shape::ToString, written at `out`, which has room for ShapeStringBound(shape) bytes; returns
  // the end.
  char* WriteShapeString(uint32_t shape, char* out) const;
  size_t ShapeStringBound(uint32_t shape) const;
  Shape ToShape(uint32_t shape) const;
};

// Parses a shape at the start of `text`, advancing it past the shape (and its layout).
absl::StatusOr<Shape> ParseShape(std::string_view& text);

// The number of '\n' in [p, p + n) (SSE2 when available).
int CountNewlines(const char* p, size_t n);

// Parses every module of `text` one at a time, in file order, calling fn(status, module) for each:
// status is OK and `module` the parse, or the error of that module (INVALID_ARGUMENT carrying the
// line, see InputError). A text with no "HloModule" header is parsed as one unnamed module. The
// `size` bytes at `text` are modified in place (comments are blanked out); the module refers into
// them and into `scratch`, which is reused. `first_line` is the line number of text[0] in the file
// (for error and instruction line numbers). Returns the number of newlines in the text.
int ForEachHloModule(char* text, size_t size, Module& scratch,
                     const std::function<void(const absl::Status&, const Module&)>& fn,
                     int first_line = 1);

}  // namespace falcon::plugins::hlo

// A tolerant parser of XLA HLO text (the format of --xla_dump_to *.txt files and of XLA's .hlo test files).
// It keeps what the statistics need and carries everything else through as raw text: unknown opcodes and
// attributes never fail the parse. One file may hold several modules (test files split by "// -----");
// a malformed module is reported with its line and the others are still returned. Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::plugins::hlo {

// An array shape (dtype[dims]{layout}) or a tuple of shapes.
struct Shape {
  bool is_tuple = false;
  std::string dtype;              // "f32", "bf16", "pred", "token", ... (empty for tuples)
  std::vector<int64_t> dims;      // dynamic dims ("<=N") count as their bound N; "?" as 0
  std::vector<Shape> elements;    // tuple elements
  int64_t ElementCount() const;   // product of dims (1 for scalars); sum over tuple leaves
  int64_t ByteSize() const;       // dense size of all leaves; unknown dtypes count 0 bytes
  std::string ToString() const;   // without layout, e.g. "f32[2,3]" or "(f32[], s32[4])"
};
// Bits per element of an HLO primitive type, 0 when unknown (token, opaque).
int BitsOf(std::string_view dtype);

struct Instruction {
  std::string name;
  std::string opcode;
  Shape shape;
  std::vector<std::string> operands;      // operand instruction names (without '%')
  std::map<std::string, std::string> attrs;  // raw attribute text, e.g. attrs["lhs_contracting_dims"]="{1}"
  std::string literal;                    // the text inside the parentheses for constant/parameter/...
  bool is_root = false;
  int line = 0;                           // 1-based line in the file
  // From metadata={...}.
  std::string op_name, op_type, source_file;
  int64_t source_line = 0;
  int64_t stack_frame_id = 0;             // newer dumps: resolved into source_file/source_line
  std::vector<std::string> called;        // computations named by calls/to_apply/body/condition/branches
};

struct Computation {
  std::string name;
  bool is_entry = false;
  int line = 0;
  std::vector<Instruction> instructions;
  int RootIndex() const;  // the ROOT instruction, else the last one; -1 when empty
};

struct Module {
  std::string name;
  int line = 0;
  std::vector<Computation> computations;
  int EntryIndex() const;  // the ENTRY computation, else the last one; -1 when none
};

// Parses a shape at the start of `text`, advancing it past the shape (and its layout).
absl::StatusOr<Shape> ParseShape(std::string_view& text);

// Parses every module of a file. Each element is a module or the error of one module (INVALID_ARGUMENT
// carrying the line, see InputError). A file with no "HloModule" header is parsed as one unnamed module.
std::vector<absl::StatusOr<Module>> ParseHloText(std::string_view text);
// The same, one module at a time (memory holds one parsed module), in file order.
// `first_line` is the line number of text[0] in the file (for error and instruction line numbers).
void ForEachHloModule(std::string_view text, const std::function<void(absl::StatusOr<Module>)>& fn,
                      int first_line = 1);

}  // namespace falcon::plugins::hlo

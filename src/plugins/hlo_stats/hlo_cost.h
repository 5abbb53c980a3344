// FLOP, transcendental and byte estimates of HLO instructions following the conventions of XLA's
// HloCostAnalysis (documented rule by rule in docs/plugins.md, "hlo-stats"). Construct once per module;
// not thread-safe (memoizes per-computation costs).
#pragma once

#include <map>
#include <string>
#include <vector>

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

class CostModel {
 public:
  explicit CostModel(const Module& module);

  // The cost of one instruction, including the computations it calls (fusion bodies, reducers, while
  // bodies, ...) as HloCostAnalysis does.
  Cost InstructionCost(int computation, int instruction);
  // The sum over the computation's instructions (each with its called computations).
  Cost ComputationCost(int computation);
  // The whole module: the cost of its entry computation.
  Cost ModuleCost();

  // Index of a computation by name, -1 if unknown.
  int FindComputation(const std::string& name) const;
  // The shape of operand i of an instruction, nullptr if it cannot be resolved.
  const Shape* OperandShape(int computation, const Instruction& ins, size_t i) const;
  // Names of the computations that are fusion bodies (called by fusion instructions).
  bool IsFusionBody(int computation) const { return fusion_bodies_[computation]; }

 private:
  Cost ComputeInstruction(int c, const Instruction& ins);
  Cost CalledCost(const Instruction& ins, size_t which);

  const Module& m_;
  std::map<std::string, int> comp_index_;
  std::vector<std::map<std::string, int>> instr_index_;  // per computation: name -> index
  std::map<std::string, const Shape*> module_shapes_;     // name -> shape, first definition wins
  std::vector<bool> fusion_bodies_;
  std::vector<int> state_;  // 0 = not computed, 1 = in progress (cycle guard), 2 = done
  std::vector<Cost> comp_cost_;
};

// Collective opcodes, normalized: "all-reduce-start" -> "all-reduce"; "" when not a collective (the
// *-done halves return "").
std::string CollectiveKind(const std::string& opcode);

}  // namespace falcon::plugins::hlo

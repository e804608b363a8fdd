// The one check both neuron process groups run before a collective touches
// data: every rank states what it is about to do (a StepDescriptor), every
// rank sees every rank's statement, and all of them raise the same error when
// the statements differ or when some rank refused its arguments. The
// single-host group exchanges the descriptors through its shared-memory slots,
// the multi-host group through one small Gloo all_gather; the comparison and
// the messages are these, so the same mistake reads the same on either.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <optional>
#include <string>
#include <vector>

#include "distributed/ShmTransport.h"

namespace torch_neuronx::distributed {

// StepDescriptor::count of a rank that refused its arguments: its numel is
// the length of the reason it sends instead of data.
constexpr int64_t kAbandoned = -1;

// The user-facing name of a collective ("all_reduce", ...) and of a ReduceOp ("SUM", ...), for messages.
const char* collectiveName(c10d::OpType op);
const char* reduceOpName(int op);
// "all_reduce of 10 Float elements with SUM", ...
std::string describe(const StepDescriptor& d);

// The error every rank raises for these descriptors (all[r] is rank r's;
// reasons[r] the text of an abandoned one), or nothing when they agree.
// `mine` is this rank's: a rank that abandoned the step already raised.
std::optional<std::string> disagreement(const StepDescriptor& mine, const std::vector<StepDescriptor>& all,
                                        const std::vector<std::string>& reasons);

}  // namespace torch_neuronx::distributed

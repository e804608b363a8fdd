#include "aten/python/NkiBindings.h"

#include <ATen/Tensor.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "nki_runtime/Executor.h"
#include "nki_runtime/Parallel.h"
#include "nki_runtime/Verifier.h"
#include "runtime/HostAccess.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace {

using nki::Access;

// Large instructions run on the device's threads, as the aten kernels do (and yield them under load).
[[maybe_unused]] const bool kExecutorThreadsLent = (nki::setParallelFor(&parallelRows), true);

Access toAccess(const py::tuple& t) {
  // (tensor, offset, sizes, strides)
  Access access;
  access.tensor = t[0].cast<int32_t>();
  access.offset = t[1].cast<int64_t>();
  const auto sizes = t[2].cast<std::vector<int64_t>>();
  const auto strides = t[3].cast<std::vector<int64_t>>();
  if (sizes.size() != strides.size() || sizes.size() > static_cast<std::size_t>(nki::kMaxAxes)) {
    throw std::invalid_argument("nki: a view has " + std::to_string(sizes.size()) + " axes; at most " +
                                std::to_string(nki::kMaxAxes));
  }
  access.rank = static_cast<int32_t>(sizes.size());
  for (std::size_t a = 0; a < sizes.size(); ++a) {
    access.sizes[a] = sizes[a];
    access.strides[a] = strides[a];
  }
  return access;
}

// (input, value) or, for an integer immediate, (input, value, the integer).
nki::Operand toOperand(const py::tuple& t) {
  nki::Operand operand{t[0].cast<int32_t>(), t[1].cast<float>()};
  if (t.size() > 2 && !t[2].is_none()) {
    operand.integral = true;
    operand.bits = t[2].cast<int64_t>();
  }
  return operand;
}

// The instruction tuples torch_neuronx/nki/program.py writes, field by field.
nki::Instruction toInstruction(const py::dict& d) {
  nki::Instruction in;
  in.opcode = static_cast<nki::Opcode>(d["opcode"].cast<int>());
  in.engine = static_cast<nki::Engine>(d["engine"].cast<int>());
  in.dst = toAccess(d["dst"].cast<py::tuple>());
  for (const auto& input : d["inputs"].cast<py::list>()) in.inputs.push_back(toAccess(input.cast<py::tuple>()));
  in.op0 = static_cast<nki::AluOp>(d["op0"].cast<int>());
  in.op1 = static_cast<nki::AluOp>(d["op1"].cast<int>());
  in.operand0 = toOperand(d["operand0"].cast<py::tuple>());
  in.operand1 = toOperand(d["operand1"].cast<py::tuple>());
  in.operand2 = toOperand(d["operand2"].cast<py::tuple>());
  in.reverse0 = d["reverse0"].cast<bool>();
  in.reverse1 = d["reverse1"].cast<bool>();
  in.function = static_cast<nki::Function>(d["function"].cast<int>());
  in.reduce_axes = d["reduce_axes"].cast<int32_t>();
  in.negate = d["negate"].cast<bool>();
  in.accumulate = d["accumulate"].cast<bool>();
  in.coefficients = d["coefficients"].cast<std::vector<float>>();
  if (d.contains("integers")) in.integers = d["integers"].cast<std::vector<int64_t>>();
  in.line = d["line"].cast<int32_t>();
  in.grid_instance = d["grid_instance"].cast<int32_t>();
  in.loops = d["loops"].cast<int32_t>();
  if (d.contains("indirect")) {
    in.indirect = d["indirect"].cast<bool>();
    in.indirect_dim = d["indirect_dim"].cast<int32_t>();
    in.skip_out_of_bounds = d["skip_oob"].cast<bool>();
    if (d.contains("indirect_dst")) in.indirect_destination = d["indirect_dst"].cast<bool>();
  }
  if (d.contains("dynamic")) {
    for (const auto& item : d["dynamic"].cast<py::list>()) {
      const auto pair = item.cast<py::tuple>();  // (view: -1 dst or input k, the register's view)
      in.dynamic_offsets.push_back({pair[0].cast<int32_t>(), toAccess(pair[1].cast<py::tuple>())});
    }
  }
  return in;
}

const nki::CoreLimits& limitsOf(int version) {
  switch (version) {
    case 2:
      return nki::kNeuronCoreV2;
    case 3:
      return nki::kNeuronCoreV3;
    case 4:
      return nki::kNeuronCoreV4;
  }
  throw std::invalid_argument("nki: no NeuronCore-v" + std::to_string(version) + " (2: trn1, 3: trn2, 4: trn3)");
}

std::shared_ptr<nki::Executor> build(const std::string& kernel, const std::string& file, const py::list& tensors,
                                     const py::list& instructions, const py::list& loop_nests, int arguments) {
  nki::Program program;
  program.kernel = kernel;
  program.file = file;
  program.arguments = arguments;
  for (const auto& item : tensors) {
    const auto t = item.cast<py::tuple>();  // (name, memory, dtype, shape, argument[, blocks, alias_of, staging])
    nki::TensorInfo info;
    info.name = t[0].cast<std::string>();
    info.memory = static_cast<nki::Memory>(t[1].cast<int>());
    info.dtype = static_cast<nki::Dtype>(t[2].cast<int>());
    info.shape = t[3].cast<std::vector<int64_t>>();
    info.argument = t[4].cast<int32_t>();
    if (t.size() > 5) info.blocks = std::max<int64_t>(1, t[5].cast<int64_t>());
    if (t.size() > 6) info.alias_of = t[6].cast<int32_t>();
    if (t.size() > 7) info.staging = t[7].cast<bool>();
    program.tensors.push_back(std::move(info));
  }
  for (const auto& item : instructions) program.instructions.push_back(toInstruction(item.cast<py::dict>()));
  for (const auto& nest : loop_nests) {
    std::vector<nki::LoopIteration> levels;
    for (const auto& level : nest.cast<py::list>()) {
      const auto pair = level.cast<py::tuple>();
      levels.push_back({pair[0].cast<int32_t>(), pair[1].cast<int32_t>()});
    }
    program.loop_nests.push_back(std::move(levels));
  }
  return std::make_shared<nki::Executor>(std::move(program));
}

void* hostAddress(const at::Tensor& tensor) {
  void* data = const_cast<void*>(tensor.const_data_ptr());
  if (tensor.device().is_cpu()) return data;
  if (tensor.device().is_privateuseone()) return nrt::hostView(tensor.device().index(), data, tensor.nbytes());
  throw std::invalid_argument("nki: a kernel runs on neuron or CPU tensors, not on " + tensor.device().str());
}

// `printer` (or None): called as printer(label, shape, bytes) for each nl.device_print the run reaches.
// `communicator` (or None): called as communicator(coefficients, op, dtype, bytes) -> bytes for each
// collective (nki_runtime/Collectives.h; op and dtype as codes() numbers them).
void run(const nki::Executor& executor, const std::vector<at::Tensor>& buffers, uint64_t seed,
         const py::object& printer, const py::object& communicator) {
  std::vector<void*> addresses;
  for (const at::Tensor& buffer : buffers) {
    if (!buffer.is_contiguous()) throw std::invalid_argument("nki: HBM buffers must be contiguous");
    addresses.push_back(hostAddress(buffer));
  }
  nki::Printer print;
  if (!printer.is_none()) {
    print = [&printer](int32_t label, const std::vector<int64_t>& shape, const std::vector<char>& bytes) {
      py::gil_scoped_acquire hold;
      printer(label, shape, py::bytes(bytes.data(), bytes.size()));
    };
  }
  nki::Communicator exchange;
  if (!communicator.is_none()) {
    exchange = [&communicator](const std::vector<float>& coefficients, nki::AluOp op, nki::Dtype dtype,
                               const std::vector<char>& sent) {
      py::gil_scoped_acquire hold;
      const py::bytes received = communicator(coefficients, static_cast<int>(op), static_cast<int>(dtype),
                                              py::bytes(sent.data(), sent.size()));
      const std::string_view view = received;
      return std::vector<char>(view.begin(), view.end());
    };
  }
  py::gil_scoped_release release;
  executor.run(addresses, seed, print ? &print : nullptr, exchange ? &exchange : nullptr);
}

py::dict codes() {
  py::dict all;
  const auto names = [](std::initializer_list<const char*> list) {
    py::dict d;
    int i = 0;
    for (const char* name : list) d[name] = i++;
    return d;
  };
  all["memory"] = names({"hbm", "sbuf", "psum"});
  all["engine"] = names({"dma", "tensor", "vector", "scalar", "gpsimd"});
  all["dtype"] = names({"float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2", "int8",
                        "int16", "int32", "uint8", "uint16", "uint32", "bool", "float8_e5m2_x4", "float8_e4m3fn_x4",
                        "float4_e2m1fn_x4", "int64"});
  all["opcode"] = names({"dma_copy", "nc_matmul", "nc_transpose", "tensor_tensor", "tensor_scalar", "activation",
                         "tensor_reduce", "tensor_copy", "memset", "iota", "tensor_tensor_scan", "select",
                         "scalar_tensor_tensor", "max8", "nc_find_index8", "bn_stats", "bn_aggr",
                         "tensor_partition_reduce", "affine_select", "nc_match_replace8",
                         "range_select", "nc_stream_shuffle", "nonzero_with_count", "nc_n_gather", "rng",
                         "rand2", "dropout", "rand_set_state", "rand_get_state", "set_rng_seed",
                         "device_print", "sequence_bounds", "local_gather", "quantize_mx_scales", "quantize_mx",
                         "nc_matmul_mx", "dma_compute", "loop_begin", "loop_end", "scalar_alu", "branch",
                         "collective", "column_gather", "column_scatter"});
  all["alu"] = names({"bypass", "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "mod",
                      "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
                      "logical_or", "logical_xor", "abs_max", "floor_mod", "abs_min", "bitwise_and", "bitwise_or",
                      "bitwise_xor", "left_shift", "right_shift"});
  all["function"] = names({"copy", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu",
                           "sqrt", "rsqrt", "reciprocal", "abs", "negative", "square", "sin", "cos", "erf",
                           "softplus", "sign", "floor", "ceil", "arctan", "mish", "gelu_apprx_sigmoid",
                           "prelu", "gelu_dx", "gelu_apprx_sigmoid_dx", "silu_dx", "erf_dx", "tan", "trunc"});
  return all;
}

}  // namespace

void bindNki(py::module& m) {
  py::class_<nki::Executor, std::shared_ptr<nki::Executor>>(m, "_NkiProgram")
      .def("verify",
           [](const nki::Executor& self, int version) {
             std::vector<py::tuple> found;
             for (const auto& v : nki::verify(self.program(), limitsOf(version))) {
               found.push_back(py::make_tuple(v.instruction, v.line, v.message));
             }
             return found;
           })
      .def("run", &run, py::arg("buffers"), py::arg("seed") = 0, py::arg("printer") = py::none(),
           py::arg("communicator") = py::none())
      .def_property_readonly("uses_random", &nki::Executor::usesRandom)
      .def_property_readonly("arena_bytes", &nki::Executor::arenaBytes)
      .def_property_readonly("instructions", [](const nki::Executor& self) {
        return self.program().instructions.size();
      });
  m.def("_nki_build", &build);
  m.def("_nki_codes", &codes);
  m.def("_nki_sbuf_partition_bytes", [](int version) { return limitsOf(version).sbuf_partition_bytes; });
}

}  // namespace torch_neuronx

// The creator torch_neuronx.distributed registers with
// torch.distributed.Backend.register_backend: it returns the C++ backend as a
// subclass of torch's c10d Backend type, which torch wraps in a ProcessGroup.
#include "aten/python/DistributedBindings.h"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/MultiHostBackend.h"
#include "distributed/NeuronBackend.h"

namespace py = pybind11;

namespace torch_neuronx {

void bindDistributed(py::module& m) {
  py::object backend_type;
  try {
    backend_type = py::module::import("torch._C._distributed_c10d").attr("Backend");
  } catch (const py::error_already_set&) {
    return;  // torch without distributed: nothing to register
  }
  using distributed::NeuronBackend;
  // The holder is the intrusive pointer c10d objects carry, as torch's own backends use.
  py::class_<NeuronBackend, c10::intrusive_ptr<NeuronBackend>>(m, "_NeuronBackend", backend_type)
      .def(py::init([](c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
             // The store is a c10d object with an intrusive count: take a reference to it.
             auto owned = c10::intrusive_ptr<c10d::Store>::reclaim_copy(&store);
             return c10::make_intrusive<NeuronBackend>(owned, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           // Rendezvous blocks on the store and on the other ranks.
           py::call_guard<py::gil_scoped_release>())
      // torch's new_group calls this on ranks left out of the new group when
      // the parent supports splitting (NCCL's ncclCommSplit needs every rank of
      // the parent). Members here rendezvous through the new group's own store
      // prefix, so the others have nothing to do.
      .def("perform_nocolor_split", [](NeuronBackend&, const py::object& /*device*/) {}, py::arg("device"));

  // Ranks on several hosts: torch_neuronx.distributed builds the groups it
  // combines (a _NeuronBackend per host, Gloo between hosts) and passes them in.
  using distributed::MultiHostBackend;
  py::class_<MultiHostBackend, c10::intrusive_ptr<MultiHostBackend>>(m, "_NeuronMultiHostBackend", backend_type)
      .def(py::init([](int rank, int size, std::vector<int> host_of_rank, c10::intrusive_ptr<c10d::Backend> local,
                       const py::object& leaders, c10::intrusive_ptr<c10d::Backend> all,
                       std::chrono::milliseconds timeout) {
             MultiHostBackend::Groups groups{std::move(local), nullptr, std::move(all)};
             if (!leaders.is_none()) groups.leaders = leaders.cast<c10::intrusive_ptr<c10d::Backend>>();
             return c10::make_intrusive<MultiHostBackend>(rank, size, std::move(host_of_rank), std::move(groups),
                                                          timeout);
           }),
           py::arg("rank"), py::arg("size"), py::arg("host_of_rank"), py::arg("local"), py::arg("leaders"),
           py::arg("all"), py::arg("timeout"));
}

}  // namespace torch_neuronx

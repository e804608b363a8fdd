#include "CoreClaim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace nrt {
namespace {

constexpr int kPhysicalCoresPerChipSlot = 8;  // the most of any platform

std::string lockDir() {
  const char* dir = std::getenv("TORCH_NEURONX_CORE_LOCK_DIR");
  return (dir && *dir) ? dir : "/tmp/torch-neuronx-cores";
}

std::string describeProcess(const std::string& pid) {
  std::ifstream cmdline("/proc/" + pid + "/cmdline");
  std::string command;
  std::getline(cmdline, command, '\0');
  return command.empty() ? "process " + pid : "process " + pid + " (" + command + ")";
}

// Returns the locked file's descriptor; the lock lasts while it is open.
int claimOne(const std::string& dir, int physical_id, int logical_id) {
  const std::string path = dir + "/core-" + std::to_string(physical_id) + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw std::runtime_error("cannot claim NeuronCore " + std::to_string(logical_id) + ": cannot open " + path + ": " +
                             std::strerror(errno) + " (set TORCH_NEURONX_CORE_LOCK_DIR to a writable folder)");
  }
  (void)::fchmod(fd, 0666);  // any user's process may claim it next
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t got = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    const std::string pid = got > 0 ? std::string(holder, static_cast<std::size_t>(got)) : "?";
    throw CoreBusy("NeuronCore " + std::to_string(logical_id) + " is in use by " + describeProcess(pid) +
                   ": a NeuronCore belongs to one process at a time. Give each process its own cores "
                   "(torch.neuron.set_device(LOCAL_RANK) in every rank, or NEURON_RT_VISIBLE_CORES per "
                   "process), or set TORCH_NEURONX_SHARE_CORES=1 to share cores between processes");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, pid.data(), pid.size(), 0);
  return fd;
}

bool sharingCores() {
  const char* share = std::getenv("TORCH_NEURONX_SHARE_CORES");
  return share && std::strcmp(share, "1") == 0;
}

}  // namespace

void claimPhysicalCores(int logical_id, int chip, int first, int count) {
  if (sharingCores()) return;
  const std::string dir = lockDir();
  if (::mkdir(dir.c_str(), 0777) == 0) (void)::chmod(dir.c_str(), 01777);  // shared by every user, like /tmp
  std::vector<int> held;
  try {
    for (int i = 0; i < count; ++i) held.push_back(claimOne(dir, chip * kPhysicalCoresPerChipSlot + first + i, logical_id));
  } catch (...) {
    for (int fd : held) ::close(fd);  // all of a logical core, or none of it
    throw;
  }
  // The descriptors stay open: the claim lasts as long as the process.
}

}  // namespace nrt

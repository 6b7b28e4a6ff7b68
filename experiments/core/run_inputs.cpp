#include "experiments/core/run_inputs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "common/mnist.h"
#include "memory_strategies/epoch_data.h"    // transfer_bytes_per_sample
#include "memory_strategies/stream_slots.h"  // check_stream_slots

namespace memstrat {

void check_appendable(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::invalid_argument(std::string(what) + ": cannot open '" + path + "' for writing: " +
                                std::strerror(errno) + " (does the directory exist?)");
  ::close(fd);
}

namespace {

void check_writable(const std::string& path, const char* what) {
  std::ofstream f(path, std::ios::app);
  if (!f)
    throw std::invalid_argument(std::string(what) + ": cannot write '" + path +
                                "' (does the directory exist?)");
}
}  // namespace

HostDataset load_run_data(const RunConfig& c) {
  HostDataset data = load_mnist(resolve_data_dir(c.data));
  truncate_dataset(data, c.train_samples, c.test_samples);
  if (c.batch > data.n_train())
    throw std::invalid_argument("--batch " + std::to_string(c.batch) +
                                " is larger than the training set (" +
                                std::to_string(data.n_train()) + " samples); use --batch <= " +
                                std::to_string(data.n_train()));
  if (c.scenario == Scenario::Stream)
    check_stream_slots(c.prefetch, c.batch, transfer_bytes_per_sample(data.features(), c.transfer));
  return data;
}

void check_outputs(const RunConfig& c) {
  if (!c.json.empty()) check_appendable(c.json, "--json");
  if (!c.trace.empty()) check_writable(c.trace, "--trace");
  if (!c.loss_curve.empty()) check_writable(c.loss_curve, "--loss-curve");
}

}  // namespace memstrat

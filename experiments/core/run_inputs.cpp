#include "experiments/core/run_inputs.h"

#include <stdexcept>
#include <string>

#include "common/mnist.h"
#include "common/run_record.h"  // is_utf8
#include "memory_strategies/epoch_data.h"    // transfer_bytes_per_sample
#include "memory_strategies/stream_slots.h"  // check_stream_slots

namespace memstrat {

HostDataset load_run_data(const RunConfig& c) {
  const std::string dir = resolve_data_dir(c.data);
  if (!is_utf8(dir))  // the record holds the path as JSON text
    throw std::invalid_argument("the data directory '" + dir + "' (--data or " + kDataEnvVar +
                                ") is not valid UTF-8; name it with a UTF-8 path");
  HostDataset data = load_mnist(dir);
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

}  // namespace memstrat

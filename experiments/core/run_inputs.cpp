#include "experiments/core/run_inputs.h"

#include <stdexcept>
#include <string>

#include "common/host_info.h"  // available_memory_bytes
#include "common/mnist.h"
#include "common/run_record.h"  // is_utf8
#include "experiments/core/device_budget.h"  // budget_refusal
#include "memory_strategies/epoch_data.h"    // transfer_bytes_per_sample
#include "memory_strategies/replicated_set.h"
#include "memory_strategies/stream_slots.h"  // check_stream_slots

namespace memstrat {

HostDataset load_run_data(const RunConfig& c, std::ostream* progress) {
  const std::string dir = resolve_data_dir(c.data);
  if (!is_utf8(dir))  // the record holds the path as JSON text
    throw std::invalid_argument("the data directory '" + dir + "' (--data or " + kDataEnvVar +
                                ") is not valid UTF-8; name it with a UTF-8 path");
  HostDataset data = load_mnist(dir);
  truncate_dataset(data, c.train_samples, c.test_samples);
  if (c.replicate > 1) {
    // A strategy the replicated set cannot fit is refused before the set is made.
    if (const std::string why = budget_refusal(c, data.n_train() * c.replicate, data.features());
        !why.empty())
      throw std::invalid_argument(why);
    const std::uint64_t need =
        replicated_host_bytes(data.n_train(), data.features(), c.replicate,
                              transfer_bytes_per_sample(data.features(), c.transfer));
    if (const std::string why = host_memory_refusal(need, available_memory_bytes()); !why.empty())
      throw std::invalid_argument("--replicate " + std::to_string(c.replicate) + " (" +
                                  std::to_string(data.n_train() * c.replicate) + " samples) " + why);
    replicate_training_set(data, c.replicate, c.seed, 0, progress);
  }
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

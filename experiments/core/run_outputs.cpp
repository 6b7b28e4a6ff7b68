#include "experiments/core/run_outputs.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "memory_strategies/epoch_data.h"

namespace memstrat {

namespace {
template <typename T>
void write_binary(const std::string& path, const std::vector<T>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}
}  // namespace

void export_init(const std::string& dir, const Mlp& mlp, const HostDataset& data,
                 const RunConfig& c) {
  std::filesystem::create_directories(dir);
  const std::vector<float> p = mlp.parameters();
  write_binary(dir + "/init_params.f32", p);
  write_binary(dir + "/order_epoch1.i32", EpochWriter(data, strategy_options(c)).order(1));
  nlohmann::json m;
  m["layers"] = mlp.config().layers;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < mlp.layer_count(); ++l)
    layers.push_back({{"weight_offset", mlp.weight_offset(l)}, {"bias_offset", mlp.bias_offset(l)}});
  m["params"] = layers;
  m["param_count"] = p.size();
  m["layout"] = "flat float32 little-endian; per layer W [in x out] row-major, then b [out]";
  m["order"] = "order_epoch1.i32: int32 indices into the training set, the sample order of epoch 1";
  m["normalize"] = "x = float(pixel) / 255.0f";
  m["seed"] = c.seed;
  m["lr"] = c.lr;
  m["momentum"] = c.momentum;
  m["batch"] = c.batch;
  m["scenario"] = to_string(c.scenario);
  m["dataset"] = data.source;
  m["train_samples"] = data.n_train();
  m["test_samples"] = data.n_test();
  std::ofstream(dir + "/manifest.json") << m.dump(2) << "\n";
}

LossCurveWriter::LossCurveWriter(const std::string& path) : out_(path, std::ios::trunc) {
  out_ << "epoch,batch,loss\n";
}

void LossCurveWriter::write_epoch(int epoch, const EpochLoop& trainer) {
  const std::vector<float>& losses = trainer.last_sample_losses();
  for (int b = 0; b < trainer.batches(); ++b) {
    const std::int64_t lo = trainer.batch_begin(b);
    const int rows = trainer.batch_rows(b);
    double s = 0;
    for (std::int64_t i = lo; i < lo + rows; ++i) s += losses[static_cast<std::size_t>(i)];
    char line[96];
    std::snprintf(line, sizeof line, "%d,%d,%.9g\n", epoch, b, s / static_cast<double>(rows));
    out_ << line;
  }
}

}  // namespace memstrat

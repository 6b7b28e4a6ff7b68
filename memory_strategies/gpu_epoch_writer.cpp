#include "memory_strategies/gpu_epoch_writer.h"

#include <cstring>
#include <stdexcept>

#include "common/cuda_check.h"
#include "common/nvtx.h"
#include "memory_strategies/epoch_data.h"  // transfer_bytes_per_sample

namespace memstrat {

std::uint64_t GpuEpochWriter::order_bytes(const BatchGeometry& g) {
  return (static_cast<std::uint64_t>(g.samples) + 1) * sizeof(std::int32_t);
}

std::uint64_t GpuEpochWriter::set_bytes(const BatchGeometry& g, Transfer t) {
  // g is in the transfer format; the set holds one byte a pixel.
  return g.labelled_bytes(g.image_bytes_per_sample / pixel_bytes(t));
}

std::uint64_t GpuEpochWriter::device_bytes(const BatchGeometry& g, Transfer t) {
  return set_bytes(g, t) + order_bytes(g) + g.epoch_bytes();
}

void GpuEpochWriter::attach_order(const HostDataset& data, const StrategyOptions& opt,
                                  cudaStream_t compute) {
  samples_ = data.n_train();
  compute_ = compute;
  const std::size_t n = static_cast<std::size_t>(samples_);
  staging_ = PinnedBuffer<std::int32_t>(n + 1);
  order_dev_ = DeviceBuffer<std::int32_t>(n + 1);
  upload_.allocate(1);
  order_.emplace(samples_, opt.seed);
  // The refresh scenario's augmentation is the shift (EpochWriter::rows_of).
  rows_ = AugmentRows{Augment::Light, opt.seed, 0, 0, data.rows, data.cols, opt.transfer};
}

void GpuEpochWriter::attach(const HostDataset& data, const StrategyOptions& opt,
                            cudaStream_t compute) {
  const std::size_t n = static_cast<std::size_t>(data.n_train());
  set_images_ = DeviceBuffer<std::uint8_t>(data.train_images.size());
  set_labels_ = DeviceBuffer<std::int32_t>(n);
  epoch_images_ =
      DeviceBuffer<std::uint8_t>(transfer_bytes_per_sample(data.features(), opt.transfer) * n);
  epoch_labels_ = DeviceBuffer<std::int32_t>(n);
  images_ = epoch_images_.data();
  labels_ = epoch_labels_.data();
  attach_order(data, opt, compute);
  src_ = GatherSource{set_images_.data(), set_labels_.data(), data.n_train(),
                      static_cast<std::size_t>(data.features())};
  // Set-up: from the pageable data set, once; not in any epoch's figures.
  CUDA_CHECK(cudaMemcpyAsync(set_images_.data(), data.train_images.data(), set_images_.bytes(),
                             cudaMemcpyHostToDevice, compute));
  CUDA_CHECK(cudaMemcpyAsync(set_labels_.data(), data.train_labels.data(), set_labels_.bytes(),
                             cudaMemcpyHostToDevice, compute));
  CUDA_CHECK(cudaStreamSynchronize(compute));
}

void GpuEpochWriter::attach_to(const HostDataset& data, const StrategyOptions& opt,
                               const GatherSource& set, void* images, std::int32_t* labels,
                               cudaStream_t compute) {
  if (set.images == nullptr || set.labels == nullptr || images == nullptr || labels == nullptr)
    throw std::invalid_argument("GpuEpochWriter::attach_to: a null set or epoch");
  if (set.samples != data.n_train() || set.row_bytes != static_cast<std::size_t>(data.features()))
    throw std::invalid_argument("GpuEpochWriter::attach_to: the set is not the uint8 training set");
  images_ = images;
  labels_ = labels;
  attach_order(data, opt, compute);
  src_ = set;
}

void GpuEpochWriter::begin_epoch(int epoch) {
  // The GPU is idle (the trainer drained the last epoch), so the staging copy may be rewritten.
  order_->set_epoch(epoch);
  const std::size_t n = static_cast<std::size_t>(samples_);
  std::memcpy(staging_.data(), order_->order(), n * sizeof(std::int32_t));
  staging_.data()[n] = epoch;
}

void GpuEpochWriter::write() {
  {
    NvtxRange r(Phase::H2D, "h2d order");
    upload_.start(0, compute_);
    CUDA_CHECK(cudaMemcpyAsync(order_dev_.data(), staging_.data(), staging_.bytes(),
                               cudaMemcpyHostToDevice, compute_));
    upload_.stop(0, compute_, staging_.bytes());
  }
  NvtxRange r(Phase::Produce, "augment epoch on gpu");
  AugmentRows a = rows_;
  a.epoch_on_device = order_dev_.data() + samples_;  // the epoch the upload just wrote
  gather_augment(src_, order_dev_.data(), static_cast<int>(samples_), a, images_, labels_,
                 compute_);
}

}  // namespace memstrat

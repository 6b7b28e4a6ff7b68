// launch_forms.h: the forms in which a trainer can launch an epoch's steps (EpochForm), what a
// strategy's data path allows of them (LaunchForms, MemoryStrategy::launch_forms), and sets of
// forms (EpochFormSet: what the registry declares per scenario, which the CLI checks a
// --launch-form against before any device work and `memstrat describe` prints).
//
// The launch form is an axis of its own, orthogonal to the data path: a strategy's data-movement
// cost is its epoch minus resident's epoch at the same form (docs/methodology.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memstrat {

/// How an epoch runs (the record's config.epoch_form).
enum class EpochForm {
  Kernel,        // every step in ONE cooperative kernel launch
  ChunkKernels,  // one cooperative kernel launch per launch group of batches
  Graph,         // the epoch's enqueues captured once as ONE CUDA graph, replayed every epoch
  PerBatch,      // enqueued batch by batch
};
/// "kernel", "kernel-per-chunk", "graph", "per-batch".
std::string_view to_string(EpochForm f);
/// The form named `s`; none for anything else.
std::optional<EpochForm> parse_epoch_form(std::string_view s);
/// Kernel or ChunkKernels: the steps run from the per-step table, one launch per group; only the
/// single-launch step runs several steps in one launch.
constexpr bool is_kernel_form(EpochForm f) {
  return f == EpochForm::Kernel || f == EpochForm::ChunkKernels;
}
/// Every form, from the most launches per epoch to the fewest (the order listings use).
inline constexpr EpochForm kEpochForms[] = {EpochForm::PerBatch, EpochForm::Graph,
                                            EpochForm::ChunkKernels, EpochForm::Kernel};

/// What a strategy's data path allows (MemoryStrategy::launch_forms, asked after attach). Each
/// field carries the contract of the MemoryStrategy method it is named after; per-batch is always
/// allowed (it is the interface's plain life cycle).
struct LaunchForms {
  bool acquire_ahead = false;  // every batch of the epoch acquired before any step: any grouping
  int launch_group = 0;        // its own groups of k batches (0: none)
  bool epoch_capturable = false;
  /// kernel: acquire_ahead; kernel-per-chunk: its own groups, or acquire_ahead (any grouping,
  /// cut by the trainer); graph: epoch_capturable; per-batch: always.
  bool allows(EpochForm f) const;
  friend bool operator==(const LaunchForms& a, const LaunchForms& b) {
    return a.acquire_ahead == b.acquire_ahead && a.launch_group == b.launch_group &&
           a.epoch_capturable == b.epoch_capturable;
  }
};

/// A set of epoch forms.
class EpochFormSet {
 public:
  constexpr EpochFormSet() = default;
  constexpr EpochFormSet(std::initializer_list<EpochForm> forms) {
    for (const EpochForm f : forms) insert(f);
  }
  constexpr void insert(EpochForm f) { bits_ |= bit(f); }
  constexpr bool contains(EpochForm f) const { return (bits_ & bit(f)) != 0; }
  bool empty() const { return bits_ == 0; }
  /// The members in kEpochForms order.
  std::vector<EpochForm> forms() const;
  /// "per-batch, graph" (kEpochForms order); "none" when empty.
  std::string to_string() const;
  friend bool operator==(EpochFormSet a, EpochFormSet b) { return a.bits_ == b.bits_; }

 private:
  static constexpr std::uint8_t bit(EpochForm f) {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(f));
  }
  std::uint8_t bits_ = 0;
};

/// The forms of `f` (per-batch always; kernel-per-chunk where f.launch_group > 0 or acquire_ahead).
EpochFormSet forms_of(const LaunchForms& f);

}  // namespace memstrat

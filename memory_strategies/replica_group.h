// replica_group.h: ReplicaGroup, what the strategy instances of one data-parallel run on several
// GPUs (--gpus N) know of each other: the device of every rank, and the objects they share. The
// data-parallel trainer creates one per run, before the first replica, and passes it to every
// instance through StrategyOptions::group; it outlives them all. A strategy that keeps one copy
// of something for all ranks (peer-fanout: the training set on rank 0's GPU) asks the group for
// it by type: the first caller makes it, every later caller gets the same object. One GPU and
// --emulate-gpus have no group (StrategyOptions::group is null).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <typeindex>
#include <utility>
#include <vector>

namespace memstrat {

class ReplicaGroup {
 public:
  /// `devices[r]`: rank r's GPU.
  explicit ReplicaGroup(std::vector<int> devices) : devices_(std::move(devices)) {}
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  int ranks() const { return static_cast<int>(devices_.size()); }
  int device(int rank) const { return devices_.at(static_cast<std::size_t>(rank)); }

  /// The group's one object of type T: made by `make` the first time it is asked for (from a
  /// strategy's attach, so at set-up), the same object every later time. Safe from any thread; `make`
  /// runs under the group's lock.
  template <typename T>
  std::shared_ptr<T> shared(const std::function<std::shared_ptr<T>()>& make) {
    std::lock_guard<std::mutex> lock(m_);
    std::shared_ptr<void>& slot = objects_[std::type_index(typeid(T))];
    if (!slot) {
      slot = make();
      if (!slot) throw std::logic_error("ReplicaGroup::shared: make returned nothing");
    }
    return std::static_pointer_cast<T>(slot);
  }

 private:
  std::vector<int> devices_;
  std::mutex m_;
  std::map<std::type_index, std::shared_ptr<void>> objects_;
};

}  // namespace memstrat

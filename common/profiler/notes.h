// notes.h: ProfilerNotes, the profiler's list of reasons (why a counter is null, dropped or
// late records, NVTX injection state), written from any thread, each reason listed once.
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace memstrat {

class ProfilerNotes {
 public:
  /// Appends `s` unless the same note is already listed.
  void add(std::string s) {
    std::lock_guard<std::mutex> lk(mu_);
    if (std::find(notes_.begin(), notes_.end(), s) == notes_.end()) notes_.push_back(std::move(s));
  }
  /// The notes in the order they were first added.
  std::vector<std::string> list() const {
    std::lock_guard<std::mutex> lk(mu_);
    return notes_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> notes_;
};

}  // namespace memstrat

#include "memory_strategies/launch_forms.h"

namespace memstrat {

std::string_view to_string(EpochForm f) {
  switch (f) {
    case EpochForm::Kernel:
      return "kernel";
    case EpochForm::ChunkKernels:
      return "kernel-per-chunk";
    case EpochForm::Graph:
      return "graph";
    case EpochForm::PerBatch:
      return "per-batch";
  }
  return "?";
}

std::optional<EpochForm> parse_epoch_form(std::string_view s) {
  for (const EpochForm f : kEpochForms)
    if (to_string(f) == s) return f;
  return std::nullopt;
}

bool LaunchForms::allows(EpochForm f) const {
  switch (f) {
    case EpochForm::Kernel:
      return acquire_ahead;
    case EpochForm::ChunkKernels:
      return launch_group > 0 || acquire_ahead;
    case EpochForm::Graph:
      return epoch_capturable;
    case EpochForm::PerBatch:
      return true;
  }
  return false;
}

std::vector<EpochForm> EpochFormSet::forms() const {
  std::vector<EpochForm> r;
  for (const EpochForm f : kEpochForms)
    if (contains(f)) r.push_back(f);
  return r;
}

std::string EpochFormSet::to_string() const {
  std::string s;
  for (const EpochForm f : forms())
    s += (s.empty() ? "" : ", ") + std::string(memstrat::to_string(f));
  return s.empty() ? "none" : s;
}

EpochFormSet forms_of(const LaunchForms& f) {
  EpochFormSet s;
  for (const EpochForm e : kEpochForms)
    if (f.allows(e)) s.insert(e);
  return s;
}

}  // namespace memstrat

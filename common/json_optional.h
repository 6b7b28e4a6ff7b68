// json_optional.h: an optional value as JSON: the value, or null when it was not measured
// (records write null, never a made-up 0).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>

namespace memstrat {

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace memstrat

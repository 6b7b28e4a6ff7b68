#include "experiments/primitives/record.h"

#include "common/run_record.h"

namespace memstrat {

namespace {
using nlohmann::json;

json text_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json point_json(const SizePoint& p) {
  return json{
      {"bytes", p.bytes},   {"median_us", p.us.median},   {"p25_us", p.us.p25},
      {"p75_us", p.us.p75}, {"min_us", p.us.min},         {"max_us", p.us.max},
      {"gbps", p.gbps},     {"samples_us", p.samples_us}, {"verified_samples", p.verified_samples}};
}

json self_check_json(const PrimitiveOutcome& o) {
  if (o.self_check) {
    const SelfCheck& c = *o.self_check;
    return json{{"bytes", c.bytes},
                {"primitive_median_us", c.primitive_median_us},
                {"plain_median_us", c.plain_median_us},
                {"plain_samples", c.samples},
                {"relative_difference", c.relative_difference},
                {"tolerance", kSelfCheckTolerance},
                {"passed", c.passed},
                {"skipped", nullptr}};
  }
  if (!o.self_check_skipped.empty())
    return json{{"passed", nullptr}, {"skipped", o.self_check_skipped}};
  return nullptr;
}
}  // namespace

json primitive_record(const PrimitiveOutcome& o, const PrimitivesConfig& c, int device,
                      const std::vector<std::string>& argv, const json& env) {
  json rec;
  rec["schema_version"] = kPrimitiveSchemaVersion;
  rec["record"] = "primitive";
  rec["run_id"] = o.run_id;
  rec["started_at"] = o.started_at;
  rec["status"] = o.status;
  rec["error"] = text_or_null(o.error);
  rec["waived_reason"] = text_or_null(o.waived_reason);
  rec["argv"] = argv;
  rec["env"] = env;
  rec["config"] = {{"primitive", o.entry->name}, {"min_bytes", c.min_bytes},
                   {"max_bytes", c.max_bytes},   {"sizes_per_octave", c.sizes_per_octave},
                   {"sizes", c.sizes},           {"warmup", c.warmup},
                   {"samples", c.samples},       {"device", device}};
  rec["primitive"] = {{"name", o.entry->name},
                      {"description", o.entry->description},
                      {"timed_by", to_string(o.timed_by)},
                      {"direction", to_string(o.direction)}};
  rec["results"] = json::array();
  for (const SizePoint& p : o.points) rec["results"].push_back(point_json(p));
  rec["summary"] = nullptr;
  if (o.summary && o.status == "ok") {
    const CurveSummary& s = *o.summary;
    rec["summary"] = {{"peak_gbps", s.peak_gbps},
                      {"peak_bytes", s.peak_bytes},
                      {"knee50_bytes", s.knee50_bytes},
                      {"knee90_bytes", s.knee90_bytes},
                      {"latency_4k_us", s.latency_4k_us ? json(*s.latency_4k_us) : json(nullptr)}};
  }
  rec["self_check"] = self_check_json(o);
  rec["env_end"] = o.env_end ? o.env_end->to_json() : json(nullptr);
  return rec;
}

}  // namespace memstrat

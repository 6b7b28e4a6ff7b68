// trace_checks.h: what tests check on a Chrome trace-event file (ChromeTrace's output, see
// common/profiler/chrome_trace.h): validate_trace_events() checks a parsed file against the
// format, trace_overlap_us() measures how long two categories of events overlap (the
// copy/compute overlap of double-buffer).
//
// Format reference: "Trace Event Format" (Google, the document linked from chrome://tracing).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace memstrat {

/// Checks a parsed trace against the trace-event format: the container (object with a
/// "traceEvents" array, or a bare array), and per event: "ph" is a known phase; "name" is a
/// string; "pid"/"tid" are integers; "ts" is a finite number (all phases but "M"); "dur" is a
/// finite number >= 0 for "X"; "args" is an object; "M" events name a known metadata kind and
/// carry its argument; "C" events carry numeric args; "B"/"E" balance per track; and "X"
/// slices on one track nest or are disjoint (Perfetto drops slices that partially overlap).
/// Returns one message per problem (at most 50, then a count); empty means valid.
std::vector<std::string> validate_trace_events(const nlohmann::json& trace);

/// Microseconds during which some "X" event whose "cat" is `cat_a` and some "X" event whose
/// "cat" is `cat_b` run at the same time (on any tracks). E.g. ("memcpy", "kernel") is the
/// copy/compute overlap. Returns 0 when there is none.
double trace_overlap_us(const nlohmann::json& trace, std::string_view cat_a,
                        std::string_view cat_b);

}  // namespace memstrat

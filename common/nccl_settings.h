// nccl_settings.h: what a multi-GPU run records and checks about NCCL, built with or without it:
// whether this build has NCCL (MEMSTRAT_HAVE_NCCL, set by CMake when it finds the library), the
// version of the library loaded, every NCCL_* environment variable (NCCL reads its settings from
// there, so the record keeps them all), and the refusal to run several GPUs unless NVLink
// multicast (NVLink SHARP, NCCL_NVLS_ENABLE) is off.
#pragma once

#include <map>
#include <string>

#ifndef MEMSTRAT_HAVE_NCCL
#error "MEMSTRAT_HAVE_NCCL is set by CMake (memstrat_use_nccl) for the targets that include this"
#endif

namespace memstrat {

/// True when this build links NCCL (several GPUs can run).
inline constexpr bool kHaveNccl = MEMSTRAT_HAVE_NCCL != 0;

/// The pip package and the CMake option that give a build NCCL, for messages.
inline constexpr const char* kNcclHowTo =
    "this build has no NCCL: `python3 -m pip install -r experiments/scripts/requirements-nccl.txt` "
    "(the nvidia-nccl-cu13 wheel), then reconfigure (CMake finds the wheel; or pass "
    "-DNCCL_ROOT=<dir with include/nccl.h and lib/libnccl.so*>) and rebuild";

/// Every variable of `envp` (a NULL-terminated "NAME=value" array, as `environ`) whose name
/// starts with NCCL_, by name.
std::map<std::string, std::string> nccl_settings(const char* const* envp);
/// nccl_settings of this process's environment.
std::map<std::string, std::string> nccl_settings();

/// "" when `settings` let a multi-GPU run start: NCCL_NVLS_ENABLE=0. Else why not and what to
/// set. NVLink SHARP / multicast reduces inside the NVSwitch, whose results may differ from call
/// to call, so a run with it on is neither reproducible nor comparable; it is off only when
/// asked for.
std::string nvls_refusal(const std::map<std::string, std::string>& settings);

/// The NCCL library's version as "major.minor.patch" (ncclGetVersion of the library loaded),
/// "" in a build without NCCL.
std::string nccl_version();

}  // namespace memstrat

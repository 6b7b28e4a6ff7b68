// build_info.h: what a `memstrat` binary is: its version, the git commit it was built from
// (and whether the tree had uncommitted changes), and the CUDA runtime it was compiled
// against. The build system defines them (CMakeLists.txt: MEMSTRAT_VERSION, MEMSTRAT_GIT_SHA,
// MEMSTRAT_GIT_DIRTY); records carry them in env, `memstrat --version` prints them.
#pragma once

#include <string>

namespace memstrat {

struct BuildInfo {
  std::string version;   // "0.1.0"
  std::string git_sha;   // "66871a6abcde", "unknown" outside a git checkout
  bool git_dirty = false;
  int cuda_runtime = 0;  // CUDART_VERSION at compile time, 13000 = CUDA 13.0
};

BuildInfo build_info();

/// 13000 -> "13.0".
std::string cuda_version_string(int v);

/// `memstrat --version`: version, commit (dirty or not), the CUDA runtime it was built with,
/// and the CUDA version the installed driver supports ("none" where no driver answers). Asks
/// the driver, nothing more: no device is needed.
std::string version_text();

}  // namespace memstrat

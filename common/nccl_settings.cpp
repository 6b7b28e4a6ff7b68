#include "common/nccl_settings.h"

#include <cstring>

#if MEMSTRAT_HAVE_NCCL
#include <nccl.h>
#endif

extern char** environ;  // POSIX

namespace memstrat {

std::map<std::string, std::string> nccl_settings(const char* const* envp) {
  std::map<std::string, std::string> out;
  if (envp == nullptr) return out;
  for (const char* const* e = envp; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    out[std::string(*e, eq)] = std::string(eq + 1);
  }
  return out;
}

std::map<std::string, std::string> nccl_settings() { return nccl_settings(environ); }

std::string nvls_refusal(const std::map<std::string, std::string>& settings) {
  const auto it = settings.find("NCCL_NVLS_ENABLE");
  if (it != settings.end() && it->second == "0") return "";
  const std::string now =
      it == settings.end() ? "it is not set" : "it is set to '" + it->second + "'";
  return "several GPUs need NVLink multicast (NVLink SHARP) off: set NCCL_NVLS_ENABLE=0 (" + now +
         "); reductions in the NVSwitch may differ from call to call, so a run with it on is "
         "neither reproducible nor comparable";
}

std::string nccl_version() {
#if MEMSTRAT_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
#else
  return "";
#endif
}

}  // namespace memstrat

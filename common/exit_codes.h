// exit_codes.h: the process exit codes every memstrat command returns (documented in README.md):
// 0 ok, 1 the run failed (a record marked "failed" is written where one was asked for), 2 bad
// option or input file, 3 no usable GPU or the request is waived on this device.
#pragma once

namespace memstrat {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDevice = 3;

}  // namespace memstrat

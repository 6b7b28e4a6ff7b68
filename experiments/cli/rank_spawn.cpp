#include "experiments/cli/rank_spawn.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace memstrat {

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("no free port on 127.0.0.1: ") + std::strerror(e));
  return ntohs(a.sin_port);
}

namespace {
int exit_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}
}  // namespace

int spawn_ranks(const std::string& exe, const std::vector<std::string>& args, int ranks, int port,
                std::ostream& err, double grace_s) {
  if (ranks < 1 || args.empty()) throw std::invalid_argument("spawn_ranks: no ranks or no argv");
  // Everything the children need is built before fork: a child only sets variables and execs.
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string world = std::to_string(ranks);
  const std::string comm = "127.0.0.1:" + std::to_string(port);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids(static_cast<std::size_t>(ranks), -1);
  err.flush();
  for (int r = 0; r < ranks; ++r) {
    const std::string rank = std::to_string(r);
    const pid_t pid = ::fork();
    if (pid < 0) {
      err << "memstrat: could not start rank " << r << ": " << std::strerror(errno) << "\n";
      for (const pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
      for (const pid_t p : pids)
        if (p > 0) ::waitpid(p, nullptr, 0);
      return 1;
    }
    if (pid == 0) {  // the child: end with the parent, take its rank, become memstrat
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::setenv("MEMSTRAT_RANK", rank.c_str(), 1);
      ::setenv("MEMSTRAT_WORLD_SIZE", world.c_str(), 1);
      ::setenv("MEMSTRAT_LOCAL_RANK", rank.c_str(), 1);
      ::setenv("NCCL_COMM_ID", comm.c_str(), 1);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);  // exec failed
    }
    pids[static_cast<std::size_t>(r)] = pid;
  }
  int first_failure = 0;
  int left = ranks;
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  while (left > 0) {
    bool reaped = false;
    for (int r = 0; r < ranks; ++r) {
      pid_t& pid = pids[static_cast<std::size_t>(r)];
      if (pid <= 0) continue;
      int st = 0;
      const pid_t got = ::waitpid(pid, &st, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      pid = -1;  // ended (or no longer ours to wait for)
      --left;
      reaped = true;
      const int code = got < 0 ? 1 : exit_status(st);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        err << "memstrat: rank " << r << " of " << ranks << " ended with exit status " << code
            << (left > 0 ? "; stopping the other ranks" : "") << "\n";
        for (const pid_t p : pids)
          if (p > 0) ::kill(p, SIGTERM);
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
      }
    }
    if (left == 0 || reaped) continue;
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      for (const pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return first_failure;
}

}  // namespace memstrat

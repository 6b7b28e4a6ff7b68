#include "experiments/core/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

namespace memstrat {

namespace fs = std::filesystem;

namespace {

std::invalid_argument bad(const char* what, const std::string& path, const std::string& why) {
  return std::invalid_argument(std::string(what) + ": '" + path + "' " + why);
}

/// Both name one file: the same inode where both exist, else the same normalised absolute path
/// (symbolic links in the existing part resolved).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace

void check_output_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw bad(what, path, "is a directory; name a file");
    if (S_ISFIFO(st.st_mode)) {  // opening a pipe for writing waits for its reader: not here
      if (::access(path.c_str(), W_OK) != 0)
        throw bad(what, path, std::string("cannot be written: ") + std::strerror(errno));
      return;
    }
    if (!S_ISREG(st.st_mode))
      throw bad(what, path,
                "is not a regular file (a device or socket, where a write can fail only at the "
                "end of the run); name a file");
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) throw bad(what, path, std::string("cannot be written: ") + std::strerror(errno));
    ::close(fd);
    return;
  }
  if (errno != ENOENT)
    throw bad(what, path, std::string("cannot be used: ") + std::strerror(errno));
  // A new file: prove it can be created, then leave nothing behind.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw bad(what, path, std::string("cannot be created: ") + std::strerror(errno) +
                              " (does the directory exist?)");
  ::close(fd);
  ::unlink(path.c_str());
}

void check_output_dir(const std::string& dir, const char* what) {
  std::error_code ec;
  const fs::path p = fs::absolute(dir, ec);
  if (ec) throw bad(what, dir, "cannot be used: " + ec.message());
  fs::path existing = p;
  while (!fs::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  if (!fs::is_directory(existing, ec)) {
    throw bad(what, dir,
              existing == p ? "exists and is not a directory"
                            : "cannot be created: '" + existing.string() + "' is not a directory");
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw bad(what, dir,
              (existing == p ? "cannot be written: " : "cannot be created in '" + existing.string() + "': ") +
                  std::string(std::strerror(errno)));
}

void check_outputs(const RunConfig& c) {
  const std::vector<std::pair<const char*, const std::string*>> files = {
      {"--json", &c.json}, {"--trace", &c.trace}, {"--loss-curve", &c.loss_curve}};
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::size_t j = i + 1; j < files.size(); ++j)
      if (!files[i].second->empty() && !files[j].second->empty() &&
          same_file(*files[i].second, *files[j].second))
        throw std::invalid_argument(std::string(files[j].first) + " and " + files[i].first +
                                    " name the same file ('" + *files[j].second +
                                    "'): each output needs a file of its own");
  for (const auto& [what, path] : files)
    if (!path->empty()) check_output_file(*path, what);
  if (!c.export_init.empty()) check_output_dir(c.export_init, "--export-init");
}

}  // namespace memstrat

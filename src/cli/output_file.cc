#include "cli/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>

namespace ringd::cli {

std::string output_file_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return path + " is a directory";
    if (::access(path.c_str(), W_OK) != 0) {
      return "cannot write " + path + ": " + std::strerror(errno);
    }
    return "";
  }
  if (errno != ENOENT) return "cannot use " + path + ": " + std::strerror(errno);
  const size_t slash = path.find_last_of('/');
  const std::string directory =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::stat(directory.c_str(), &info) != 0) {
    return errno == ENOENT ? "directory " + directory + " does not exist"
                           : "cannot use directory " + directory + ": " + std::strerror(errno);
  }
  if (!S_ISDIR(info.st_mode)) return directory + " is not a directory";
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return "cannot create files in " + directory + ": " + std::strerror(errno);
  }
  return "";
}

CLI::Validator writable_output_file() {
  return CLI::Validator(
      [](std::string& path) {
        const std::string problem = output_file_problem(path);
        return problem.empty() ? std::string() : problem + " (checked before any work)";
      },
      "", "writable file");
}

}  // namespace ringd::cli

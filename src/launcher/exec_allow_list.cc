#include "launcher/exec_allow_list.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace ringd::launcher {
namespace {

// Variable families a command may set besides PATH: Open MPI (OMPI_, OPAL_, ORTE_), PRRTE (PRTE_,
// PRRTE_), PMIx and ringd's own tunables.
constexpr const char* kPassedPrefixes[] = {"OMPI_",  "OPAL_", "ORTE_", "PRTE_",
                                           "PRRTE_", "PMIX_", "RINGD_"};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

std::string real_path(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return "";
  std::string out(resolved);
  std::free(resolved);
  return out;
}

// The absolute directories of a ':'-separated PATH: an empty or relative entry would search the
// agent's working directory, which is not the agent's own choice of programs.
std::vector<std::string> absolute_directories(const std::string& search_path) {
  std::vector<std::string> directories;
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t end = search_path.find(':', start);
    if (end == std::string::npos) end = search_path.size();
    const std::string directory = search_path.substr(start, end - start);
    if (!directory.empty() && directory[0] == '/') directories.push_back(directory);
    start = end + 1;
  }
  return directories;
}

bool executable_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string find_on(const std::string& name, const std::vector<std::string>& directories) {
  for (const std::string& directory : directories) {
    const std::string candidate = directory + "/" + name;
    if (executable_file(candidate)) return candidate;
  }
  return "";
}

struct AllowedProgram {
  std::string entry;  // as configured: a base name or an absolute path
  std::string file;   // where it is ("" when not found)
  std::string real;   // its real path
};

std::vector<AllowedProgram> allowed_programs(const std::vector<std::string>& allowed,
                                             const std::vector<std::string>& directories) {
  std::vector<AllowedProgram> programs;
  for (const std::string& entry : allowed) {
    AllowedProgram program{entry, "", ""};
    if (entry.find('/') == std::string::npos) {
      program.file = find_on(entry, directories);
    } else if (entry[0] == '/' && executable_file(entry)) {
      program.file = entry;
    }
    if (!program.file.empty()) program.real = real_path(program.file);
    programs.push_back(program);
  }
  return programs;
}

std::string describe(const std::vector<AllowedProgram>& programs) {
  std::string list;
  for (const AllowedProgram& program : programs) {
    list += (list.empty() ? "" : ", ") + program.entry;
    list += program.real.empty() ? " (not found)" : " = " + program.real;
  }
  return list;
}

}  // namespace

ProgramChoice choose_program(const std::string& word, const std::vector<std::string>& allowed,
                             const std::string& search_path) {
  const std::vector<std::string> directories = absolute_directories(search_path);
  const std::vector<AllowedProgram> programs = allowed_programs(allowed, directories);
  const auto refuse = [&](const std::string& why) {
    return ProgramChoice{"", "program '" + word + "' " + why + " (allowed: " + describe(programs) +
                                 "; the agent looks programs up on its own PATH=" + search_path +
                                 " and compares real paths; an agent runs more with --allow "
                                 "PROGRAM; docs/launcher.md)"};
  };
  std::string file;
  if (word.find('/') == std::string::npos) {
    file = find_on(word, directories);
    if (file.empty()) {
      for (const AllowedProgram& program : programs) {
        if (program.entry == word) {
          return {"", "cannot run " + word + ": not found in the agent's PATH=" + search_path};
        }
      }
      return refuse("is not allowed here");
    }
  } else if (word[0] != '/') {
    return refuse("is not allowed here: a relative path is never run");
  } else {
    file = word;
  }
  const std::string real = real_path(file);
  if (real.empty()) return refuse("is not allowed here: no such file");
  for (const AllowedProgram& program : programs) {
    if (!program.real.empty() && program.real == real) return {program.file, ""};
  }
  return refuse(real == file ? "is not allowed here" : "is not allowed here: it is " + real);
}

std::string check_environment(const ExecCommand& command) {
  for (const auto& [name, value] : command.assignments) {
    const std::string shown =
        name + "=" + (value.size() > 40 ? value.substr(0, 40) + "..." : value);
    if (starts_with(name, "LD_") || starts_with(name, "DYLD_")) {
      return "environment assignment " + shown +
             " refused: LD_* and DYLD_* variables are never passed to a command "
             "(docs/launcher.md). Open MPI sends LD_LIBRARY_PATH when mpirun runs with --prefix "
             "or by an absolute path: run mpirun by name with orted on the agents' PATH (as "
             "ringd launch does), or add --noprefix";
    }
    if (name == "PATH") continue;
    bool passed = false;
    for (const char* prefix : kPassedPrefixes) passed = passed || starts_with(name, prefix);
    if (!passed) {
      return "environment assignment " + shown +
             " refused: a command may set only PATH and OMPI_*, OPAL_*, ORTE_*, PRTE_*, "
             "PRRTE_*, PMIX_*, RINGD_* variables (docs/launcher.md)";
    }
  }
  return "";
}

}  // namespace ringd::launcher

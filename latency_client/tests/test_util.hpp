// Helpers for tests that run the built latency_stats binary: a temporary directory, running the binary with its
// output captured (or in the background, to signal it), and reading files back.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

struct TempDir {
  std::filesystem::path p;
  TempDir() {
    static std::atomic<int> n{0};
    p = std::filesystem::temp_directory_path() /
        ("latency_stats_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::create_directories(p);
  }
  ~TempDir() { std::filesystem::remove_all(p); }
};

inline int run_binary(const std::string& args, const std::filesystem::path& out) {
  std::string cmd = std::string(LATENCY_STATS_BIN) + " " + args + " > " + out.string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Starts the binary with stdout+stderr to `out`; returns its pid.
inline pid_t spawn_binary(const std::vector<std::string>& args, const std::filesystem::path& out) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(out.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> argv{const_cast<char*>(LATENCY_STATS_BIN)};
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(LATENCY_STATS_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

inline int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Helpers for tests that run the built latency_stats binary: a temporary directory, running the binary with its
// output captured (or in the background, to signal it), and reading files back; and the skip every test uses.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

// The Rust tests' skip mechanism (server/tests/skip/mod.rs), for a test that cannot run here: the reason goes to
// $HLBOOK_SKIP_LOG, which `make` lists, and under HLBOOK_NO_SKIPS=1 (CI) the skip is a failure instead.
inline bool skip_allowed(const std::string& why) {
  const char* no = std::getenv("HLBOOK_NO_SKIPS");
  if (no && std::string(no) == "1") return false;
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string("latency_tests::") + t->test_suite_name() + "." + t->name();
  std::fprintf(stderr, "SKIPPED: %s: %s\n", name.c_str(), why.c_str());
  if (const char* log = std::getenv("HLBOOK_SKIP_LOG")) std::ofstream(log, std::ios::app) << name << ": " << why << "\n";
  return true;
}

// Skips the calling test (GTEST_SKIP) or, where skips are forbidden, fails it.
#define LATENCY_SKIP(why)                                                             \
  do {                                                                                \
    if (!skip_allowed(why)) FAIL() << "would skip, which HLBOOK_NO_SKIPS=1 forbids: " << (why); \
    GTEST_SKIP() << (why);                                                            \
  } while (0)

// Start-up check of the local clock: every latency here is a difference between this host's wall clock and a
// remote one, so an unsynchronised clock makes every number wrong. Reads the kernel's NTP state (adjtimex).
#pragma once
#include <string>

namespace lat {

struct ClockState {
  bool known = false;         // the kernel answered
  bool synchronised = false;  // STA_UNSYNC clear and not TIME_ERROR
  double est_error_ms = 0;    // kernel's estimated error
  double max_error_ms = 0;    // kernel's maximum error
  bool warn = false;          // unsynchronised, unknown, or estimated error > 1 ms
  std::string line;           // "clock: ..." for the header
};

ClockState check_clock();
// Builds the state from adjtimex's answer (exposed for tests): rc = return value, status = timex.status.
ClockState clock_from(int rc, int status, long esterror_us, long maxerror_us);

}  // namespace lat

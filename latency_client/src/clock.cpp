// Kernel clock sync state through ntp_adjtime (read-only: modes = 0); see clock.hpp.
#include "clock.hpp"

#include <sys/timex.h>

#include <cstdio>

namespace lat {

ClockState clock_from(int rc, int status, long esterror_us, long maxerror_us) {
  ClockState c;
  char buf[200];
  if (rc < 0) {
    c.warn = true;
    c.line = "clock: WARNING: kernel sync state unavailable (adjtimex failed); latencies may be off by any amount";
    return c;
  }
  c.known = true;
  c.synchronised = rc != TIME_ERROR && !(status & STA_UNSYNC);
  c.est_error_ms = static_cast<double>(esterror_us) / 1000.0;
  c.max_error_ms = static_cast<double>(maxerror_us) / 1000.0;
  c.warn = !c.synchronised || c.est_error_ms > 1.0;
  std::snprintf(buf, sizeof buf, "clock: %s, estimated error %.3f ms, max error %.3f ms%s",
                c.synchronised ? "synchronised" : "NOT synchronised", c.est_error_ms, c.max_error_ms,
                !c.warn ? ""
                : !c.synchronised ? " (WARNING: the kernel says this clock is not synchronised; latencies across "
                                    "hosts are not trustworthy)"
                                  : " (WARNING: estimated error above 1 ms)");
  c.line = buf;
  return c;
}

ClockState check_clock() {
  timex tx{};
  tx.modes = 0;  // read only
  const int rc = ntp_adjtime(&tx);
  return clock_from(rc, tx.status, tx.esterror, tx.maxerror);
}

}  // namespace lat

// falcon: the command-line client of falcon-apiserver. main() only wires the terminal to the CLI.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "common/clock.h"

namespace {

size_t TerminalWidth() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    try {
      long v = std::stol(c);
      if (v > 0) return static_cast<size_t>(v);
    } catch (const std::exception&) {
    }
  }
  return 0;  // piped: never cut cells
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(true);
  falcon::SystemClock clock;
  falcon::cli::Io io;
  io.out = &std::cout;
  io.err = &std::cerr;
  io.out_is_tty = isatty(STDOUT_FILENO);
  io.err_is_tty = isatty(STDERR_FILENO);
  io.terminal_width = TerminalWidth();
  io.env = [](const char* name) -> const char* { return std::getenv(name); };
  io.clock = &clock;
  std::vector<std::string> args(argv, argv + argc);
  int code = falcon::cli::Run(args, io);
  std::cout.flush();
  return code;
}

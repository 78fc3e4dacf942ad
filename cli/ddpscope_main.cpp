// ddpscope: the command-line entry point. All logic lives in sim/cli (tested in-process).
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return ddpscope::cli::runCli(args, std::cout, std::cerr);
}

#include "cli/cli.h"

int main(int argc, char** argv) { return ringd::cli::run_command_line(argc, argv); }

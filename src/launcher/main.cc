#include "launcher/cli.h"

int main(int argc, char** argv) { return ringd::launcher::run_command_line(argc, argv); }

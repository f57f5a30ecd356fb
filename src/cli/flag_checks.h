// CLI11 checks shared by every command's flags.
//
// A floating-point flag is checked with finite_range, never with CLI::Range or
// CLI::NonNegativeNumber: those compare the value with their bounds, and every comparison with
// NaN is false, so `--lr nan` passed them (and `inf` passed an unbounded range).
// tests/cli/flag_checks_test.cc tries nan and inf on every FLOAT flag in every command's
// --help, so a flag added without this check fails there.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "ringd/error.h"

namespace ringd::cli {

// A finite number in [low, high]; "--lr: nan is not a finite number in [0 - 1000]" otherwise.
CLI::Validator finite_range(double low, double high);

// A duration in seconds as parse_seconds takes it (positive, finite, at most kMaxSeconds), checked
// while CLI11 parses, so that a bad --timeout is refused with the other flags.
CLI::Validator seconds_check(const std::string& name);

// A CLI11 validator built from one of ringd's parsers: the parser's message becomes the error.
template <typename Parse>
CLI::Validator parser_validator(const std::string& name, Parse parse) {
  return CLI::Validator(
      [name, parse](std::string& text) -> std::string {
        try {
          parse(name, text);
          return "";
        } catch (const Error& error) {
          return error.what();
        }
      },
      "", name);
}

}  // namespace ringd::cli

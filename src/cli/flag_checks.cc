#include "cli/flag_checks.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/tunables.h"

namespace ringd::cli {
namespace {

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

}  // namespace

CLI::Validator finite_range(double low, double high) {
  const std::string range = "[" + number_text(low) + " - " + number_text(high) + "]";
  return CLI::Validator(
      [low, high, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value < low || value > high) {
          return text + " is not a finite number in " + range;
        }
        return "";
      },
      "in " + range);
}

CLI::Validator seconds_check(const std::string& name) {
  return parser_validator(name,
                          [](const std::string& n, const std::string& t) { parse_seconds(n, t); });
}

}  // namespace ringd::cli

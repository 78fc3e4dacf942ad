// Small string utilities shared by parsers and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ddpscope {

std::vector<std::string> splitString(std::string_view text, char sep);
std::string_view trimString(std::string_view text);
// The words of a line: runs of characters between spaces, tabs and carriage returns.
std::vector<std::string_view> splitWhitespace(std::string_view line);
// Parses a whole string as a base-10 int64; nullopt if anything else is in it.
std::optional<int64_t> parseInt64(std::string_view text);
// Parses a whole string as a finite double; nullopt otherwise.
std::optional<double> parseDouble(std::string_view text);
// Reads a whole file; the error names the path.
StatusOr<std::string> readFileToString(const std::string& path);
// "1,234,567"
std::string formatThousands(int64_t value);
// "25.00 MiB", "1.50 KiB", "512 B"
std::string formatBytes(int64_t bytes);
// The shortest text that parses back to exactly `value` (std::to_chars): "25", "1.1",
// "0.015625", "1e-05", "inf". What messages, flags and tables print for a user's number.
std::string formatShortest(double value);

}  // namespace ddpscope

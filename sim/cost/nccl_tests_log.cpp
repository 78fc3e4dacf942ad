#include "sim/cost/nccl_tests_log.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "base/strings.h"

namespace ddpscope::sim {

namespace {

// `text` with every invalid UTF-8 byte as U+FFFD (nlohmann's own replacement): the GPU name goes
// into the calibrated cluster's JSON, which must stay valid whatever the log held.
std::string validUtf8(std::string_view text) {
  const std::string quoted = nlohmann::json(std::string(text))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

bool isWord(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The #wrong column: an integer, N/A, or (old nccl-tests) a float error like 0e+00.
bool isWrongColumn(std::string_view s) {
  return s == "N/A" || parseDouble(s).has_value();
}

constexpr size_t kMaxTestNameChars = 64;  // "all_reduce_perf", "sendrecv_perf", ...

bool isTestNameChar(char c) {
  return (c >= 'a' && c <= 'z') || c == '_';
}

// The first "<name>_perf" word of the line (the test binary), or "".
std::string_view testName(std::string_view line) {
  constexpr std::string_view kSuffix = "_perf";
  for (size_t at = line.find(kSuffix); at != std::string_view::npos;
       at = line.find(kSuffix, at + 1)) {
    const size_t end = at + kSuffix.size();
    size_t begin = at;
    while (begin > 0 && isTestNameChar(line[begin - 1])) --begin;
    const bool wordEnd = end == line.size() ||
                         !(std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_');
    if (begin < at && wordEnd && end - begin <= kMaxTestNameChars) {
      return line.substr(begin, end - begin);
    }
  }
  return {};
}

// "2.18.3" from "... NCCL version 2.18.3+cuda12.2 ...", or "".
std::string_view ncclVersion(std::string_view line) {
  constexpr std::string_view kPrefix = "NCCL version ";
  const size_t at = line.find(kPrefix);
  if (at == std::string_view::npos) return {};
  const size_t begin = at + kPrefix.size();
  size_t end = begin;
  while (end < line.size() &&
         (std::isdigit(static_cast<unsigned char>(line[end])) || line[end] == '.')) {
    ++end;
  }
  return line.substr(begin, end - begin);
}

// One "# Rank R [Group G] Pid P on HOST device D [BUS] GPU NAME" line of nccl-tests' header.
struct RankLine {
  std::string_view rank;
  std::string_view host;
  std::string_view gpu;
};

std::optional<RankLine> rankLine(std::string_view line) {
  const std::vector<std::string_view> w = splitWhitespace(line.substr(line.find('#') + 1));
  size_t i = 0;
  auto expect = [&](std::string_view word) { return i < w.size() && w[i++] == word; };
  RankLine out;
  if (!expect("Rank") || i >= w.size()) return std::nullopt;
  out.rank = w[i++];
  if (i < w.size() && w[i] == "Group") i += 2;
  if (!expect("Pid") || i >= w.size()) return std::nullopt;
  ++i;
  if (!expect("on") || i >= w.size()) return std::nullopt;
  out.host = w[i++];
  if (!expect("device") || i >= w.size()) return std::nullopt;
  const size_t bus = line.find('[', static_cast<size_t>(w[i].data() - line.data()));
  const size_t busEnd = bus == std::string_view::npos ? bus : line.find(']', bus);
  if (busEnd == std::string_view::npos) return std::nullopt;
  out.gpu = trimString(line.substr(busEnd + 1));
  return out;
}

}  // namespace

StatusOr<NcclTestsLog> parseNcclTestsLog(std::string_view text, const std::string& origin) {
  NcclTestsLog log;
  log.origin = origin;
  std::set<std::string> hosts;
  std::map<int64_t, int> rankLines;  // rank -> its line
  int lineNo = 0;
  int inPlaceOnlyHeader = 0;  // the line of a column header naming in-place times only
  size_t rowColumns = 0;      // columns of the first row (every row of one table has as many)
  const std::string again =
      ": two runs in one log? Give each run its own log (cluster calibrate takes several: "
      "--nccl-tests A,B)";
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (log.test.empty()) log.test = std::string(testName(line));
    if (log.ncclVersion.empty()) log.ncclVersion = std::string(ncclVersion(line));
    const std::string_view trimmed = trimString(line);
    if (trimmed.empty()) continue;
    if (trimmed[0] == '#') {
      if (const std::optional<RankLine> r = rankLine(trimmed)) {
        const std::string where = origin + ":" + std::to_string(lineNo);
        const std::optional<int64_t> rank = parseInt64(r->rank);
        if (!rank || *rank < 0 || *rank > (int64_t{1} << 24)) {
          return invalidArgument(where + ": rank: expected a rank number; got '" +
                                 std::string(r->rank) + "'");
        }
        if (!log.rows.empty()) {
          return invalidArgument(where + ": a '# Rank' line after the result rows (from line " +
                                 std::to_string(log.rows.front().line) + ")" + again);
        }
        if (const auto seen = rankLines.find(*rank); seen != rankLines.end()) {
          return invalidArgument(where + ": rank " + std::to_string(*rank) +
                                 " again (first at line " + std::to_string(seen->second) + ")" +
                                 again);
        }
        rankLines[*rank] = lineNo;
        hosts.insert(std::string(r->host));
        if (*rank == 0) log.gpu = validUtf8(r->gpu);
      } else if (trimmed.find("in-place") != std::string_view::npos &&
                 trimmed.find("out-of-place") == std::string_view::npos) {
        inPlaceOnlyHeader = lineNo;
      } else if (trimmed.find("out-of-place") != std::string_view::npos) {
        inPlaceOnlyHeader = 0;
      }
      continue;
    }
    const std::vector<std::string_view> w = splitWhitespace(trimmed);
    // A row starts with two integers (size, count) followed by a type and an op name.
    if (w.size() < 2 || !parseInt64(w[0]) || !parseInt64(w[1])) continue;
    const std::string where = origin + ":" + std::to_string(lineNo);
    // size count type redop [root] time algbw busbw wrong [time algbw busbw wrong]
    if (w.size() < 8 || !isWord(w[2]) || !isWord(w[3])) {
      return invalidArgument(where + ": expected an nccl-tests row 'size count type redop [root] " +
                             "time algbw busbw #wrong [time algbw busbw #wrong]'; got '" +
                             std::string(trimmed) + "'");
    }
    size_t first = 4;
    const size_t rest = w.size() - 4;
    if (rest == 9 || rest == 5) {
      first = 5;  // root column present
    } else if (rest != 8 && rest != 4) {
      return invalidArgument(where + ": expected 4 or 8 columns after 'size count type redop' " +
                             "(plus an optional root); got " + std::to_string(rest) + " in '" +
                             std::string(trimmed) + "'");
    }
    if (rowColumns == 0) {
      rowColumns = w.size();
    } else if (w.size() < rowColumns) {
      return invalidArgument(where + ": " + std::to_string(w.size()) + " columns where the rows " +
                             "before have " + std::to_string(rowColumns) +
                             ": a truncated row (the table was cut off?) in '" +
                             std::string(trimmed) + "'");
    }
    if (rest <= 5 && inPlaceOnlyHeader > 0) {
      return invalidArgument(where + ": only in-place columns (the header at line " +
                             std::to_string(inPlaceOnlyHeader) +
                             " names no out-of-place ones); the calibration fits the "
                             "out-of-place time: give the table as all_reduce_perf prints it");
    }
    NcclTestsRow row;
    row.line = lineNo;
    row.bytes = *parseInt64(w[0]);
    if (!log.rows.empty() && row.bytes <= log.rows.back().bytes) {
      return invalidArgument(where + ": size " + std::to_string(row.bytes) + " after " +
                             std::to_string(log.rows.back().bytes) + " (line " +
                             std::to_string(log.rows.back().line) + "): sizes must increase" +
                             again);
    }
    row.redop = std::string(w[3]);
    if (first == 5) {
      const std::optional<int64_t> root = parseInt64(w[4]);
      if (!root) {
        return invalidArgument(where + ": root: expected an integer (-1 for allreduce); got '" +
                               std::string(w[4]) + "'");
      }
      row.root = *root;
    }
    auto column = [&](size_t i, const char* name) -> StatusOr<double> {
      std::optional<double> v = parseDouble(w[i]);
      if (!v || !(*v >= 0)) {
        return invalidArgument(where + ": " + name + ": expected a non-negative number; got '" +
                               std::string(w[i]) + "'");
      }
      return *v;
    };
    if (row.bytes < 0) {
      return invalidArgument(where + ": size: expected a byte count >= 0; got '" +
                             std::string(w[0]) + "'");
    }
    ASSIGN_OR_RETURN(row.outOfPlaceUs, column(first, "out-of-place time"));
    ASSIGN_OR_RETURN(row.outOfPlaceBusbw, column(first + 2, "out-of-place busbw"));
    if (!isWrongColumn(w[first + 3])) {
      return invalidArgument(where + ": #wrong: expected a count, an error or N/A; got '" +
                             std::string(w[first + 3]) + "'");
    }
    if (w.size() >= first + 8) {
      ASSIGN_OR_RETURN(row.inPlaceUs, column(first + 4, "in-place time"));
      ASSIGN_OR_RETURN(row.inPlaceBusbw, column(first + 6, "in-place busbw"));
    }
    if (row.bytes > 0 && !(row.timeUs() > 0)) {
      return invalidArgument(where + ": time: expected a positive time (µs) for " +
                             std::to_string(row.bytes) + " bytes");
    }
    log.rows.push_back(row);
  }
  // Rows with 0 bytes time nothing: drop them.
  log.rows.erase(std::remove_if(log.rows.begin(), log.rows.end(),
                                [](const NcclTestsRow& r) { return r.bytes == 0; }),
                 log.rows.end());
  if (log.rows.empty()) {
    return invalidArgument(origin +
                           ": no nccl-tests result rows found (expected lines like "
                           "'   1024   256   float   sum   -1   31.2   0.03   0.06   0   ...')");
  }
  log.ranks = static_cast<int>(rankLines.size());
  log.nodes = static_cast<int>(hosts.size());
  return log;
}

StatusOr<NcclTestsLog> loadNcclTestsLog(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  return parseNcclTestsLog(text, path);
}

}  // namespace ddpscope::sim

#include "sim/topo/topo_matrix.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <utility>

#include "base/strings.h"
#include "io/file_input.h"

namespace ddpscope::sim::topo {

namespace {

constexpr int kMaxNvlinks = 64;  // far above any GPU's NVLink count (B200: 18)
constexpr const char* kLinkTokens = "X, NV<n>, PIX, PXB, PHB, NODE or SYS";
// The affinity titles newer drivers print after the device columns, in their order.
constexpr std::string_view kAffinityTitles[] = {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"};

bool isGpuLabel(std::string_view label) {
  if (label.size() < 4 || label.substr(0, 3) != "GPU") return false;
  for (char c : label.substr(3)) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::optional<TopoLink> parseLinkToken(std::string_view token) {
  if (token == "X") return TopoLink{LinkKind::kSelf, 0};
  if (token == "PIX") return TopoLink{LinkKind::kPix, 0};
  if (token == "PXB") return TopoLink{LinkKind::kPxb, 0};
  if (token == "PHB") return TopoLink{LinkKind::kPhb, 0};
  if (token == "NODE") return TopoLink{LinkKind::kNode, 0};
  if (token == "SYS" || token == "SOC") return TopoLink{LinkKind::kSys, 0};
  if (token.size() > 2 && token.substr(0, 2) == "NV") {
    std::optional<int64_t> n = parseInt64(token.substr(2));
    if (n && *n >= 1 && *n <= kMaxNvlinks) return TopoLink{LinkKind::kNvlink, static_cast<int>(*n)};
  }
  return std::nullopt;
}

class Parser {
 public:
  explicit Parser(std::string origin) : m_origin(std::move(origin)) {}

  StatusOr<TopoMatrix> parse(std::string_view text) {
    std::vector<std::string_view> lines = splitLines(text);
    TopoMatrix m;
    m.origin = m_origin;
    size_t i = 0;
    for (; i < lines.size(); ++i) {
      std::vector<std::string_view> t = splitWhitespace(lines[i]);
      // The header starts with a GPU label and, unlike a row, has no link token after it.
      if (!t.empty() && isGpuLabel(t[0]) && (t.size() == 1 || !parseLinkToken(t[1]))) break;
    }
    if (i == lines.size()) {
      return invalidArgument(m_origin +
                             ": no `nvidia-smi topo -m` matrix found: expected a header line "
                             "whose first column is GPU0 (e.g. \"        GPU0    GPU1    mlx5_0    "
                             "CPU Affinity\")");
    }
    m.headerLine = static_cast<int>(i) + 1;
    ASSIGN_OR_RETURN(int titles, parseHeader(lines[i], m));
    const size_t n = m.devices.size();
    m.links.assign(n, std::vector<TopoLink>(n));
    ++i;
    for (size_t r = 0; r < n; ++r, ++i) {
      if (i >= lines.size() || splitWhitespace(lines[i]).empty()) {
        std::string missing;
        for (size_t k = r; k < n; ++k) {
          if (k > r) missing += ", ";
          missing += m.devices[k].label;
        }
        const int lineNo = static_cast<int>(std::min(i + 1, lines.size()));
        return invalidArgument(at(lineNo) + "truncated matrix: " + std::to_string(r) + " of " +
                               std::to_string(n) + " rows (the header has " + std::to_string(n) +
                               " columns; missing rows: " + missing + ")");
      }
      RETURN_IF_ERROR(parseRow(lines[i], static_cast<int>(i) + 1, r, titles, m));
    }
    RETURN_IF_ERROR(checkSymmetric(m));
    // The NIC legend (newer drivers): "  NIC0: mlx5_0".
    for (; i < lines.size(); ++i) {
      std::vector<std::string_view> t = splitWhitespace(lines[i]);
      if (t.size() != 2 || t[0].size() < 2 || t[0].back() != ':') continue;
      std::string_view label = t[0].substr(0, t[0].size() - 1);
      for (TopoDevice& d : m.devices) {
        if (!d.isGpu && d.label == label) d.name = std::string(t[1]);
      }
    }
    return m;
  }

 private:
  static std::vector<std::string_view> splitLines(std::string_view text) {
    std::vector<std::string_view> lines;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      lines.push_back(line);
      if (end == text.size()) break;
      start = end + 1;
    }
    return lines;
  }

  std::string at(int line) const { return m_origin + ":" + std::to_string(line) + ": "; }

  // Fills m.devices from the header; returns the number of affinity titles after them.
  StatusOr<int> parseHeader(std::string_view line, TopoMatrix& m) const {
    std::vector<std::string_view> t = splitWhitespace(line);
    size_t k = 0;
    bool sawNic = false;
    int nextGpu = 0;
    for (; k < t.size(); ++k) {
      if (k + 1 < t.size() &&
          ((t[k] == "CPU" && t[k + 1] == "Affinity") ||
           (t[k] == "NUMA" && t[k + 1] == "Affinity") || (t[k] == "GPU" && t[k + 1] == "NUMA"))) {
        break;
      }
      TopoDevice d;
      d.label = std::string(t[k]);
      d.name = d.label;
      d.isGpu = isGpuLabel(t[k]);
      if (d.isGpu) {
        if (sawNic || d.label != "GPU" + std::to_string(nextGpu)) {
          return invalidArgument(at(m.headerLine) + "header column '" + d.label +
                                 "': expected GPU" + std::to_string(nextGpu) +
                                 (sawNic ? " before the NIC columns" : "") +
                                 " (GPU columns come first, numbered from GPU0)");
        }
        ++nextGpu;
      } else {
        sawNic = true;
      }
      for (const TopoDevice& other : m.devices) {
        if (other.label == d.label) {
          return invalidArgument(at(m.headerLine) + "header column '" + d.label +
                                 "' appears twice");
        }
      }
      m.devices.push_back(std::move(d));
    }
    // The rest: affinity titles, each at most once and in the driver's order.
    std::string rest;
    for (; k < t.size(); ++k) {
      if (!rest.empty()) rest += ' ';
      rest += t[k];
    }
    int titles = 0;
    std::string_view r = rest;
    for (std::string_view title : kAffinityTitles) {
      if (r.substr(0, title.size()) == title) {
        ++titles;
        r.remove_prefix(std::min(r.size(), title.size() + 1));
      }
    }
    if (!r.empty()) {
      return invalidArgument(at(m.headerLine) + "unexpected header text '" + std::string(r) +
                             "'; expected device columns, then any of \"CPU Affinity\", "
                             "\"NUMA Affinity\", \"GPU NUMA ID\"");
    }
    return titles;
  }

  Status parseRow(std::string_view line, int lineNo, size_t r, int titles, TopoMatrix& m) const {
    TopoDevice& dev = m.devices[r];
    dev.line = lineNo;
    const size_t n = m.devices.size();
    std::vector<std::string_view> t = splitWhitespace(line);
    if (t[0] != dev.label) {
      return invalidArgument(at(lineNo) + "row '" + std::string(t[0]) + "' where row " +
                             std::to_string(r + 1) + " should be '" + dev.label +
                             "' (rows must follow the header's columns: mismatched rows and "
                             "columns, or a truncated matrix)");
    }
    const size_t maxExtra = dev.isGpu ? static_cast<size_t>(titles) : 0;
    if (t.size() - 1 < n || t.size() - 1 > n + maxExtra) {
      return invalidArgument(
          at(lineNo) + "row " + dev.label + " has " + std::to_string(t.size() - 1) +
          " entries; expected " + std::to_string(n) + " links (one per header column)" +
          (maxExtra > 0 ? " then up to " + std::to_string(maxExtra) + " affinity values" : ""));
    }
    for (size_t c = 0; c < n; ++c) {
      std::optional<TopoLink> link = parseLinkToken(t[c + 1]);
      if (!link) {
        return invalidArgument(at(lineNo) + "unknown link token '" + std::string(t[c + 1]) +
                               "' in row " + dev.label + ", column " + m.devices[c].label +
                               "; expected " + kLinkTokens);
      }
      if ((link->kind == LinkKind::kSelf) != (c == r)) {
        return invalidArgument(at(lineNo) + "row " + dev.label + ", column " + m.devices[c].label +
                               ": '" + std::string(t[c + 1]) + "'; " +
                               (c == r ? "expected X on the diagonal"
                                       : "X belongs on the diagonal only (a row or column is "
                                         "missing or shifted?)"));
      }
      m.links[r][c] = *link;
    }
    if (t.size() > n + 1) dev.cpuAffinity = std::string(t[n + 1]);
    if (t.size() > n + 2) dev.numaAffinity = std::string(t[n + 2]);
    return Status::ok();
  }

  Status checkSymmetric(const TopoMatrix& m) const {
    for (size_t i = 0; i < m.devices.size(); ++i) {
      for (size_t j = i + 1; j < m.devices.size(); ++j) {
        const TopoLink& a = m.links[i][j];
        const TopoLink& b = m.links[j][i];
        if (a.kind != b.kind || a.nvlinks != b.nvlinks) {
          return invalidArgument(at(m.devices[j].line) + "row " + m.devices[j].label + " says " +
                                 b.token() + " to " + m.devices[i].label + ", but row " +
                                 m.devices[i].label + " (line " +
                                 std::to_string(m.devices[i].line) + ") says " + a.token() +
                                 " to " + m.devices[j].label + "; expected a symmetric matrix");
        }
      }
    }
    return Status::ok();
  }

  std::string m_origin;
};

}  // namespace

std::string_view linkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kSelf:
      return "X";
    case LinkKind::kNvlink:
      return "NV";
    case LinkKind::kPix:
      return "PIX";
    case LinkKind::kPxb:
      return "PXB";
    case LinkKind::kPhb:
      return "PHB";
    case LinkKind::kNode:
      return "NODE";
    case LinkKind::kSys:
      return "SYS";
  }
  return "?";
}

std::string TopoLink::token() const {
  return kind == LinkKind::kNvlink ? "NV" + std::to_string(nvlinks)
                                   : std::string(linkKindName(kind));
}

std::vector<int> TopoMatrix::gpuIndices() const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].isGpu) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> TopoMatrix::nicIndices() const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].isGpu) out.push_back(static_cast<int>(i));
  }
  return out;
}

StatusOr<TopoMatrix> parseTopoMatrix(std::string_view text, const std::string& origin) {
  return Parser(origin).parse(text);
}

StatusOr<TopoMatrix> loadTopoFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, io::readFileBytes(path));
  return parseTopoMatrix(text, path);
}

}  // namespace ddpscope::sim::topo
